CREATE OR REPLACE FUNCTION @extschema@.durable_quarantine(task_id bigint, reason text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_quarantine'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_quarantine(bigint, text) IS
  'put an unfinished task among the dead letters (failed, quarantined) with a reason, its lease revoked; refused (55U04) while a step is in doubt';
REVOKE ALL ON FUNCTION @extschema@.durable_quarantine(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_quarantine(bigint, text) TO durable_operator, durable_queue_operator;
