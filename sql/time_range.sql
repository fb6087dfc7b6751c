--
-- No time outside the timestamptz range is ever stored, and no interval
-- that must be positive can end in the past.
--
SELECT setval('durable.task_seq', 7000) AS first_id_counter;

-- refill rates: a clear range at creation and change
SELECT durable_create_queue('r1', retry_capacity => 1, retry_refill_rate => 1.0843e-13);
SELECT durable_create_queue('r1', retry_capacity => 1, retry_refill_rate => 1e-300);
SELECT durable_create_queue('r1', retry_capacity => 1, retry_refill_rate => 1e7);
SELECT durable_create_queue('r1', retry_capacity => 1, retry_refill_rate => 'NaN');
SELECT durable_create_queue('r1', retry_capacity => 1, retry_refill_rate => 'Infinity');
SELECT durable_create_queue('r1', retry_capacity => 1, retry_refill_rate => 0.000001);
SELECT durable_alter_queue('r1', retry_refill_rate => 1e-300);
SELECT durable_alter_queue('r1', retry_refill_rate => 1000000);
SELECT retry_refill_rate::numeric AS retry_refill_rate FROM durable.queues WHERE queue_name = 'r1';
-- a rate that bypasses the API is refused by the table
\set VERBOSITY terse
UPDATE durable.queues SET retry_refill_rate = 1e-300 WHERE queue_name = 'r1';
\set VERBOSITY default

-- a deficit so deep that the next token lies past the timestamp range:
-- the failure is 22008 and nothing is written (the task stays running)
SELECT durable_create_queue('deep', retry_capacity => 1, retry_refill_rate => 0.000001,
                            retry_base => 1, retry_cap => 1, max_attempts => 5);
UPDATE durable.queues SET retry_tokens = -1e13 WHERE queue_name = 'deep';
SELECT durable_enqueue('deep', '{}') AS t \gset
SELECT fence AS f FROM durable_claim('deep', 'w') \gset
SELECT durable_fail(:t, :f, 'transient', '{"e": 1}');
SELECT state, fence, run_at < 'infinity' AS finite_run_at FROM durable.tasks WHERE task_id = :t;
SELECT retry_tokens::numeric AS retry_tokens FROM durable.queues WHERE queue_name = 'deep';
-- within the range, the retry is deferred to when its token will be there
UPDATE durable.queues SET retry_tokens = -1e6 WHERE queue_name = 'deep';
SELECT durable_fail(:t, :f, 'transient', '{"e": 1}');
SELECT state, run_at > now() + interval '30 years' AS deferred_decades
FROM durable.tasks WHERE task_id = :t;

-- a lease, lock or timeout whose parts have different signs: what it adds
-- depends on the date it is added to, so it is refused
SELECT durable_create_queue('mixed', lease => '-10 mon 300 days 1 second');
SELECT durable_create_queue('mixed', lease => '1 day -1 second');
SELECT durable_create_queue('mixed', progress_timeout => '1 mon -29 days');
SELECT durable_create_queue('mixed');
SELECT durable_enqueue('mixed', '{}') AS tm \gset
SELECT * FROM durable_claim('mixed', 'w', lease => '-10 mon 300 days 1 second');
SELECT durable_create_queue('tr');
SELECT * FROM durable_idempotent_begin('tr', 's', 'mixed', '{}', lock => '-10 mon 300 days 1 second');
SELECT * FROM durable_outbox_claim('tr', 'p', lease => '1 mon -30 days 1 second');
SELECT fence AS fm FROM durable_claim('mixed', 'w') \gset
SELECT durable_heartbeat(:tm, :fm, lease => '-1 day 86401 seconds');
-- a lease too long to count in microseconds is 22008, nothing written
SELECT durable_heartbeat(:tm, :fm, lease => '300000 years');
SELECT lease_until < now() + interval '1 day' AS lease_kept FROM durable.tasks WHERE task_id = :tm;
SELECT durable_cancel(:tm, 'done');
SELECT durable_enqueue('mixed', '{}') AS tm2 \gset
SELECT * FROM durable_claim('mixed', 'w', lease => '300000 years');
SELECT state, fence FROM durable.tasks WHERE task_id = :tm2;

-- an interval that would leave the range when added to or subtracted from
-- the current time (the stuck alarm subtracts progress_timeout at every
-- tick) is 22008 when it is given, not at every tick after
SELECT durable_create_queue('far', progress_timeout => '200000 years');
SELECT durable_create_queue('far', lease => '290000 years');
SELECT durable_alter_queue('mixed', progress_timeout => '200000 years');
SELECT progress_timeout FROM durable.queues WHERE queue_name = 'mixed';
DO $$ BEGIN PERFORM durable_reconcile(); END $$;  -- the tick runs under it without an error

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'deep,far,mixed,r1,tr'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
