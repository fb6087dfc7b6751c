CREATE OR REPLACE FUNCTION @extschema@.durable_idempotent_begin(queue text, scope text, key text, request jsonb,
                                                     lock interval DEFAULT '1 minute')
RETURNS TABLE (status text, recovery_point text, fence bigint, response jsonb)
AS 'MODULE_PATHNAME', 'durable_idempotent_begin'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_idempotent_begin(text, text, text, jsonb, interval) IS
  'begin a request under an idempotency key of a queue: started (with the fence that owns it), in_progress or completed (with the stored response); needs the queue''s enqueue grant where it is restricted';
REVOKE ALL ON FUNCTION @extschema@.durable_idempotent_begin(text, text, text, jsonb, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_idempotent_begin(text, text, text, jsonb, interval) TO durable_producer, durable_worker;
