CREATE OR REPLACE FUNCTION @extschema@.durable_set_fairness(
    queue text,
    fairness_key text,
    weight real DEFAULT 1)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_set_fairness'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_set_fairness(text, text, real) IS
  'the weight of a fairness key of a queue (1 unless set): claims serve the keys with ready work in proportion to their weights';
REVOKE ALL ON FUNCTION @extschema@.durable_set_fairness(text, text, real) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_set_fairness(text, text, real) TO durable_operator;
