CREATE OR REPLACE FUNCTION @extschema@.durable_cron_next(cron text, after timestamptz, timezone text DEFAULT 'UTC')
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'durable_cron_next'
LANGUAGE C STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_cron_next(text, timestamptz, text) IS
  'the first time after "after" at which a five-field cron expression fires, read in a time zone';
