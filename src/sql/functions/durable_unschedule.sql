CREATE OR REPLACE FUNCTION @extschema@.durable_unschedule(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'durable_unschedule'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_unschedule(text) IS
  'remove a schedule; false when there was none';
REVOKE ALL ON FUNCTION @extschema@.durable_unschedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_unschedule(text) TO durable_operator;
