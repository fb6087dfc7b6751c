--
-- The hot calls go to one node at a time (tools/citus; citus.sql has
-- distributed durable): what each sends to other nodes, and whether it
-- commits in two phases, from a worker's session and from the
-- coordinator's.
--
-- Citus logs each command it sends to another node (NOTICE "issuing ...",
-- citus.log_remote_commands); here into the server's log, whose file is
-- the data directory's name with ".log" (as tools/citus starts the nodes),
-- counted for this backend.  Commands a node runs on its own shards are
-- not sent anywhere.  Two-phase commits are counted as in citus.sql.
--
SET client_min_messages = warning;
\set VERBOSITY terse
\set remote_commands '(SELECT count(*) FROM pg_catalog.regexp_split_to_table(pg_catalog.pg_read_file(pg_catalog.current_setting(''data_directory'') || ''.log''), E''\\n'') l WHERE l ~ (''\\['' || pg_catalog.pg_backend_pid() || ''\\] .*NOTICE:  issuing ''))'
\set my_two_phase '(SELECT FROM pg_dist_transaction WHERE gid ~ (''^citus_[0-9]+_'' || pg_backend_pid() || ''_'')) t'

-- a queue with partitions on both workers (the coordinator holds no shards)
SELECT durable_create_queue('hot', partitions => 8, lease => '5 minutes');
SELECT count(durable_enqueue('hot', jsonb_build_object('n', i))) AS enqueued
FROM generate_series(1, 80) i;
-- (the node of a partition, from Citus's metadata)
\set node_of '(SELECT groupid FROM pg_dist_placement WHERE shardid = get_shard_id_for_distribution_column(''durable.live_tasks'', '
CREATE TEMP TABLE hot_partitions AS
SELECT DISTINCT partition_key FROM durable.tasks WHERE queue_name = 'hot';
SELECT :node_of partition_key)) AS groupid, count(*) > 0 AS has_partitions
FROM hot_partitions GROUP BY 1 ORDER BY 1;
SELECT nodeport AS worker1 FROM pg_dist_node WHERE groupid = 1 \gset
SELECT nodeport AS coordinator FROM pg_dist_node WHERE groupid = 0 \gset
SELECT durable_outbox_emit('hot', 'hot-topic', jsonb_build_object('n', i), 'key-' || i) IS NOT NULL AS emitted
FROM generate_series(1, 1) i;

-- ---- a worker's session: its own node's partitions, nothing sent ----
\c postgres - 127.0.0.1 :worker1
SET client_min_messages = warning;
SET log_min_messages = notice;
SET citus.log_remote_commands = on;
\set VERBOSITY terse
SELECT count(*) AS two_phase_before FROM :my_two_phase \gset
-- a claim of one task, where this node has ready work
SELECT :remote_commands AS before \gset
CREATE TEMP TABLE held AS SELECT task_id, fence FROM durable_claim('hot', 'w1');
SELECT :remote_commands - :before AS remote_commands;
SELECT count(*) AS claimed, bool_and(:node_of (task_id & 32767)::int)) = 1) AS on_this_node
FROM held;
-- a batch as large as the node's ready work: the node's partitions first
CREATE TEMP TABLE ready AS
SELECT partition_key, count(*) AS n FROM durable.tasks
WHERE queue_name = 'hot' AND state = 'ready' GROUP BY 1;
SELECT sum(n) AS local_ready FROM ready WHERE :node_of partition_key)) = 1 \gset
SELECT :remote_commands AS before \gset
INSERT INTO held SELECT task_id, fence FROM durable_claim('hot', 'w1', batch => :local_ready);
SELECT :remote_commands - :before AS remote_commands;
SELECT count(*) - 1 = :local_ready AS claimed_all_local,
       bool_and(:node_of (task_id & 32767)::int)) = 1) AS on_this_node
FROM held;
-- each of them begun where it is: nothing sent
SELECT :remote_commands AS before \gset
SELECT count(*) AS begun FROM held CROSS JOIN LATERAL durable_begin(held.task_id, held.fence) b;
SELECT :remote_commands - :before AS remote_commands;
-- the worker loop's heartbeat and a batch commit of this node's tasks
SELECT :remote_commands AS before \gset
SELECT count(*) AS renewed, count(lease_until) AS held
FROM durable_heartbeat_batch((SELECT array_agg(task_id) FROM held),
                             (SELECT array_agg(fence) FROM held));
