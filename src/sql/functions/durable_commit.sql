CREATE OR REPLACE FUNCTION @extschema@.durable_commit(
    task_id bigint,
    fence bigint,
    result jsonb DEFAULT NULL,
    step text DEFAULT NULL,
    expected_version int DEFAULT NULL,
    spent numeric DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_commit'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_commit(bigint, bigint, jsonb, text, int, numeric) IS
  'with a step: commit that step (compare-and-swap on its version), settling its reservation with what was spent (the reservation when NULL); without: complete the task, refused while a step is started or unknown';
REVOKE ALL ON FUNCTION @extschema@.durable_commit(bigint, bigint, jsonb, text, integer, numeric) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_commit(bigint, bigint, jsonb, text, integer, numeric) TO durable_worker;
