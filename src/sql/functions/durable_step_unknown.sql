CREATE OR REPLACE FUNCTION @extschema@.durable_step_unknown(task_id bigint, fence bigint, step text,
                                                 expected_version int, reason text DEFAULT NULL)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_step_unknown'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_step_unknown(bigint, bigint, text, int, text) IS
  'the external call timed out: the step''s outcome is unknown (never failed)';
REVOKE ALL ON FUNCTION @extschema@.durable_step_unknown(bigint, bigint, text, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_step_unknown(bigint, bigint, text, integer, text) TO durable_worker;
