--
-- The isolation specs' common teardown: CALL durable_isolation_reset() empties
-- every table of the extension but its identity (durable.installation),
-- drops every queue with its grants and schedules, and restarts the task
-- ids, so that each spec starts from a new installation whatever ran
-- before it.  The tables are read from the catalog (the extension's
-- members), so a table added later is emptied too without a change here.
-- make installcheck (test/test_db.sql) and tools/citus load this file into
-- the database the specs run in; by hand: psql -d DB -f test/isolation/reset.sql
--
CREATE OR REPLACE PROCEDURE public.durable_isolation_reset()
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $reset$
DECLARE
	ext oid;
	ext_schema name;
	t regclass;
BEGIN
	SELECT e.oid, e.extnamespace::regnamespace::name INTO ext, ext_schema
	FROM pg_extension e WHERE e.extname = 'durable';
	-- a partitioned table empties its partitions; the queues go last, by
	-- durable_drop_queue (on Citus the other tables refer to them)
	FOR t IN
		SELECT c.oid::regclass FROM pg_depend d
		JOIN pg_class c ON c.oid = d.objid
		WHERE d.classid = 'pg_class'::regclass
		  AND d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext
		  AND d.deptype = 'e' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		  AND c.oid NOT IN ('durable.installation'::regclass, 'durable.queues'::regclass)
		ORDER BY c.relname
	LOOP
		EXECUTE format('DELETE FROM %s', t);
	END LOOP;
	EXECUTE format('SELECT count(%I.durable_drop_queue(queue_name, cascade => true))'
				   ' FROM durable.queues', ext_schema);
	ALTER SEQUENCE durable.task_seq RESTART;
END
$reset$;
