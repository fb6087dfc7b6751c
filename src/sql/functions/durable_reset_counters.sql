CREATE OR REPLACE FUNCTION @extschema@.durable_reset_counters()
RETURNS void
AS 'MODULE_PATHNAME', 'durable_reset_counters'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_reset_counters() IS
  'zero every counter and histogram of durable (a reset, for Prometheus'' rate())';
REVOKE ALL ON FUNCTION @extschema@.durable_reset_counters() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_reset_counters() TO durable_operator;
