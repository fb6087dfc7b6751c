CREATE OR REPLACE FUNCTION @extschema@.durable_metrics_prometheus()
RETURNS text
AS 'MODULE_PATHNAME', 'durable_metrics_prometheus'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_metrics_prometheus() IS
  'every counter, histogram and gauge of durable, per queue, in the Prometheus text exposition format; reads no history';
REVOKE ALL ON FUNCTION @extschema@.durable_metrics_prometheus() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_metrics_prometheus() TO durable_operator, pg_monitor;
