--
-- Waits on a Citus cluster (tools/citus, after citus.sql has distributed
-- durable): events emitted and awaited, children spawned and joined, a
-- parent and its children on different nodes, each answer as on one
-- server.
--
SET client_min_messages = warning;

-- the Citus group of the node that holds a partition's rows
CREATE FUNCTION node_of(partition int) RETURNS int
LANGUAGE sql STABLE
AS $$
  SELECT groupid FROM pg_dist_placement
  WHERE shardid = get_shard_id_for_distribution_column('durable.live_tasks', partition)
$$;
\set my_two_phase '(SELECT FROM pg_dist_transaction WHERE gid ~ (''^citus_[0-9]+_'' || pg_backend_pid() || ''_'')) t'

SELECT durable_create_queue('flows', lease => '1 hour', partitions => 8);

-- an await, then the emit that wakes it; the replay receives the payload
SELECT durable_enqueue('flows', '{"order": 1}') AS t1 \gset
SELECT fence AS f1 FROM durable_claim('flows', 'w1') \gset
SELECT status, payload FROM durable_await(:t1, :f1, 'paid', 'order:1:paid');
SELECT state FROM durable.tasks WHERE task_id = :t1;
SELECT count(*) AS before FROM :my_two_phase \gset
SELECT durable_emit('flows', 'order:1:paid', '{"amount": 5}') AS first_emit;
SELECT durable_emit('flows', 'order:1:paid', '{"amount": 5}') AS same_again;
\set VERBOSITY terse
SELECT durable_emit('flows', 'order:1:paid', '{"amount": 6}');
\echo :SQLSTATE
\set VERBOSITY default
-- the event's row and the task's change together: in two phases only
-- when they are on two nodes
SELECT partition_key AS event_partition FROM durable.emitted_events
WHERE queue_name = 'flows' AND event = 'order:1:paid' \gset
SELECT (count(*) > :before) = (node_of(:event_partition) <> node_of((:t1 & 32767)::int))
       AS two_phases_when_two_nodes
FROM :my_two_phase;
SELECT waits -> 'paid' ->> 'status' AS paid, run_at <= now() AS claimable
FROM durable.tasks WHERE task_id = :t1;
SELECT kind, detail ->> 'wait' AS wait, detail ->> 'event' AS event
FROM durable.events WHERE task_id = :t1 AND kind = 'woken';
SELECT fence AS f1 FROM durable_claim('flows', 'w1') WHERE task_id = :t1 \gset
SELECT status, payload FROM durable_await(:t1, :f1, 'paid', 'order:1:paid');
SELECT count(*) AS awaits_left FROM durable.event_waits WHERE task_id = :t1;

-- an event emitted before the await: received at once, the lease kept
SELECT durable_emit('flows', 'order:1:shipped', '{"carrier": "x"}');
SELECT status, payload FROM durable_await(:t1, :f1, 'shipped', 'order:1:shipped');
SELECT state FROM durable.tasks WHERE task_id = :t1;

-- an await that times out stays timed out when its event comes later
SELECT status FROM durable_await(:t1, :f1, 'late', 'order:1:late', timeout => '1 millisecond');
SELECT pg_sleep(0.01);
SELECT durable_emit('flows', 'order:1:late', '{}') AS late_emit;
SELECT fence AS f1 FROM durable_claim('flows', 'w1') WHERE task_id = :t1 \gset
SELECT status FROM durable_await(:t1, :f1, 'late', 'order:1:late', timeout => '1 millisecond');

-- children, spawned until one lives on another node than its parent; a
-- replayed spawn returns the same child
SELECT set_config('wt.parent', :'t1', false), set_config('wt.fence', :'f1', false) \gset
DO $$
DECLARE
  parent bigint := current_setting('wt.parent')::bigint;
  child bigint;
  elsewhere bool := false;
  i int := 0;
BEGIN
  LOOP
    i := i + 1;
    child := durable_spawn(parent, current_setting('wt.fence')::bigint, 'kid-' || i,
                           'flows', jsonb_build_object('kid', i));
    elsewhere := elsewhere OR node_of((child & 32767)::int) <> node_of((parent & 32767)::int);
    EXIT WHEN (elsewhere AND i >= 3) OR i = 16;
  END LOOP;
END
$$;
SELECT count(*) >= 3 AS kids,
       bool_or(node_of(partition_key) <> node_of((:t1 & 32767)::int)) AS one_on_another_node,
       bool_and(parent_id = :t1) AS all_mine
FROM durable.tasks WHERE parent_id = :t1;
SELECT durable_spawn(:t1, :f1, 'kid-1', 'flows', '{"kid": 1}') =
       (SELECT task_id FROM durable.tasks WHERE parent_id = :t1 AND payload = '{"kid": 1}')
       AS same_child;
SELECT status, children FROM durable_join(:t1, :f1, 'all-kids', NULL);
SELECT state FROM durable.tasks WHERE task_id = :t1;

-- the children finish one by one, the last wakes the parent across nodes
SELECT count(*) AS kids FROM durable.tasks WHERE parent_id = :t1 \gset
SELECT count(durable_commit(c.task_id, c.fence, jsonb_build_object('kid', c.payload -> 'kid')))
       = :kids AS every_kid_committed
FROM durable_claim('flows', 'w2', batch => 100) c;
SELECT state, run_at <= now() AS claimable FROM durable.tasks WHERE task_id = :t1;
SELECT count(*) = :kids AS every_kid_marked FROM durable.tasks t, jsonb_each(t.waits) w
WHERE t.task_id = :t1 AND w.value ->> 'kind' = 'spawn' AND w.value ? 'child_finished';
SELECT kind, detail ->> 'wait' AS wait FROM durable.events WHERE task_id = :t1 AND kind = 'woken'
ORDER BY seq;
SELECT fence AS f1 FROM durable_claim('flows', 'w1') WHERE task_id = :t1 \gset
SELECT status, jsonb_array_length(children) = :kids AS every_kid,
       (SELECT bool_and(c ->> 'state' = 'completed' AND c -> 'result' ->> 'kid' IS NOT NULL)
        FROM jsonb_array_elements(children) c) AS all_completed
FROM durable_join(:t1, :f1, 'all-kids', NULL);
SELECT durable_commit(:t1, :f1, '{"flow": "done"}');

-- a cancelled parent takes its unfinished children with it, on every node
SELECT durable_enqueue('flows', '{"order": 2}') AS t2 \gset
SELECT fence AS f2 FROM durable_claim('flows', 'w1') \gset
SELECT count(durable_spawn(:t2, :f2, 'kid-' || i, 'flows', jsonb_build_object('kid', i)))
FROM generate_series(1, 4) i;
SELECT status FROM durable_join(:t2, :f2, 'kids', ARRAY['kid-1', 'kid-2']);
SELECT durable_cancel(:t2, 'the order was withdrawn');
SELECT state, count(*) FROM durable.tasks WHERE task_id = :t2 OR parent_id = :t2
GROUP BY 1 ORDER BY 1;

-- awaits of a task that finished go with it
SELECT durable_enqueue('flows', '{"order": 3}') AS t3 \gset
SELECT fence AS f3 FROM durable_claim('flows', 'w1') \gset
SELECT status FROM durable_await(:t3, :f3, 'never', 'order:3:never');
SELECT count(*) AS registered FROM durable.event_waits WHERE task_id = :t3;
SELECT durable_cancel(:t3, 'gave up');
SELECT count(*) AS registered FROM durable.event_waits WHERE task_id = :t3;

SELECT count(*) AS problems FROM durable_verify();
DROP FUNCTION node_of(int);
