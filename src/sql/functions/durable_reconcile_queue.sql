CREATE OR REPLACE FUNCTION @extschema@.durable_reconcile(queue text, batch int DEFAULT 1000)
RETURNS TABLE (task_id bigint, action text)
AS 'MODULE_PATHNAME', 'durable_reconcile_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_reconcile(text, int) IS
  'settle up to batch expired leases and raise up to batch stuck alarms of one queue, and nothing of any other';
REVOKE ALL ON FUNCTION @extschema@.durable_reconcile(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_reconcile(text, integer) TO durable_operator;
