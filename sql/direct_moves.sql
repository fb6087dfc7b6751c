--
-- On one server a task moves without a statement: a finish moves its live
-- row to history through the access methods (core/finish_direct.c), a
-- move between live states updates it by its key and appends its event
-- (core/transition_direct.c), and a claim of one task takes it
-- (core/claim_direct.c).  A table with a trigger is written by the
-- statements instead, whose executor fires it.  Both ways must leave the
-- same rows: here random lives of tasks run twice in one transaction (so
-- at one time), once each way, twin by twin, and every column of their
-- rows, live and in history, of their steps and of their events is
-- compared.
--
SELECT durable_create_queue('qmoves', partitions => 1, lease => '9 minutes');

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
  u timestamptz;
BEGIN
  t := durable_enqueue('qmoves', jsonb_build_object('n', n, 'way', way),
                       max_attempts => CASE WHEN life = 3 THEN 1 END,
                       workflow_version => CASE WHEN n % 3 = 0 THEN 'v1' END);
  IF life = 0 THEN
    PERFORM durable_cancel(t, 'not wanted');
    RETURN;
  END IF;
  SELECT c.task_id, c.fence INTO STRICT t, f FROM durable_claim('qmoves', 'w' || n) c;
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
    WHEN 6 THEN
      PERFORM durable_release(t, f, 'given back');
      PERFORM durable_cancel(t, 'not wanted after all');
    -- moves between live states; a task left ready is cancelled, so that
    -- the next twin's claim takes the next twin
    WHEN 7 THEN
      PERFORM durable_fail(t, f, 'transient', jsonb_build_object('why', n),
                           retry_after => '1 hour');
    WHEN 8 THEN
      PERFORM durable_fail(t, f, 'transient', jsonb_build_object('why', n));
      PERFORM durable_cancel(t, 'retried no more');
    WHEN 9 THEN
      PERFORM durable_expire_lease(t, 'hung');
      PERFORM durable_cancel(t, 'expired');
    WHEN 10 THEN
      PERFORM durable_step(t, f, 'call', CASE WHEN n % 2 = 0 THEN 'unsafe' ELSE 'queryable' END,
                           jsonb_build_object('n', n));
      v := durable_step_start(t, f, 'call', 1);
      PERFORM durable_expire_lease(t, 'hung in a call');
    WHEN 11 THEN
      PERFORM durable_heartbeat(t, f, 'half way');
      PERFORM durable_heartbeat(t, f, 'half way', lease => '20 minutes');
      PERFORM durable_fail(t, f, 'transient', NULL, retry_after => '2 hours');
    ELSE
      -- left running: the last heartbeat's lease is the row's
      PERFORM durable_heartbeat(t, f, 'nearly', lease => '30 minutes');
      u := durable_heartbeat(t, f);
      IF u IS DISTINCT FROM (SELECT lease_until FROM durable.live_tasks WHERE task_id = t) THEN
        RAISE EXCEPTION 'the lease a heartbeat returns is not the row''s';
      END IF;
  END CASE;
END $$;

-- all that twin n left by way: its row (live or in history), its steps and
-- its events, without what differs between twins (their ids, payloads and
-- the keys made of the ids)
CREATE FUNCTION pg_temp.life(n int, way text) RETURNS jsonb LANGUAGE sql AS $$
  WITH task AS (
    SELECT task_id, to_jsonb(l) - 'task_id' - 'payload' AS task FROM durable.live_tasks l
    WHERE queue_name = 'qmoves' AND payload ->> 'n' = n::text AND payload ->> 'way' = way
    UNION ALL
    SELECT task_id, to_jsonb(h) - 'task_id' - 'payload' FROM durable.task_history h
    WHERE queue_name = 'qmoves' AND payload ->> 'n' = n::text AND payload ->> 'way' = way),
  step AS (
    SELECT s.step AS name, to_jsonb(s) AS step FROM durable.live_steps s JOIN task USING (task_id)
    UNION ALL
    SELECT s.step, to_jsonb(s) FROM durable.step_history s JOIN task USING (task_id))
  SELECT jsonb_build_object(
    'task', (SELECT jsonb_agg(task) FROM task),
    'steps', (SELECT jsonb_agg(step - 'task_id' - 'idempotency_key' - 'request_hash'
                               ORDER BY name) FROM step),
    'events', (SELECT jsonb_agg(to_jsonb(e) - 'task_id'
                                || jsonb_build_object('detail', e.detail - 'idempotency_key')
                                ORDER BY e.seq)
               FROM durable.event_log e JOIN task USING (task_id)))
$$;

DO $$
DECLARE
  seed float8 := random();
  lives int[];
  results jsonb[];
  twins int := 40;
  differ int;
  first_differ int;
BEGIN
  PERFORM setseed(seed);
  FOR n IN 1..twins LOOP
    lives[n] := floor(random() * 13)::int;
    results[n] := CASE WHEN random() < 0.5 THEN jsonb_build_object('r', n) END;
  END LOOP;
  FOR n IN 1..twins LOOP
    CALL pg_temp.live(n, 'direct', lives[n], results[n]);
  END LOOP;
  CREATE TRIGGER qmoves_noop AFTER UPDATE ON durable.live_tasks
    FOR EACH ROW EXECUTE FUNCTION pg_temp.noop();
  FOR n IN 1..twins LOOP
    CALL pg_temp.live(n, 'statement', lives[n], results[n]);
  END LOOP;
  DROP TRIGGER qmoves_noop ON durable.live_tasks;

  SELECT count(*) FILTER (WHERE pg_temp.life(n, 'direct') IS DISTINCT FROM pg_temp.life(n, 'statement')),
         min(n) FILTER (WHERE pg_temp.life(n, 'direct') IS DISTINCT FROM pg_temp.life(n, 'statement'))
  INTO differ, first_differ
  FROM generate_series(1, twins) n;
  IF differ > 0 THEN
    RAISE EXCEPTION '% of % tasks lived otherwise without a statement', differ, twins
      USING DETAIL = format('seed %s; the first, life %s: %s, against %s by statements',
                            seed, lives[first_differ], pg_temp.life(first_differ, 'direct'),
                            pg_temp.life(first_differ, 'statement'));
  END IF;
  IF (SELECT count(*) FROM durable.tasks WHERE queue_name = 'qmoves') <> 2 * twins THEN
    RAISE EXCEPTION 'a twin is missing';
  END IF;
END
$$;

-- every twin lived, each way, and with the lives it had
SELECT payload ->> 'way' AS way, count(*) AS tasks,
       count(DISTINCT state) > 1 AS several_ends
FROM durable.tasks WHERE queue_name = 'qmoves'
GROUP BY 1 ORDER BY 1;

-- a stale fence is refused without a statement as with one, and the
-- caller's transaction rolls back with it
SELECT durable_enqueue('qmoves', '{"stale": true}') AS stale \gset
SELECT fence AS stale_fence FROM durable_claim('qmoves', 'w') \gset
BEGIN;
SELECT durable_enqueue('qmoves', '{"rolled back": true}') > 0 AS enqueued;
\set VERBOSITY sqlstate
SELECT durable_commit(:stale, :stale_fence + 1);
\set VERBOSITY default
ROLLBACK;
SELECT count(*) AS rolled_back FROM durable.live_tasks WHERE payload ? 'rolled back';
SELECT durable_commit(:stale, :stale_fence);
SELECT state FROM durable.tasks WHERE task_id = :stale;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'qmoves'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
