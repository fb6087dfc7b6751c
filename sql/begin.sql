--
-- A crash costs only the tasks it touched (docs/design.md section 4): a
-- lease that runs out before its task began gives the claim's attempt
-- back, at most 10 times; what counts as begun; durable_begin's refusals;
-- and durable_result, what a producer waits for.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 43000) AS first_id_counter;
SELECT durable_create_queue('begin', lease => '1 hour', retry_base => 1, retry_cap => 1,
                            max_attempts => 2);
\set VERBOSITY terse

-- a batch of five claimed; the worker begins the first, touches a step of
-- the second, changes the progress of the third, sends the fourth a
-- heartbeat without progress and leaves the fifth alone
SELECT count(durable_enqueue('begin', jsonb_build_object('n', i))) AS enqueued
FROM generate_series(1, 5) i;
CREATE TEMP TABLE held (n bigint, task_id bigint, fence bigint);
INSERT INTO held
SELECT row_number() OVER (ORDER BY task_id), task_id, fence
FROM durable_claim('begin', 'w-batch', batch => 5);
SELECT count(*) AS held FROM held;
SELECT durable_begin(task_id, fence) FROM held WHERE n = 1;
SELECT task_id AS t2, fence AS f2 FROM held WHERE n = 2 \gset
SELECT state FROM durable_step(:t2, :f2, 's', 'idempotent');
SELECT durable_step_start(:t2, :f2, 's', 1);
SELECT durable_commit(:t2, :f2, '{}', 's', 2);
SELECT durable_heartbeat(task_id, fence, progress => 'page 1') IS NOT NULL AS beat FROM held WHERE n = 3;
SELECT durable_heartbeat(task_id, fence) IS NOT NULL AS beat FROM held WHERE n = 4;

-- the worker crashes: every lease runs out
UPDATE durable.live_tasks SET lease_until = now() - interval '1 second'
WHERE task_id IN (SELECT task_id FROM held);
SELECT n, r.action FROM durable_reconcile(queue => 'begin') r JOIN held USING (task_id) ORDER BY n;
-- the begun ones spent their attempt; the others are ready at once with
-- theirs given back, fence + 1 (the crashed worker is fenced off)
SELECT n, t.state, t.attempt, t.fence = h.fence + 1 AS fenced_off, t.unbegun_expiries,
       t.state <> 'ready' OR t.run_at <= now() AS due
FROM held h JOIN durable.tasks t USING (task_id) ORDER BY n;
SELECT n, e.detail ->> 'action' AS action, (e.detail ->> 'attempt_given_back')::int AS given_back,
       (e.detail ->> 'unbegun_expiries')::int AS unbegun_expiries, e.detail ->> 'owner' AS owner
FROM held JOIN durable.events e USING (task_id)
WHERE e.kind = 'lease_expired' AND e.detail ->> 'action' = 'not_begun' ORDER BY n;
-- the stale fence is refused, as any fenced write (SQLSTATEs only: the
-- messages name the task ids)
\set VERBOSITY sqlstate
SELECT durable_begin(task_id, fence) FROM held WHERE n = 5;
SELECT durable_begin(task_id, fence + 1) FROM held WHERE n = 1;
\set VERBOSITY terse

-- a task that kills its worker before it begins goes back for nothing 10
-- times, then spends its attempts like any task: it ends in the dead
-- letters, it does not loop for ever
SELECT durable_enqueue('begin', '{"poison": true}', max_attempts => 2) AS poison \gset
CREATE FUNCTION pg_temp.crash(t bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    a text;
    after text;
BEGIN
    PERFORM durable_claim('begin', 'w-crashing');
    UPDATE durable.live_tasks SET lease_until = now() - interval '1 second' WHERE task_id = t;
    SELECT r.action INTO a FROM durable_reconcile(queue => 'begin') r WHERE r.task_id = t;
    -- a retry's delay, not what this file tests
    UPDATE durable.live_tasks SET run_at = now() WHERE task_id = t AND state = 'waiting';
    SELECT concat_ws(' ', a, state, 'attempt', attempt, 'unbegun', unbegun_expiries, stop_code)
    INTO after FROM durable.tasks WHERE task_id = t;
    RETURN after;
END $$;
-- the other held tasks out of the way, so that each claim takes the poison
UPDATE durable.live_tasks SET run_at = now() + interval '1 day'
WHERE queue_name = 'begin' AND task_id <> :poison AND state IN ('ready', 'waiting');
SELECT i, pg_temp.crash(:poison) AS after_the_crash FROM generate_series(1, 13) i ORDER BY i;
SELECT state, attempt, unbegun_expiries, stop_code FROM durable.tasks WHERE task_id = :poison;

-- a release gives the attempt back too, but is no unbegun expiry
SELECT durable_enqueue('begin', '{"released": true}') AS released \gset
SELECT task_id, fence FROM durable_claim('begin', 'w-release') WHERE task_id = :released \gset
SELECT durable_release(:task_id, :fence, 'shutdown');
SELECT state, attempt, unbegun_expiries FROM durable.tasks WHERE task_id = :released;
UPDATE durable.live_tasks SET run_at = now() + interval '1 day' WHERE task_id = :released;

-- durable_result: the state, then the result or the error, and when
SELECT durable_enqueue('begin', '{"result": true}') AS r \gset
SELECT state, result, error, finished_at IS NULL AS unfinished FROM durable_result(:r);
SELECT task_id, fence FROM durable_claim('begin', 'w-result') WHERE task_id = :r \gset
SELECT state FROM durable_result(:r);
SELECT durable_commit(:task_id, :fence, '{"total": 42}');
SELECT state, result, error, finished_at IS NOT NULL AS finished FROM durable_result(:r);
SELECT state, error, finished_at IS NOT NULL AS finished, stop_code
FROM durable_result(:poison);
SELECT * FROM durable_result(1);
SELECT * FROM durable_result(NULL);
-- a role with no grant on a restricted queue learns nothing, not even that
-- the task exists
CREATE ROLE begin_stranger IN ROLE durable_producer;
SELECT durable_create_queue('begin_private');
SELECT durable_enqueue('begin_private', '{}') AS private \gset
-- the first grant restricts the queue
SELECT durable_grant_queue('begin_private', 'durable_worker', 'work');
SET ROLE begin_stranger;
\set VERBOSITY sqlstate
SELECT state FROM durable_result(:private);
\set VERBOSITY terse
SELECT state FROM durable_result(:r);
RESET ROLE;
SELECT durable_grant_queue('begin_private', 'begin_stranger', 'enqueue');
SET ROLE begin_stranger;
SELECT state FROM durable_result(:private);
RESET ROLE;

-- clean up
SELECT count(durable_cancel(task_id, 'test')) >= 0 AS cancelled
FROM durable.unfinished_tasks WHERE queue_name IN ('begin', 'begin_private');
SELECT durable_drop_queue('begin_private', cascade => true);
SELECT durable_drop_queue('begin', cascade => true);
DROP ROLE begin_stranger;
