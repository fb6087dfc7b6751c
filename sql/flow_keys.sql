--
-- Debounce and throttle (docs/flow-control.md): the calls of a key make one
-- task.  Each scenario runs in one transaction, whose start (t0) is the
-- "now" of every call in it, so that the times shown do not depend on the
-- clock; a call that came earlier is made so by moving its key's first
-- call back.  tools/citus runs this file on a cluster, with these answers:
-- the statements are those Citus plans (a table's rows joined by their
-- distribution column; no time computed from a column in an UPDATE).
--
SELECT durable_create_queue('flow_debounce', partitions => 4);
SELECT durable_create_queue('flow_claimed', partitions => 4);
SELECT durable_create_queue('flow_throttle', partitions => 4);

-- debounce: three calls of a key, one task, the last payload, run_at
-- delay after the last call (the longest delay of calls at one time)
BEGIN;
SELECT now() AS t0 \gset
SELECT durable_debounce('flow_debounce', 'doc-1', '{"v": 1}', '10 seconds') AS d1 \gset
SELECT durable_debounce('flow_debounce', 'doc-1', '{"v": 2}', '20 seconds') = :d1 AS same_task;
SELECT durable_debounce('flow_debounce', 'doc-1', '{"v": 3}', '5 seconds') = :d1 AS same_task;
SELECT state, payload, run_at - :'t0' AS runs_in, version FROM durable.live_tasks WHERE task_id = :d1;
-- another key has its own task, in its key's partition, as its row
SELECT durable_debounce('flow_debounce', 'doc-2', '{"v": 1}', '10 seconds') AS d2 \gset
SELECT :d2 <> :d1 AS other_task;
SELECT f.flow_key, f.kind, f.calls, f.first_at = :'t0' AS first_now, t.state AS its_task
FROM durable.flow_keys f JOIN durable.live_tasks t USING (partition_key, task_id)
WHERE f.queue_name = 'flow_debounce' ORDER BY f.flow_key;
-- the key's first call long ago: max_wait caps run_at at first + max_wait
UPDATE durable.flow_keys SET first_at = '2000-01-01 00:00:00+00'
WHERE queue_name = 'flow_debounce' AND flow_key = 'doc-1';
SELECT durable_debounce('flow_debounce', 'doc-1', '{"v": 4}', '10 seconds', max_wait => '30 minutes') = :d1 AS same_task;
SELECT t.run_at = f.first_at + interval '30 minutes' AS capped, t.payload
FROM durable.live_tasks t JOIN durable.flow_keys f USING (partition_key, task_id) WHERE t.task_id = :d1;
-- the first call with max_wait shorter than delay runs at max_wait
SELECT durable_debounce('flow_debounce', 'doc-3', '{}', '1 hour', max_wait => '1 minute') AS d3 \gset
SELECT run_at - :'t0' AS runs_in FROM durable.live_tasks WHERE task_id = :d3;
-- leading: the first call's payload stays
SELECT durable_debounce('flow_debounce', 'doc-4', '{"v": "first"}', '1 minute', mode => 'leading') AS d4 \gset
SELECT durable_debounce('flow_debounce', 'doc-4', '{"v": "second"}', '2 minutes', mode => 'leading') = :d4 AS same_task;
SELECT payload, run_at - :'t0' AS runs_in FROM durable.live_tasks WHERE task_id = :d4;
-- one event, the enqueue: a delay is no event of the task
SELECT kind FROM durable.events WHERE task_id = :d1 ORDER BY seq;
COMMIT;

-- a call after the task's claim makes a new task; so does one after a
-- retry of the task, which ran; calls then delay the new one
BEGIN;
SELECT durable_debounce('flow_claimed', 'doc', '{"v": 1}', '0 seconds') AS c1 \gset
SELECT task_id = :c1 AS claimed, fence AS f FROM durable_claim('flow_claimed', 'w') \gset
SELECT :'claimed' AS claimed;
SELECT durable_debounce('flow_claimed', 'doc', '{"v": 2}', '0 seconds') AS c2 \gset
SELECT :c2 <> :c1 AS new_task;
SELECT durable_fail(:c1, :f, 'transient', '{"error": "retry"}');
SELECT state, attempt FROM durable.live_tasks WHERE task_id = :c1;
SELECT durable_debounce('flow_claimed', 'doc', '{"v": 3}', '0 seconds') = :c2 AS same_task;
SELECT task_id = :c1 AS first, payload FROM durable.live_tasks WHERE queue_name = 'flow_claimed' ORDER BY task_id;
SELECT calls FROM durable.flow_keys WHERE queue_name = 'flow_claimed';
COMMIT;

