CREATE OR REPLACE FUNCTION @extschema@.durable_trigger_schedule(name text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'durable_trigger_schedule'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_trigger_schedule(text) IS
  'enqueue an occurrence of a schedule now, outside its expression, paused or not; returns its task';
REVOKE ALL ON FUNCTION @extschema@.durable_trigger_schedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_trigger_schedule(text) TO durable_operator;
