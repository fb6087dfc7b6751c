CREATE OR REPLACE FUNCTION @extschema@.durable_create_budget(
    name text,
    amount numeric,
    period interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_create_budget'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_create_budget(text, numeric, interval) IS
  'create a spend budget of amount, starting again each period on the UTC calendar when one is given; tasks name it at enqueue, their steps reserve from it';
REVOKE ALL ON FUNCTION @extschema@.durable_create_budget(text, numeric, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_create_budget(text, numeric, interval) TO durable_operator;