SELECT :remote_commands - :before AS remote_commands;
SELECT :remote_commands AS before \gset
SELECT durable_commit_batch(array_agg(task_id), array_agg(fence)) AS committed FROM held;
SELECT :remote_commands - :before AS remote_commands;
SELECT count(*) - :two_phase_before AS two_phase_commits FROM :my_two_phase;
-- with no ready work left on this node, a claim reads the other node's
-- partitions and takes there
SELECT :remote_commands AS before \gset
SELECT count(*) AS claimed_elsewhere FROM durable_claim('hot', 'w1', batch => 1);
SELECT :remote_commands - :before > 0 AS sent_elsewhere;
SELECT count(*) - :two_phase_before AS two_phase_commits FROM :my_two_phase;

-- tasks without a key, one or a batch, go to this node's partitions:
-- nothing sent, and a claim here finds them here
SELECT :remote_commands AS before \gset
CREATE TEMP TABLE batch AS
SELECT unnest(durable_enqueue_batch('hot', array_fill('{}'::jsonb, ARRAY[16]))) AS task_id;
INSERT INTO batch SELECT durable_enqueue('hot', '{}') FROM generate_series(1, 4);
SELECT :remote_commands - :before AS remote_commands;
SELECT count(*) FILTER (WHERE here) AS here, count(*) FILTER (WHERE NOT here) AS elsewhere,
       count(DISTINCT task_id & 32767) AS partitions
FROM (SELECT task_id, :node_of (task_id & 32767)::int)) = 1 AS here FROM batch) b;
SELECT count(*) - :two_phase_before AS two_phase_commits FROM :my_two_phase;
SELECT :remote_commands AS before \gset
CREATE TEMP TABLE local_claims AS
SELECT task_id, fence FROM durable_claim('hot', 'w1', batch => 20);
SELECT :remote_commands - :before AS remote_commands;
SELECT count(*) AS claimed, count(*) FILTER (WHERE task_id IN (SELECT task_id FROM batch))
         AS those_enqueued
FROM local_claims;
SELECT durable_commit_batch(array_agg(task_id), array_agg(fence)) AS committed
FROM local_claims;

-- a backend's memory does not grow with its calls: their plans are kept
-- once per partition (Citus would keep one more plan per call of a kept
-- plan whose partition_key is a parameter).  Not while Citus logs the
-- commands it runs: it writes each one out into the plan it runs.
SET citus.log_remote_commands = off;
\set cycles 'DO $$ DECLARE c record; BEGIN FOR i IN 1..200 LOOP PERFORM durable_enqueue(''hot'', ''{}''); SELECT task_id, fence INTO STRICT c FROM durable_claim(''hot'', ''w1''); PERFORM durable_commit(c.task_id, c.fence, ''{}''); COMMIT; END LOOP; END $$'
:cycles;
SELECT sum(total_bytes) AS memory_before FROM pg_backend_memory_contexts \gset
:cycles;
:cycles;
:cycles;
:cycles;
:cycles;
SELECT sum(total_bytes) - :memory_before < 1024 * 1024 AS memory_steady
FROM pg_backend_memory_contexts;
-- and those calls plan nothing in Citus: on this node they run in the
-- partition's shards, with plans kept as on one server (store/shard.c).
-- Citus logs each statement it plans at DEBUG2
\set plannings '(SELECT count(*) FROM pg_catalog.regexp_split_to_table(pg_catalog.pg_read_file(pg_catalog.current_setting(''data_directory'') || ''.log''), E''\\n'') l WHERE l ~ (''\\['' || pg_catalog.pg_backend_pid() || ''\\] .*DEBUG:  (Creating router plan|Distributed planning for a fast-path router query)''))'
SET log_min_messages = debug2;
SELECT :plannings AS before \gset
SELECT durable_enqueue('hot', '{}') IS NOT NULL AS enqueued;
SELECT :plannings - :before AS enqueue_plannings;
SELECT :plannings AS before \gset
SELECT task_id, fence FROM durable_claim('hot', 'w1') \gset
SELECT :plannings - :before AS claim_plannings;
SELECT :plannings AS before \gset
SELECT durable_commit(:task_id, :fence, '{}');
SELECT :plannings - :before AS commit_plannings;
SET log_min_messages = notice;
SELECT count(*) - :two_phase_before AS two_phase_commits FROM :my_two_phase;

