--
-- The usual claim, one task by a worker that does not say what it runs,
-- takes its row through the access methods on one server
-- (core/claim_direct.c), not by the claim's statement.  It must take the
-- task the statement would take and leave the row as the statement's
-- expressions would: checked here against a model, over random queues,
-- on every column of the row.
--
SELECT durable_create_queue('qtake', partitions => 1, lease => '7 minutes');
SELECT durable_create_queue('qtake_other', partitions => 1);

-- the model: the task a claim takes, first of the claim order among the
-- queue's due tasks, and its row as the claim leaves it (CLAIM_UPDATE in
-- core/claim.c, with no versions named by the worker)
CREATE TEMP TABLE take_model (LIKE durable.live_tasks);
CREATE FUNCTION pg_temp.next_claimable(queue text, part int) RETURNS bigint
LANGUAGE sql AS $$
  SELECT task_id FROM durable.live_tasks
  WHERE partition_key = part AND queue_name = queue
  AND state IN ('ready', 'waiting') AND run_at <= now()
  ORDER BY priority DESC, run_at, task_id LIMIT 1
$$;
CREATE PROCEDURE pg_temp.model_claim(id bigint, worker text, lease interval)
LANGUAGE sql AS $$
  DELETE FROM take_model;
  INSERT INTO take_model SELECT * FROM durable.live_tasks WHERE task_id = id;
  UPDATE take_model t SET state = 'running', owner = worker, lease = model_claim.lease,
    lease_until = now() + model_claim.lease, heartbeat_at = now(), progress = NULL,
    progress_at = now(), fence = t.fence + 1, attempt = t.attempt + 1,
    version = t.version + 1, claimed_at = now(), claim_seq = t.version + 1,
    claim_kind = 'claimed', claim_role = current_user,
    workflow_version = t.versions ->> 'workflow';
$$;

-- 150 rounds: tasks of both queues enqueued at random priorities and
-- times, some waiting, some not due, some large; then a claim, checked
DO $$
DECLARE
  seed float8 := random();
  part int := (SELECT partition_base FROM durable.queues WHERE queue_name = 'qtake');
  expected bigint;
  claimed record;
  same_row bool;
  same_result bool;
  taken int := 0;
  empty int := 0;
BEGIN
  PERFORM setseed(seed);
  FOR round IN 1..150 LOOP
    FOR i IN 1..floor(random() * 3)::int LOOP
      PERFORM durable_enqueue(
        CASE WHEN random() < 0.2 THEN 'qtake_other' ELSE 'qtake' END,
        jsonb_build_object('round', round, 'pad',
                           repeat('x', CASE WHEN random() < 0.1 THEN 9000 ELSE 8 END)),
        run_at => now() + (floor(random() * 7) - 4) * interval '1 minute',
        priority => floor(random() * 3)::int - 1,
        workflow_version => CASE WHEN random() < 0.3 THEN 'v' || floor(random() * 3) END);
    END LOOP;
    -- a task whose timer fired waits, due; one that awaits a look-up does not
    UPDATE durable.live_tasks SET state = 'waiting',
      run_at = CASE WHEN random() < 0.5 THEN now() - interval '1 second' ELSE 'infinity' END
    WHERE task_id = (SELECT task_id FROM durable.live_tasks
                     WHERE queue_name = 'qtake' AND state = 'ready' AND random() < 0.1 LIMIT 1);

    expected := pg_temp.next_claimable('qtake', part);
    IF expected IS NOT NULL THEN
      CALL pg_temp.model_claim(expected, 'w' || round, interval '7 minutes');
    END IF;
    SELECT * INTO claimed FROM durable_claim('qtake', 'w' || round);
    IF claimed.task_id IS DISTINCT FROM expected THEN
      RAISE EXCEPTION 'round %: claimed task %, the model %', round, claimed.task_id, expected
        USING DETAIL = format('seed %s', seed);
    END IF;
    IF expected IS NULL THEN
      empty := empty + 1;
      CONTINUE;
    END IF;
    SELECT to_jsonb(m) = to_jsonb(l),
           (l.fence, l.lease_until, l.attempt, l.payload, l.checkpoint, l.versions)
           IS NOT DISTINCT FROM
           (claimed.fence, claimed.lease_until, claimed.attempt, claimed.payload,
            claimed.checkpoint, claimed.versions)
    INTO same_row, same_result
    FROM take_model m, durable.live_tasks l WHERE l.task_id = expected;
    IF NOT same_row OR NOT same_result THEN
      RAISE EXCEPTION 'round %: task % is not as the model has it', round, expected
        USING DETAIL = format('seed %s; row %s, model %s', seed,
          (SELECT to_jsonb(l) FROM durable.live_tasks l WHERE task_id = expected),
          (SELECT to_jsonb(m) FROM take_model m));
    END IF;
    taken := taken + 1;
  END LOOP;
  RAISE NOTICE 'claims as the model: %', CASE WHEN taken > 50 THEN 'more than 50' ELSE 'too few to tell: ' || taken END;
