CREATE OR REPLACE FUNCTION @extschema@.durable_reconcile(batch int DEFAULT 1000, queue text DEFAULT NULL)
RETURNS TABLE (task_id bigint, action text)
AS 'MODULE_PATHNAME', 'durable_reconcile'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_reconcile(int, text) IS
  'settle up to batch expired leases through durable_recovery_action; what the reconciler runs every tick; with a queue, only that queue''s expired leases and stuck alarms';
REVOKE ALL ON FUNCTION @extschema@.durable_reconcile(integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_reconcile(integer, text) TO durable_operator;
