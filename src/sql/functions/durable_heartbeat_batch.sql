CREATE OR REPLACE FUNCTION @extschema@.durable_heartbeat_batch(task_ids bigint[], fences bigint[],
                                                    lease interval DEFAULT NULL)
RETURNS TABLE (task_id bigint, lease_until timestamptz)
AS 'MODULE_PATHNAME', 'durable_heartbeat_batch'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_heartbeat_batch(bigint[], bigint[], interval) IS
  'extend the leases of many running tasks, each under its own fence; one row per task, lease_until NULL for a task no longer held';
REVOKE ALL ON FUNCTION @extschema@.durable_heartbeat_batch(bigint[], bigint[], interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_heartbeat_batch(bigint[], bigint[], interval) TO durable_worker;
