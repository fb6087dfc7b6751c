--
-- The rows of concurrency keys (durable.concurrency_keys, which the claims
-- of a key take in turn) go once no claim wrote them for an hour and the
-- key has no task that could run: a queue keyed by customer does not keep
-- a row for every customer it ever served.
--
SET TimeZone = 'UTC';
SELECT durable_create_queue('ck_idle', concurrency_limit => 1, lease => '1 hour');
SELECT durable_enqueue('ck_idle', '{}', concurrency_key => 'done_long_ago') AS done_task \gset
SELECT durable_enqueue('ck_idle', '{}', concurrency_key => 'still_running') AS running_task \gset
SELECT durable_enqueue('ck_idle', '{}', concurrency_key => 'still_waiting') AS waiting_task \gset
SELECT durable_enqueue('ck_idle', '{}', concurrency_key => 'done_just_now') AS recent_task \gset
SELECT count(*) AS claimed FROM durable_claim('ck_idle', 'w', batch => 4);
SELECT concurrency_key FROM durable.concurrency_keys WHERE queue_name = 'ck_idle' ORDER BY 1;
SELECT durable_commit(task_id, fence) FROM durable.live_tasks
WHERE task_id IN (:done_task, :recent_task);
SELECT durable_fail(:waiting_task, (SELECT fence FROM durable.live_tasks WHERE task_id = :waiting_task),
                    'transient', '{"why": "later"}', retry_after => '1 hour') IS NOT NULL AS failed;
-- three keys idle for two hours, one written by a claim just now
UPDATE durable.concurrency_keys SET claimed_at = now() - interval '2 hours'
WHERE queue_name = 'ck_idle' AND concurrency_key <> 'done_just_now';

-- the tick removes the idle row of the key with nothing left to run only
DO $$ BEGIN PERFORM durable_reconcile(); END $$;  -- the tick runs; what it settled is read below
SELECT concurrency_key FROM durable.concurrency_keys WHERE queue_name = 'ck_idle' ORDER BY 1;

-- a claim of a key whose row went makes it again, and the limit holds
SELECT durable_enqueue('ck_idle', '{"n": 1}', concurrency_key => 'done_long_ago') AS again_1 \gset
SELECT durable_enqueue('ck_idle', '{"n": 2}', concurrency_key => 'done_long_ago') AS again_2 \gset
SELECT t.payload->>'n' AS n FROM durable_claim('ck_idle', 'w', batch => 4) c
JOIN durable.tasks t USING (task_id) WHERE t.concurrency_key = 'done_long_ago';
SELECT concurrency_key FROM durable.concurrency_keys WHERE queue_name = 'ck_idle' ORDER BY 1;

-- A partition whose idle rows could not be removed is shown failing in
-- durable.tick_failures; once its rows went another way (here: deleted),
-- a tick that finds none there says it recovered, though its part no
-- longer runs.  Each tick below runs in a new session: a backend looks for
-- idle rows once a minute.
SELECT durable_create_queue('ck_fail', concurrency_limit => 1, lease => '1 hour');
SELECT durable_enqueue('ck_fail', '{}', concurrency_key => 'refused') AS refused_task \gset
SELECT count(*) AS claimed FROM durable_claim('ck_fail', 'w');
SELECT durable_commit(task_id, fence) FROM durable.live_tasks WHERE task_id = :refused_task;
UPDATE durable.concurrency_keys SET claimed_at = now() - interval '2 hours'
WHERE queue_name = 'ck_fail';
CREATE FUNCTION public.ck_refuse() RETURNS trigger LANGUAGE plpgsql
AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
CREATE TRIGGER ck_refuse BEFORE DELETE ON durable.concurrency_keys
FOR EACH ROW WHEN (OLD.queue_name = 'ck_fail') EXECUTE FUNCTION public.ck_refuse();
\c
SET client_min_messages = error;
DO $$ BEGIN PERFORM durable_reconcile(); END $$;  -- the part fails: said in a WARNING
RESET client_min_messages;
SELECT part ~ '^partition [0-9]+: concurrency keys$' AS keys_part, sqlstate, error
FROM durable.tick_failures WHERE part LIKE '%: concurrency keys';
DROP TRIGGER ck_refuse ON durable.concurrency_keys;
DROP FUNCTION public.ck_refuse();
DELETE FROM durable.concurrency_keys WHERE queue_name = 'ck_fail';
\c
DO $$ BEGIN PERFORM durable_reconcile(); END $$;
SELECT count(*) AS still_failing FROM durable.tick_failures WHERE part LIKE '%: concurrency keys';

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'ck_idle,ck_fail'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