-- what a call writes in a shard here, Citus's statements of the same
-- transaction see, and roll back with it
BEGIN;
SELECT durable_enqueue('hot', '{"in": "transaction"}') AS t \gset
SELECT count(*) AS seen FROM durable.tasks WHERE task_id = :t;
SELECT count(*) AS seen_by_key FROM durable.live_tasks WHERE payload = '{"in": "transaction"}';
ROLLBACK;
SELECT count(*) AS rolled_back FROM durable.tasks WHERE task_id = :t;
-- a transaction that has reached this node over a connection (Citus then
-- never runs its statements here) leaves the call's statements to Citus,
-- whose later statements over that connection see what it wrote
BEGIN;
SET LOCAL citus.enable_local_execution = off;
SELECT count(*) >= 0 AS read_over_connections FROM durable.live_tasks;
SET LOCAL citus.enable_local_execution = on;
SELECT durable_enqueue('hot', '{"in": "connected"}') AS t \gset
SELECT count(*) AS seen FROM durable.live_tasks WHERE payload = '{"in": "connected"}';
ROLLBACK;
SELECT count(*) AS rolled_back FROM durable.tasks WHERE task_id = :t;
-- a finish in a shard here that a started step of its task refuses says
-- so (55U04) and moves nothing, in a session whose claim went there first;
-- the step's failure then ends the task there
\set VERBOSITY sqlstate
SELECT durable_create_queue('refused', partitions => 8);
SELECT durable_enqueue('refused', '{}') AS t \gset
SELECT task_id = :t AS claimed_it, fence AS f FROM durable_claim('refused', 'w1') \gset
SELECT :'claimed_it' AS claimed_it;
SELECT version AS v FROM durable_step(:t, :f, 's', 'idempotent') \gset
SELECT durable_step_start(:t, :f, 's', :v) > :v AS started;
SELECT durable_commit(:t, :f, '{}');
SELECT state FROM durable.tasks WHERE task_id = :t;
SELECT durable_fail(:t, :f, 'permanent', step => 's');
SELECT state, stop_code FROM durable.tasks WHERE task_id = :t;
SELECT count(*) AS steps_moved FROM durable.step_history WHERE task_id = :t;
\set VERBOSITY terse
-- a write here and a write on the other node commit together, in two
-- phases, as Citus's own writes here would
SELECT count(*) AS two_phase_before FROM :my_two_phase \gset
SELECT partition_base AS base, partitions FROM durable.queues WHERE queue_name = 'hot' \gset
SELECT array_agg(p) AS there_partitions
FROM (SELECT (:base + i) % 32768 AS p FROM generate_series(0, :partitions - 1) i) x
WHERE :node_of p)) = 2 \gset
SELECT task_id AS there FROM durable.tasks
WHERE queue_name = 'hot' AND state = 'ready'
  AND partition_key = ANY (:'there_partitions') LIMIT 1 \gset
BEGIN;
SELECT durable_enqueue('hot', '{"with": "elsewhere"}') IS NOT NULL AS enqueued_here;
SELECT durable_cancel(:there, 'with a write here');
COMMIT;
SELECT count(*) - :two_phase_before AS two_phase_commits FROM :my_two_phase;
SELECT (SELECT state FROM durable.tasks WHERE task_id = :there) AS there,
       (SELECT count(*) FROM durable.tasks WHERE payload = '{"with": "elsewhere"}') AS here;
-- every row a call wrote in a shard is in the shard of its partition_key
SELECT table_name, sum(misplaced) AS misplaced
FROM (VALUES ('durable.live_tasks'), ('durable.event_log'), ('durable.task_history'),
             ('durable.live_steps'), ('durable.step_history')) t(table_name),
LATERAL (SELECT result::bigint AS misplaced FROM run_command_on_shards(t.table_name,
  format($$SELECT count(*) FROM %%1$s x WHERE pg_catalog.get_shard_id_for_distribution_column(%L, x.partition_key)
           <> pg_catalog.substring('%%1$s', '_([0-9]+)$')::bigint$$, t.table_name))) r
GROUP BY 1 ORDER BY 1;