END
$$;

-- nothing was taken from the other queue
SELECT count(*) AS other_running FROM durable.live_tasks
WHERE queue_name = 'qtake_other' AND state = 'running';

-- a table with a trigger is updated by the statement, whose executor fires it
CREATE TEMP TABLE take_fired (task_id bigint);
CREATE FUNCTION pg_temp.take_fired() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO take_fired VALUES (NEW.task_id);
  RETURN NEW;
END $$;
SELECT durable_enqueue('qtake', '{"trigger": true}', priority => 100) AS triggered \gset
BEGIN;
CREATE TRIGGER take_fired AFTER UPDATE ON durable.live_tasks
  FOR EACH ROW EXECUTE FUNCTION pg_temp.take_fired();
SELECT task_id = :triggered AS took_it FROM durable_claim('qtake', 'w');
SELECT count(*) AS fired FROM take_fired WHERE task_id = :triggered;
ROLLBACK;

-- and without the index, the statement claims as well
BEGIN;
DROP INDEX durable.tasks_claimable;
SELECT task_id = :triggered AS took_it FROM durable_claim('qtake', 'w');
ROLLBACK;

-- the columns written are found again when the table changes in this
-- backend: a column replaced by one of the same name is the one written
BEGIN;
ALTER TABLE durable.live_tasks RENAME COLUMN owner TO owner_before;
ALTER TABLE durable.live_tasks ADD COLUMN owner text;
SELECT task_id = :triggered AS took_it FROM durable_claim('qtake', 'w-moved');
SELECT owner, owner_before FROM durable.live_tasks WHERE task_id = :triggered;
ROLLBACK;
-- and a column of another type than the library writes is an error
BEGIN;
ALTER TABLE durable.live_tasks RENAME COLUMN claim_kind TO claim_kind_before;
ALTER TABLE durable.live_tasks ADD COLUMN claim_kind int;
\set VERBOSITY sqlstate
SELECT * FROM durable_claim('qtake', 'w');
\set VERBOSITY default
ROLLBACK;
SELECT task_id = :triggered AS took_it_at_last FROM durable_claim('qtake', 'w');

-- and the indexes read are found again when they are rebuilt, in this
-- backend: REINDEX CONCURRENTLY swaps each index of a table for a new one
REINDEX TABLE CONCURRENTLY durable.live_tasks;
REINDEX TABLE CONCURRENTLY durable.queues;
SELECT durable_enqueue('qtake', '{"reindexed": true}', priority => 100) AS reindexed \gset
SELECT task_id = :reindexed AS took_it, fence AS reindexed_fence
FROM durable_claim('qtake', 'w') \gset
SELECT :'took_it' AS took_it;
SELECT durable_heartbeat(:reindexed, :reindexed_fence, 'after the reindex') > now() AS renewed;
SELECT durable_fail(:reindexed, :reindexed_fence, 'transient', retry_after => '1 hour') AS failed;
SELECT state, progress FROM durable.tasks WHERE task_id = :reindexed;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'qtake,qtake_other'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
