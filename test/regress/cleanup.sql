\set ECHO none
--
-- The end of a regression file: the files share one database and run in
-- any order (tools/test's REGRESS_ORDER), so each removes what it made
-- before the next one starts.  Usage, from the file:
--   \set cleanup_queues 'queue_a,queue_b'
--   \getenv abs_srcdir PG_ABS_SRCDIR
--   \set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
--   \i :cleanup_file
-- (pg_regress gives psql the file on its standard input, so a relative
-- path would be the caller's directory's; PG_ABS_SRCDIR is its --inputdir,
-- the repository for tools/test and tools/citus alike.)
-- Every unfinished task of those queues is cancelled (one in review through
-- durable_resolve, the only way out of review), one at a time, as a cancel
-- cascades to children; then the queues go with their schedules.  Only the
-- closing count is echoed: it says that none of the queues is left.
--
SELECT set_config('durable_regress.cleanup_queues', :'cleanup_queues', false) AS cleanup_queues \gset
DO $cleanup$
DECLARE
	queues text[] := string_to_array(current_setting('durable_regress.cleanup_queues'), ',');
	t record;
	q text;
BEGIN
	-- on Citus, a drop of a queue after this block's reads of its tasks
	-- must have run them over one connection per node (docs/scaling-out.md)
	IF current_setting('citus.multi_shard_modify_mode', true) IS NOT NULL THEN
		PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
	END IF;
	FOR i IN 1..10000 LOOP
		SELECT task_id, state INTO t FROM durable.tasks
		WHERE queue_name = ANY (queues)
		  AND state NOT IN ('completed', 'failed', 'cancelled')
		ORDER BY task_id LIMIT 1;
		EXIT WHEN NOT FOUND;
		IF t.state = 'needs_review' THEN
			PERFORM durable_resolve(t.task_id, 'cancel', 'regress', '{"cleanup": true}');
		ELSE
			PERFORM durable_cancel(t.task_id, 'regress cleanup');
		END IF;
	END LOOP;
	FOREACH q IN ARRAY queues LOOP
		IF EXISTS (SELECT FROM durable.queues WHERE queue_name = q) THEN
			PERFORM durable_drop_queue(q, cascade => true);
		END IF;
	END LOOP;
END
$cleanup$;
\set ECHO all
SELECT count(*) AS queues_left FROM durable.queues
WHERE queue_name = ANY (string_to_array(:'cleanup_queues', ','));
