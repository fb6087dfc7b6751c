CREATE OR REPLACE FUNCTION @extschema@.durable_claim(
    queue text,
    worker text,
    lease interval DEFAULT NULL,
    batch int DEFAULT 1,
    versions jsonb DEFAULT NULL)
RETURNS TABLE (task_id bigint, fence bigint, lease_until timestamptz, attempt int,
               payload jsonb, checkpoint jsonb, versions jsonb)
AS 'MODULE_PATHNAME', 'durable_claim'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_claim(text, text, interval, int, jsonb) IS
  'lease up to batch ready tasks whose time has come, highest priority first, skipping locked ones; with versions, only tasks pinned to versions the worker runs (and unpinned ones, which it pins); each claim increments the fence';
REVOKE ALL ON FUNCTION @extschema@.durable_claim(text, text, interval, integer, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_claim(text, text, interval, integer, jsonb) TO durable_worker;
