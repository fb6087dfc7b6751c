--
-- On one server a task finishes without a statement: its live row moves
-- to history through the access methods (core/finish_direct.c), and so
-- does a claim of one task (core/claim_direct.c).  A table with a trigger
-- is written by the statements instead, whose executor fires it.  Both
-- ways must leave the same rows: here random lives of tasks run twice in
-- one transaction (so at one time), once each way, twin by twin, and
-- every column of their rows in history and of their steps' is compared.
--
SELECT durable_create_queue('qfinish', partitions => 1, lease => '9 minutes');

CREATE FUNCTION pg_temp.noop() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RETURN NEW;
END $$;

-- the life of twin n, way one or the other: claimed tasks are the only
-- ready ones of the queue, so the claim takes the twin
CREATE PROCEDURE pg_temp.live(n int, way text, life int, result jsonb)
LANGUAGE plpgsql AS $$
DECLARE
  t bigint;
  f bigint;
  v int;
BEGIN
  t := durable_enqueue('qfinish', jsonb_build_object('n', n, 'way', way),
                       max_attempts => CASE WHEN life = 3 THEN 1 END,
                       workflow_version => CASE WHEN n % 3 = 0 THEN 'v1' END);
  IF life = 0 THEN
    PERFORM durable_cancel(t, 'not wanted');
    RETURN;
  END IF;
  SELECT c.task_id, c.fence INTO STRICT t, f FROM durable_claim('qfinish', 'w' || n) c;
  CASE life
    WHEN 1 THEN PERFORM durable_commit(t, f, result);
    WHEN 2 THEN PERFORM durable_fail(t, f, 'permanent', jsonb_build_object('why', n));
    WHEN 3 THEN PERFORM durable_fail(t, f, 'transient', jsonb_build_object('why', n));
    WHEN 4 THEN PERFORM durable_cancel(t, 'stopped');
    WHEN 5 THEN
      PERFORM durable_step(t, f, 'charge', 'idempotent', jsonb_build_object('n', n));
      v := durable_step_start(t, f, 'charge', 1);
      PERFORM durable_commit(t, f, result, step => 'charge', expected_version => v);
      PERFORM durable_commit(t, f, result);
    ELSE
      PERFORM durable_release(t, f, 'given back');
      PERFORM durable_cancel(t, 'not wanted after all');
  END CASE;
END $$;

DO $$
DECLARE
  seed float8 := random();
  lives int[];
  results jsonb[];
  twins int := 40;
  differ int;
  steps_differ int;
BEGIN
  PERFORM setseed(seed);
  FOR n IN 1..twins LOOP
    lives[n] := floor(random() * 7)::int;
    results[n] := CASE WHEN random() < 0.5 THEN jsonb_build_object('r', n) END;
  END LOOP;
  FOR n IN 1..twins LOOP
    CALL pg_temp.live(n, 'direct', lives[n], results[n]);
  END LOOP;
  CREATE TRIGGER qfinish_noop AFTER UPDATE ON durable.live_tasks
    FOR EACH ROW EXECUTE FUNCTION pg_temp.noop();
  FOR n IN 1..twins LOOP
    CALL pg_temp.live(n, 'statement', lives[n], results[n]);
  END LOOP;
  DROP TRIGGER qfinish_noop ON durable.live_tasks;

  SELECT count(*) FILTER (WHERE (to_jsonb(d) - 'task_id' - 'payload')
                          IS DISTINCT FROM (to_jsonb(s) - 'task_id' - 'payload'))
  INTO differ
  FROM durable.task_history d JOIN durable.task_history s
    ON d.payload ->> 'n' = s.payload ->> 'n'
  WHERE d.queue_name = 'qfinish' AND s.queue_name = 'qfinish'
  AND d.payload ->> 'way' = 'direct' AND s.payload ->> 'way' = 'statement';
  SELECT count(*) FILTER (WHERE (to_jsonb(d) - 'task_id' - 'idempotency_key' - 'request_hash')
                          IS DISTINCT FROM (to_jsonb(s) - 'task_id' - 'idempotency_key' - 'request_hash'))
  INTO steps_differ
  FROM durable.step_history d
  JOIN durable.task_history dt USING (partition_key, task_id)
  JOIN durable.task_history st ON st.payload ->> 'n' = dt.payload ->> 'n'
  JOIN durable.step_history s ON s.task_id = st.task_id AND s.step = d.step
  WHERE dt.queue_name = 'qfinish' AND dt.payload ->> 'way' = 'direct'
  AND st.queue_name = 'qfinish' AND st.payload ->> 'way' = 'statement';
  IF differ > 0 OR steps_differ > 0 THEN
    RAISE EXCEPTION '% tasks and % steps finished otherwise without a statement',
      differ, steps_differ
      USING DETAIL = format('seed %s', seed);
  END IF;
END
$$;

-- every twin finished, each way, and with the lives it had
SELECT payload ->> 'way' AS way, count(*) AS finished,
       count(DISTINCT state) > 1 AS several_ends
FROM durable.task_history WHERE queue_name = 'qfinish'
GROUP BY 1 ORDER BY 1;
SELECT count(*) AS live FROM durable.live_tasks WHERE queue_name = 'qfinish';

-- a stale fence is refused without a statement as with one, and the
-- caller's transaction rolls back with it
SELECT durable_enqueue('qfinish', '{"stale": true}') AS stale \gset
SELECT fence AS stale_fence FROM durable_claim('qfinish', 'w') \gset
BEGIN;
SELECT durable_enqueue('qfinish', '{"rolled back": true}') > 0 AS enqueued;
\set VERBOSITY sqlstate
SELECT durable_commit(:stale, :stale_fence + 1);
\set VERBOSITY default
ROLLBACK;
SELECT count(*) AS rolled_back FROM durable.live_tasks WHERE payload ? 'rolled back';
SELECT durable_commit(:stale, :stale_fence);
SELECT state FROM durable.tasks WHERE task_id = :stale;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'qfinish'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
