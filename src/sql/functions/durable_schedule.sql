CREATE OR REPLACE FUNCTION @extschema@.durable_schedule(name text, cron text, queue text,
                                             payload jsonb DEFAULT '{}',
                                             timezone text DEFAULT 'UTC',
                                             backfill boolean DEFAULT false)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'durable_schedule'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_schedule(text, text, text, jsonb, text, boolean) IS
  'create or replace a cron schedule; the reconciler enqueues each occurrence once; returns the next run';
REVOKE ALL ON FUNCTION @extschema@.durable_schedule(text, text, text, jsonb, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_schedule(text, text, text, jsonb, text, boolean) TO durable_operator;
