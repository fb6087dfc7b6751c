CREATE OR REPLACE FUNCTION @extschema@.durable_fail(
    task_id bigint,
    fence bigint,
    error_class text,
    error jsonb DEFAULT NULL,
    retry_after interval DEFAULT NULL,
    step text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_fail'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_fail(bigint, bigint, text, jsonb, interval, text) IS
  'report a failed attempt of the task or of one of its started steps; applies and returns the decision of durable_next_action';
REVOKE ALL ON FUNCTION @extschema@.durable_fail(bigint, bigint, text, jsonb, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_fail(bigint, bigint, text, jsonb, interval, text) TO durable_worker;
