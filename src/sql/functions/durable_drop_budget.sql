CREATE OR REPLACE FUNCTION @extschema@.durable_drop_budget(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_drop_budget'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_drop_budget(text) IS
  'drop a spend budget: the steps of tasks that name it no longer reserve from it';
REVOKE ALL ON FUNCTION @extschema@.durable_drop_budget(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_drop_budget(text) TO durable_operator;
