CREATE OR REPLACE FUNCTION @extschema@.durable_step_start(task_id bigint, fence bigint, step text,
                                               expected_version int,
                                               reserve numeric DEFAULT NULL)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_step_start'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_step_start(bigint, bigint, text, int, numeric) IS
  'move a planned step to started (a new attempt) before its external call, reserving reserve from every budget its task names (all or none); returns its new version';
REVOKE ALL ON FUNCTION @extschema@.durable_step_start(bigint, bigint, text, integer, numeric) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_step_start(bigint, bigint, text, integer, numeric) TO durable_worker;
