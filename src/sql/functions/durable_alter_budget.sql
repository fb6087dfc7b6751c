CREATE OR REPLACE FUNCTION @extschema@.durable_alter_budget(
    name text,
    amount numeric DEFAULT NULL,
    period interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_alter_budget'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_alter_budget(text, numeric, interval) IS
  'change a spend budget''s amount or period (NULL: unchanged); what is reserved and spent stays';
REVOKE ALL ON FUNCTION @extschema@.durable_alter_budget(text, numeric, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_alter_budget(text, numeric, interval) TO durable_operator;
