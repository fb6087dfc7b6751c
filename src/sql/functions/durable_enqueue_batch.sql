CREATE OR REPLACE FUNCTION @extschema@.durable_enqueue_batch(
    queue text,
    payloads jsonb[],
    idempotency_keys text[] DEFAULT NULL,
    run_at timestamptz DEFAULT NULL,
    priority int DEFAULT 0,
    class text DEFAULT 'idempotent',
    max_attempts int DEFAULT NULL,
    deadline interval DEFAULT NULL,
    workflow_version text DEFAULT NULL,
    metadata jsonb DEFAULT NULL,
    concurrency_keys text[] DEFAULT NULL,
    fairness_keys text[] DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'durable_enqueue_batch'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_enqueue_batch(text, jsonb[], text[], timestamptz, int, text, int, interval, text, jsonb, text[], text[]) IS
  'add many tasks to a queue, all or nothing, each with its own idempotency key (or none); returns their ids in order';
REVOKE ALL ON FUNCTION @extschema@.durable_enqueue_batch(text, jsonb[], text[], timestamp with time zone, integer, text, integer, interval, text, jsonb, text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_enqueue_batch(text, jsonb[], text[], timestamp with time zone, integer, text, integer, interval, text, jsonb, text[], text[]) TO durable_producer;
