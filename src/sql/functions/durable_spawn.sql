CREATE OR REPLACE FUNCTION @extschema@.durable_spawn(
    task_id bigint,
    fence bigint,
    name text,
    queue text,
    payload jsonb DEFAULT '{}',
    run_at timestamptz DEFAULT NULL,
    priority int DEFAULT 0,
    class text DEFAULT 'idempotent',
    max_attempts int DEFAULT NULL,
    deadline interval DEFAULT NULL,
    workflow_version text DEFAULT NULL,
    metadata jsonb DEFAULT NULL,
    concurrency_key text DEFAULT NULL,
    fairness_key text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'durable_spawn'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_spawn(bigint, bigint, text, text, jsonb, timestamptz, int, text, int, interval, text, jsonb, text, text) IS
  'enqueue a child task once per (parent, name); a replay returns the same id';
REVOKE ALL ON FUNCTION @extschema@.durable_spawn(bigint, bigint, text, text, jsonb, timestamp with time zone, integer, text, integer, interval, text, jsonb, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_spawn(bigint, bigint, text, text, jsonb, timestamp with time zone, integer, text, integer, interval, text, jsonb, text, text) TO durable_worker;
