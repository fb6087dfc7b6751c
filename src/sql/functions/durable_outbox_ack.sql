CREATE OR REPLACE FUNCTION @extschema@.durable_outbox_ack(queue text, message_ids bigint[], fence bigint)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_outbox_ack'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_outbox_ack(text, bigint[], bigint) IS
  'mark messages of a queue published while they are still held under the fence; needs the queue''s work grant where it is restricted';
REVOKE ALL ON FUNCTION @extschema@.durable_outbox_ack(text, bigint[], bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_outbox_ack(text, bigint[], bigint) TO durable_worker;
