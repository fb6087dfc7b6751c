--
-- durable.execute_in_partition(): on Citus, the call by which a node runs
-- a statement of one partition on the node of its shards (src/store/
-- delegate.c).  On one server it runs the statement here; its inputs are
-- checked the same way.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 9000) AS first_id_counter;
SELECT durable_create_queue('delegated', partitions => 1);
SELECT partition_base AS p FROM durable.queues WHERE queue_name = 'delegated' \gset
SELECT durable_enqueue('delegated', '{"n": 1}') AS t \gset

-- claim_one's values, each in its type's binary send format: no setting
-- of the session changes them
SET TimeZone = 'Pacific/Chatham';
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'iso_8601';
\set claim_values 'ARRAY[int4send(:p), textsend(''delegated''), timestamptz_send(now()), int4send(1), textsend(''w1''), interval_send(''1 minute''), timestamptz_send(now() + interval ''1 minute''), textsend(current_user::text), NULL, NULL]'
\set claimed 'AS r(task_id bigint, fence bigint, lease_until timestamptz, attempt int, payload jsonb, checkpoint jsonb, versions jsonb, run_at timestamptz)'
-- (13 is SPI_OK_UPDATE_RETURNING, what claim_one returns)
SELECT task_id = :t AS claimed, fence, attempt, payload,
       lease_until = now() + interval '1 minute' AS lease_until_as_sent
FROM durable.execute_in_partition(:p, 'claim_one', :claim_values, 13) :claimed;
SELECT state, owner, lease = interval '1 minute' AS lease_as_sent
FROM durable.tasks WHERE task_id = :t;
RESET TimeZone;
RESET DateStyle;
RESET IntervalStyle;

-- what it is called with is checked (a task ready to be claimed by any
-- of these that ran)
SELECT durable_enqueue('delegated', '{"n": 2}') AS t2 \gset
\set VERBOSITY terse
SELECT * FROM durable.execute_in_partition(:p, 'DROP TABLE durable.queues', :claim_values, 13) :claimed;
SELECT * FROM durable.execute_in_partition(:p, 'queue_get', :claim_values, 13) :claimed;
SELECT * FROM durable.execute_in_partition(:p, 'claim_one', ARRAY[int4send(:p)], 13) :claimed;
SELECT * FROM durable.execute_in_partition(0, 'claim_one', :claim_values, 13) :claimed;
SELECT * FROM durable.execute_in_partition(:p, 'claim_one', ARRAY[ARRAY[int4send(:p)]], 13) :claimed;
SELECT * FROM durable.execute_in_partition(:p, 'claim_one',
    ARRAY[int4send(:p), textsend('delegated'), '\x00'::bytea, int4send(1), textsend('w1'), interval_send('1 minute'), timestamptz_send(now()), textsend(current_user::text), NULL, NULL], 13) :claimed;
SELECT * FROM durable.execute_in_partition(:p, 'claim_one',
    ARRAY[int4send(:p), textsend('delegated'), timestamptz_send(now()) || '\x00'::bytea, int4send(1), textsend('w1'), interval_send('1 minute'), timestamptz_send(now()), textsend(current_user::text), NULL, NULL], 13) :claimed;
SELECT * FROM durable.execute_in_partition(:p, 'claim_one', :claim_values, 13) AS r(task_id bigint);
SELECT * FROM durable.execute_in_partition(:p, 'claim_one', :claim_values, 13) AS r(task_id text, fence bigint, lease_until timestamptz, attempt int, payload jsonb, checkpoint jsonb, versions jsonb, run_at timestamptz);
SELECT * FROM durable.execute_in_partition(:p, 'claim_one', :claim_values, 5) :claimed;
-- and nothing was claimed by those
SELECT state, fence FROM durable.tasks WHERE task_id = :t2;

-- only durable's owner calls it, from within durable's functions
CREATE ROLE regress_delegated_ops IN ROLE durable_operator;
SET ROLE regress_delegated_ops;
SELECT * FROM durable.execute_in_partition(:p, 'claim_one', :claim_values, 13) :claimed;
RESET ROLE;
DROP ROLE regress_delegated_ops;
SELECT state FROM durable.tasks WHERE task_id = :t2;
SELECT count(*) AS disagreements FROM durable_verify();

-- leave none of this file's tasks behind
SELECT durable_cancel(:t, 'done'), durable_cancel(:t2, 'done');
SELECT durable_drop_queue('delegated');
SELECT count(*) AS left_behind FROM durable.tasks WHERE queue_name = 'delegated';

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'delegated'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