-- ---- the coordinator's session: every shard is elsewhere ----
\c postgres - 127.0.0.1 :coordinator
SET client_min_messages = warning;
\set VERBOSITY terse
SELECT durable_create_queue('hot2', partitions => 8, lease => '5 minutes');
SELECT count(durable_enqueue('hot2', jsonb_build_object('n', i))) AS enqueued
FROM generate_series(1, 80) i;
SET log_min_messages = notice;
SET citus.log_remote_commands = on;
SELECT count(*) AS two_phase_before FROM :my_two_phase \gset
-- a claim reads a partition, finds work, and takes it: one node
SELECT :remote_commands AS before \gset
CREATE TEMP TABLE held AS SELECT task_id, fence FROM durable_claim('hot2', 'c1', batch => 4);
SELECT :remote_commands - :before AS remote_commands;
SELECT count(*) AS claimed, count(DISTINCT partition_key) AS partitions
FROM durable.tasks WHERE task_id IN (SELECT task_id FROM held);
-- each of the four begun: a statement each, in one transaction on their
-- node (its BEGIN and COMMIT the other two commands)
SELECT :remote_commands AS before \gset
SELECT count(*) AS begun FROM held CROSS JOIN LATERAL durable_begin(held.task_id, held.fence) b;
SELECT :remote_commands - :before AS remote_commands;
-- the heartbeat of those four: one statement, to their node
SELECT :remote_commands AS before \gset
SELECT count(*) AS renewed, count(lease_until) AS held
FROM durable_heartbeat_batch((SELECT array_agg(task_id) FROM held),
                             (SELECT array_agg(fence) FROM held));
SELECT :remote_commands - :before AS remote_commands;
-- and their commit, task by task on that node
SELECT :remote_commands AS before \gset
SELECT durable_commit_batch(array_agg(task_id), array_agg(fence)) AS committed FROM held;
SELECT :remote_commands - :before AS remote_commands;
-- an outbox message acknowledged: one statement
SELECT message_id, fence AS message_fence FROM durable_outbox_claim('hot', 'pub', batch => 1) \gset
SELECT :remote_commands AS before \gset
SELECT durable_outbox_ack('hot', ARRAY[:message_id]::bigint[], :message_fence) AS acked;
SELECT :remote_commands - :before AS remote_commands;
-- one task enqueued, claimed and committed: each call's statement runs
-- on the task's node as one call there (store/delegate.c): BEGIN, the
-- call, COMMIT; a claim asks the first node in one call (claim_node.c)
\set delegated_calls '(SELECT count(*) FROM pg_catalog.regexp_split_to_table(pg_catalog.pg_read_file(pg_catalog.current_setting(''data_directory'') || ''.log''), E''\\n'') l WHERE l ~ (''\\['' || pg_catalog.pg_backend_pid() || ''\\] .*NOTICE:  issuing .*durable\\.execute_in_partition''))'
SELECT :remote_commands AS before, :delegated_calls AS calls_before \gset
SELECT durable_enqueue('hot2', '{"one": 1}') AS t \gset
SELECT :remote_commands - :before AS remote_commands, :delegated_calls - :calls_before AS calls;
SELECT :remote_commands AS before, :delegated_calls AS calls_before \gset
SELECT task_id, fence FROM durable_claim('hot2', 'c1') \gset
SELECT :remote_commands - :before AS remote_commands, :delegated_calls - :calls_before AS calls;
SELECT :remote_commands AS before, :delegated_calls AS calls_before \gset
SELECT durable_commit(:task_id, :fence, '{}');
SELECT :remote_commands - :before AS remote_commands, :delegated_calls - :calls_before AS calls;
-- none of it in two phases
SELECT count(*) - :two_phase_before AS two_phase_commits FROM :my_two_phase;

-- and a backend whose calls run on their tasks' nodes keeps its memory
-- flat over 1,000 cycles, as one on a worker does
SET citus.log_remote_commands = off;
:cycles;
SELECT sum(total_bytes) AS memory_before FROM pg_backend_memory_contexts \gset
:cycles;
:cycles;
:cycles;
:cycles;
:cycles;
SELECT sum(total_bytes) - :memory_before < 1024 * 1024 AS memory_steady
FROM pg_backend_memory_contexts;
SET citus.log_remote_commands = on;

-- a task's id is minted where it is enqueued, with that node's sequence
-- and group, also when its row is written on another node: a key's task
-- (whose statement Citus sends) and a task without one (run on its node)
-- never meet on an id, with every node's sequence at the same value
SELECT durable_create_queue('hot4', partitions => 1);
SELECT setval('durable.task_seq', 5000000) IS NOT NULL AS coordinator_at;
SELECT bool_and(success) AS workers_at
FROM run_command_on_workers($$SELECT setval('durable.task_seq', 5000000)$$);
CREATE TEMP TABLE minted AS
SELECT durable_enqueue('hot4', '{}', idempotency_key => 'k' || i) AS keyed,
       durable_enqueue('hot4', '{}') AS unkeyed