-- a task claimed and released was claimed: the next call makes a new task
SELECT durable_create_queue('flow_released', partitions => 4);
SELECT durable_debounce('flow_released', 'doc', '{"v": 1}', '0 seconds') AS r1 \gset
SELECT task_id = :r1 AS claimed, fence AS f FROM durable_claim('flow_released', 'w') \gset
SELECT durable_release(:r1, :f);
SELECT state, attempt FROM durable.live_tasks WHERE task_id = :r1;
SELECT durable_debounce('flow_released', 'doc', '{"v": 2}', '0 seconds') <> :r1 AS new_task;

-- throttle: one task a key a period; a call within it returns that task,
-- whatever became of it; after it, a new task with the call's payload
BEGIN;
SELECT now() AS t0 \gset
SELECT durable_throttle('flow_throttle', 'acct-1', '{"n": 1}', '1 minute') AS t1 \gset
SELECT durable_throttle('flow_throttle', 'acct-1', '{"n": 2}', '1 minute') = :t1 AS same_task;
SELECT payload, run_at = :'t0' AS runs_now FROM durable.live_tasks WHERE task_id = :t1;
SELECT fence AS f FROM durable_claim('flow_throttle', 'w') \gset
SELECT durable_commit(:t1, :f, '{}');
SELECT durable_throttle('flow_throttle', 'acct-1', '{"n": 3}', '1 minute') = :t1 AS same_task;
SELECT durable_throttle('flow_throttle', 'acct-2', '{"n": 1}', '1 minute') <> :t1 AS other_key;
UPDATE durable.flow_keys SET first_at = :'t0'::timestamptz - interval '1 minute'
WHERE queue_name = 'flow_throttle' AND flow_key = 'acct-1';
SELECT durable_throttle('flow_throttle', 'acct-1', '{"n": 4}', '1 minute') AS t2 \gset
SELECT :t2 <> :t1 AS new_task;
SELECT payload FROM durable.live_tasks WHERE task_id = :t2;
SELECT durable_throttle('flow_throttle', 'acct-1', '{"n": 5}', '1 minute') = :t2 AS same_task;
-- a debounce and a throttle of one name are two keys
SELECT durable_debounce('flow_throttle', 'acct-1', '{}', '1 minute') NOT IN (:t1, :t2) AS own_task;
SELECT kind, flow_key, calls, expires_at - first_at AS kept_for FROM durable.flow_keys
WHERE queue_name = 'flow_throttle' ORDER BY kind, flow_key;
COMMIT;

-- retention: a key goes once it expired (and five minutes more) and its
-- task no longer waits for its first claim; a debounce still waiting stays
SELECT count(durable_commit(c.task_id, c.fence, '{}')) AS ran
FROM durable_claim('flow_throttle', 'w', batch => 10) c;
UPDATE durable.flow_keys SET expires_at = '2000-01-01 00:00:00+00'
WHERE queue_name IN ('flow_claimed', 'flow_throttle');
SELECT count(*) >= 0 AS reconciled FROM durable_reconcile();
SELECT queue_name, kind, flow_key FROM durable.flow_keys
WHERE queue_name IN ('flow_claimed', 'flow_throttle') ORDER BY 1, 2, 3;

-- bad calls: nothing is written
\set VERBOSITY sqlstate
SELECT durable_debounce('flow_debounce', 'bad', '{}', '-1 second');
SELECT durable_debounce('flow_debounce', 'bad', '{}', '1 mon -40 days');
SELECT durable_debounce('flow_debounce', 'bad', '{}', '1 second', '0 seconds');
SELECT durable_debounce('flow_debounce', 'bad', '{}', '1 second', mode => 'middle');
SELECT durable_debounce('flow_debounce', 'bad', '{}', '1 second', mode => NULL);
SELECT durable_debounce('flow_debounce', NULL, '{}', '1 second');
SELECT durable_debounce('flow_debounce', '', '{}', '1 second');
SELECT durable_debounce('flow_debounce', 'bad', NULL, '1 second');
SELECT durable_debounce('flow_debounce', 'bad', '{}', NULL);
SELECT durable_debounce('flow_nowhere', 'bad', '{}', '1 second');
SELECT durable_throttle('flow_throttle', 'bad', '{}', '0 seconds');
SELECT durable_throttle('flow_throttle', 'bad', '{}', NULL);
SELECT durable_throttle('flow_throttle', repeat('k', 256), '{}', '1 second');
SELECT durable_throttle('flow_nowhere', 'bad', '{}', '1 second');
\set VERBOSITY default
SELECT count(*) AS bad_keys FROM durable.flow_keys WHERE flow_key = 'bad';

-- leave nothing behind: dropping the queues drops their keys
\set cleanup_queues 'flow_debounce,flow_claimed,flow_throttle,flow_released'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
SELECT count(*) AS keys_left FROM durable.flow_keys WHERE queue_name LIKE 'flow\_%';
