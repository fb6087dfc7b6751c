CREATE OR REPLACE FUNCTION @extschema@.durable_heartbeat(
    task_id bigint,
    fence bigint,
    progress text DEFAULT NULL,
    lease interval DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'durable_heartbeat'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_heartbeat(bigint, bigint, text, interval) IS
  'extend the lease of a running task and record its progress; returns the new lease end';
REVOKE ALL ON FUNCTION @extschema@.durable_heartbeat(bigint, bigint, text, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_heartbeat(bigint, bigint, text, interval) TO durable_worker;
