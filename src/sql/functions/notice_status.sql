CREATE OR REPLACE FUNCTION durable.notice_status()
RETURNS void
AS 'MODULE_PATHNAME', 'durable_notice_status'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION durable.notice_status() IS
  'at the commit, say in a NOTICE when no reconciler works in this database and what to do instead; CREATE and ALTER EXTENSION call it';
REVOKE ALL ON FUNCTION durable.notice_status() FROM PUBLIC;
