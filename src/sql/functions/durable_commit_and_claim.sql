CREATE OR REPLACE FUNCTION @extschema@.durable_commit_and_claim(
    task_id bigint,
    fence bigint,
    result jsonb DEFAULT NULL,
    worker text DEFAULT NULL,
    lease interval DEFAULT NULL,
    batch int DEFAULT 1,
    versions jsonb DEFAULT NULL)
RETURNS TABLE (task_id bigint, fence bigint, lease_until timestamptz, attempt int,
               payload jsonb, checkpoint jsonb, versions jsonb)
AS 'MODULE_PATHNAME', 'durable_commit_and_claim'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_commit_and_claim(bigint, bigint, jsonb, text, interval, int, jsonb) IS
  'complete a task and claim the next ones of its queue in the same transaction: one commit per task';
REVOKE ALL ON FUNCTION @extschema@.durable_commit_and_claim(bigint, bigint, jsonb, text, interval, integer, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_commit_and_claim(bigint, bigint, jsonb, text, interval, integer, jsonb) TO durable_worker;