FROM generate_series(1, 20) i;
SELECT count(DISTINCT id) AS distinct_ids, count(*) FILTER (WHERE (id >> 15) & 255 = 0) AS of_this_group
FROM (SELECT keyed AS id FROM minted UNION ALL SELECT unkeyed FROM minted) x;
SELECT count(*) AS tasks FROM durable.tasks WHERE queue_name = 'hot4';

-- tasks of both workers: one statement per shard, one commit in two phases
TRUNCATE held;
INSERT INTO held
SELECT task_id, fence FROM durable_claim('hot2', 'c2', batch => 80);
SELECT count(*) AS two_phase_before FROM :my_two_phase \gset
SELECT count(DISTINCT get_shard_id_for_distribution_column('durable.live_tasks', (task_id & 32767)::int)) AS shards
FROM held \gset
SELECT :remote_commands AS before \gset
SELECT count(*) AS renewed, count(lease_until) AS held
FROM durable_heartbeat_batch((SELECT array_agg(task_id) FROM held),
                             (SELECT array_agg(fence) FROM held));
-- (beside: BEGIN, PREPARE TRANSACTION and COMMIT PREPARED on each node)
SELECT :remote_commands - :before - :shards AS remote_commands_beside_one_per_shard;
SELECT count(*) - :two_phase_before AS nodes_prepared FROM :my_two_phase;
SELECT durable_commit_batch(array_agg(task_id), array_agg(fence)) AS committed FROM held;
SET citus.log_remote_commands = off;
RESET log_min_messages;

-- what is left: both queues done
SELECT queue_name, state, count(*) FROM durable.tasks
WHERE queue_name IN ('hot', 'hot2') GROUP BY 1, 2 ORDER BY 1, 2;

-- a batch enqueued here, where the queue has no partition, goes round
-- the queue: both workers change, in two phases
SELECT count(*) AS two_phase_before FROM :my_two_phase \gset
SELECT count(DISTINCT :node_of (task_id & 32767)::int))) AS nodes
FROM unnest(durable_enqueue_batch('hot2', array_fill('{}'::jsonb, ARRAY[16]))) AS task_id;
SELECT count(*) - :two_phase_before AS nodes_prepared FROM :my_two_phase;

-- a retry takes its token on its task's node: the queue's bucket is split
-- over its partitions (durable.retry_buckets, colocated), and the queue's
-- row, a reference table on every node, is only read
SELECT durable_create_queue('hot3', partitions => 4, retry_capacity => 8,
                            retry_refill_rate => 0.004);
SELECT durable_enqueue('hot3', '{}') AS t \gset
SELECT fence AS f FROM durable_claim('hot3', 'c3') \gset
SET log_min_messages = notice;
SET citus.log_remote_commands = on;
SELECT count(*) AS two_phase_before FROM :my_two_phase \gset
SELECT :remote_commands AS before \gset
SELECT durable_fail(:t, :f, 'transient', '{}') AS action;
SELECT :remote_commands - :before AS remote_commands;
SELECT count(*) - :two_phase_before AS two_phase_commits FROM :my_two_phase;
SET citus.log_remote_commands = off;
RESET log_min_messages;
SELECT partition_key = (:t & 32767) AS tasks_partition, tokens
FROM durable.retry_buckets WHERE queue_name = 'hot3';
SELECT retry_tokens FROM durable.queues WHERE queue_name = 'hot3';
SELECT durable_alter_queue('hot3', clear => ARRAY['retry_capacity']);
SELECT count(*) AS buckets_left FROM durable.retry_buckets WHERE queue_name = 'hot3';

