CREATE OR REPLACE FUNCTION @extschema@.durable_compensate(task_id bigint, fence bigint,
                                               classes jsonb DEFAULT NULL)
RETURNS TABLE (step text, compensates text, state text, version int, idempotency_key text)
AS 'MODULE_PATHNAME', 'durable_compensate'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_compensate(bigint, bigint, jsonb) IS
  'plan a compensation step for each committed step, newest first, of its step''s class or the one classes gives; calling it again plans nothing new';
REVOKE ALL ON FUNCTION @extschema@.durable_compensate(bigint, bigint, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_compensate(bigint, bigint, jsonb) TO durable_worker;
