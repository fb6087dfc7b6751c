CREATE OR REPLACE FUNCTION @extschema@.durable_outbox_claim(queue text, publisher text, batch int DEFAULT 100,
                                                 lease interval DEFAULT '30 seconds')
RETURNS TABLE (message_id bigint, fence bigint, topic text, key text, payload jsonb, attempt int)
AS 'MODULE_PATHNAME', 'durable_outbox_claim'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_outbox_claim(text, text, int, interval) IS
  'lease a batch of a queue''s unpublished messages under one new fence; needs the queue''s work grant where it is restricted';
REVOKE ALL ON FUNCTION @extschema@.durable_outbox_claim(text, text, integer, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_outbox_claim(text, text, integer, interval) TO durable_worker;