-- a claim here asks the first worker of its walk for a task of all that
-- worker's partitions in one call (claim_node.c), and reads the other's:
-- whichever worker comes first, a paused partition is passed over, and a
-- lease that expired where there is no ready work is reconciled
SELECT durable_create_queue('hot5', partitions => 4, lease => '5 minutes');
SELECT count(durable_enqueue('hot5', jsonb_build_object('n', i))) AS enqueued
FROM generate_series(1, 8) i;
CREATE TEMP TABLE hot5_partitions AS
SELECT DISTINCT partition_key FROM durable.tasks WHERE queue_name = 'hot5';
SELECT count(*) AS partitions, count(DISTINCT :node_of partition_key))) AS nodes
FROM hot5_partitions;
SELECT min(partition_key) AS open_partition FROM hot5_partitions \gset
SELECT count(durable_pause('hot5', partition => partition_key)) AS paused
FROM hot5_partitions WHERE partition_key <> :open_partition;
SELECT count(*) AS open_tasks FROM durable.tasks
WHERE queue_name = 'hot5' AND partition_key = :open_partition \gset
CREATE TEMP TABLE hot5_claims AS
SELECT c.task_id, c.fence FROM generate_series(1, 8) i CROSS JOIN LATERAL durable_claim('hot5', 'c5-' || i) c;
SELECT count(*) = :open_tasks AS claimed_the_open_partitions_tasks,
       bool_and(task_id & 32767 = :open_partition) AS from_it_alone
FROM hot5_claims;
-- (in the transaction that expires the lease, where no reconciler takes
-- the row before the claim)
SELECT task_id AS expired_task, fence AS expired_fence FROM hot5_claims ORDER BY task_id LIMIT 1 \gset
BEGIN;
UPDATE durable.live_tasks SET lease_until = now() - interval '1 hour'
WHERE partition_key = :open_partition AND task_id = :expired_task;
SELECT count(*) AS claimed FROM durable_claim('hot5', 'c5');
SELECT state <> 'running' OR fence > :expired_fence AS reconciled
FROM durable.tasks WHERE task_id = :expired_task;
COMMIT;

-- claims here, where no partition is, spread over the nodes that have
-- work: each asks first the node after the one the claim before it asked
SELECT durable_create_queue('hot6', partitions => 4);
SELECT count(durable_enqueue('hot6', jsonb_build_object('n', i))) AS enqueued
FROM generate_series(1, 16) i;
CREATE TEMP TABLE hot6_claims AS
SELECT c.task_id FROM generate_series(1, 4) i CROSS JOIN LATERAL durable_claim('hot6', 'c6-' || i) c;
SELECT count(*) AS claimed, count(DISTINCT :node_of (task_id & 32767)::int))) AS nodes
FROM hot6_claims;

-- where the other node's access methods may not take a partition's task
-- (its shard has a trigger: take.c), the node's call hands the partition
-- back and the claim takes there by statement, the trigger firing: a
-- worker whose own partitions are empty asks the other worker, the only
-- one with work
SELECT durable_create_queue('hot7', partitions => 4);
SELECT nodeport AS worker2 FROM pg_dist_node WHERE groupid = 2 \gset
CREATE FUNCTION public.hot7_mark() RETURNS trigger LANGUAGE plpgsql
AS $$BEGIN NEW.progress := 'by statement'; RETURN NEW; END$$;
SELECT bool_and(success) AS triggers_made
FROM run_command_on_shards('durable.live_tasks',
  $$CREATE TRIGGER hot7_mark BEFORE UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION public.hot7_mark()$$);
\c postgres - 127.0.0.1 :worker2
SELECT count(durable_enqueue('hot7', jsonb_build_object('n', i))) AS enqueued
FROM generate_series(1, 2) i;
\c postgres - 127.0.0.1 :worker1
\set VERBOSITY terse
SELECT count(*) AS claimed, max(task_id) AS by_statement_task FROM durable_claim('hot7', 'c7') \gset
SELECT :claimed AS claimed, progress = 'by statement' AS by_statement
FROM durable.tasks WHERE task_id = :by_statement_task;
SELECT :node_of (:by_statement_task & 32767)::int)) = 2 AS on_the_other_worker;
\c postgres - 127.0.0.1 :coordinator
SET client_min_messages = warning;
\set VERBOSITY terse
SELECT bool_and(success) AS triggers_dropped
FROM run_command_on_shards('durable.live_tasks', $$DROP TRIGGER hot7_mark ON %s$$);
DROP FUNCTION public.hot7_mark();
\c postgres - 127.0.0.1 :worker1
\set VERBOSITY terse
-- (without the triggers, the other task is taken as before)
SELECT count(*) AS claimed, max(task_id) AS direct_task FROM durable_claim('hot7', 'c7') \gset
SELECT :claimed AS claimed, progress IS NULL AS unmarked FROM durable.tasks WHERE task_id = :direct_task;
\c postgres - 127.0.0.1 :coordinator
