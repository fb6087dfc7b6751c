CREATE OR REPLACE FUNCTION @extschema@.durable_cancel(task_id bigint, reason text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_cancel'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_cancel(bigint, text) IS
  'cancel an unfinished task; a running one loses its lease (its fence is incremented)';
REVOKE ALL ON FUNCTION @extschema@.durable_cancel(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_cancel(bigint, text) TO durable_operator, durable_queue_operator;
