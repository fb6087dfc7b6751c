--
-- nopreload: what needs the postmaster is said, never a FATAL (DESIGN
-- section 14).  Without shared_preload_libraries the SQL API works, but no
-- reconciler runs, durable.database and durable.node_id do not exist, and
-- task ids carry node number 0; preloaded, the reconciler works in
-- durable.database only.  A database it does not work in schedules
-- durable_reconcile() instead (pg_cron).  durable.status shows which case
-- this database is in, and CREATE EXTENSION says it once.
--
CREATE OR REPLACE FUNCTION durable.library_status(OUT preloaded boolean,
                                       OUT reconciler_database text,
                                       OUT reconciler_enabled boolean,
                                       OUT node_id int,
                                       OUT library_version text)
AS 'MODULE_PATHNAME', 'durable_library_status'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION durable.library_status() IS
  'how this session''s durable library was loaded: preloaded or not (an earlier version''s counts, during an upgrade), the database the reconciler works in and whether it is enabled, the node number in task ids, and the library''s version';
