CREATE OR REPLACE FUNCTION @extschema@.durable_enqueue(
    queue text,
    payload jsonb DEFAULT '{}',
    idempotency_key text DEFAULT NULL,
    run_at timestamptz DEFAULT NULL,
    priority int DEFAULT 0,
    class text DEFAULT 'idempotent',
    max_attempts int DEFAULT NULL,
    deadline interval DEFAULT NULL,
    workflow_version text DEFAULT NULL,
    metadata jsonb DEFAULT NULL,
    concurrency_key text DEFAULT NULL,
    fairness_key text DEFAULT NULL,
    rate_limits jsonb DEFAULT NULL,
    budgets text[] DEFAULT NULL,
    spend_limit numeric DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'durable_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_enqueue(text, jsonb, text, timestamptz, int, text, int, interval, text, jsonb, text, text, jsonb, text[], numeric) IS
  'add a task; the same idempotency key with the same payload returns the first task id, with another payload raises 55U03';
REVOKE ALL ON FUNCTION @extschema@.durable_enqueue(text, jsonb, text, timestamp with time zone, integer, text, integer, interval, text, jsonb, text, text, jsonb, text[], numeric) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_enqueue(text, jsonb, text, timestamp with time zone, integer, text, integer, interval, text, jsonb, text, text, jsonb, text[], numeric) TO durable_producer;
