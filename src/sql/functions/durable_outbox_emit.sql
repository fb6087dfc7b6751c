CREATE OR REPLACE FUNCTION @extschema@.durable_outbox_emit(queue text, topic text, payload jsonb,
                                                key text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'durable_outbox_emit'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_outbox_emit(text, text, jsonb, text) IS
  'emit a message into a queue in the caller''s transaction; NOTIFY durable_outbox ''<queue>'' at commit; needs the queue''s enqueue grant where it is restricted';
REVOKE ALL ON FUNCTION @extschema@.durable_outbox_emit(text, text, jsonb, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_outbox_emit(text, text, jsonb, text) TO durable_producer, durable_worker;
