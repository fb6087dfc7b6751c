CREATE OR REPLACE FUNCTION @extschema@.durable_step_start(task_id bigint, fence bigint, step text,
                                               expected_version int)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_step_start'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_step_start(bigint, bigint, text, int) IS
  'move a planned step to started (a new attempt) before its external call; returns its new version';
REVOKE ALL ON FUNCTION @extschema@.durable_step_start(bigint, bigint, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_step_start(bigint, bigint, text, integer) TO durable_worker;
