CREATE OR REPLACE FUNCTION @extschema@.durable_emit(queue text, event text, payload jsonb DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'durable_emit'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_emit(text, text, jsonb) IS
  'emit an event of a queue in the caller''s transaction and wake its awaits: true the first time, false for the same payload again, 55U03 for another; needs the queue''s enqueue grant where it is restricted';
REVOKE ALL ON FUNCTION @extschema@.durable_emit(text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_emit(text, text, jsonb) TO durable_producer, durable_worker, durable_operator, durable_queue_operator;
