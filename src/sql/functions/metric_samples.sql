--
-- The samples of durable_metrics_prometheus() as rows, for a scraper that
-- runs SQL queries (metrics/postgres_exporter.yaml exposes them under the
-- same names).
--
CREATE OR REPLACE FUNCTION durable.metric_samples(families text[] DEFAULT NULL)
RETURNS TABLE (metric text, labels jsonb, value float8)
AS 'MODULE_PATHNAME', 'durable_metric_samples'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION durable.metric_samples(text[]) IS
  'the samples of durable_metrics_prometheus() as rows (metric, labels, value), of the families named (a histogram''s by its name) or of all; computes only what is named';
REVOKE ALL ON FUNCTION durable.metric_samples(text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION durable.metric_samples(text[]) TO durable_operator, pg_monitor;
