CREATE OR REPLACE FUNCTION @extschema@.durable_inbox_receive(queue text, consumer text, message_id text,
                                                  payload jsonb DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'durable_inbox_receive'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_inbox_receive(text, text, text, jsonb) IS
  'true the first time a consumer of a queue receives a message, false for a duplicate; 55U03 for the same id with another payload; needs the queue''s work grant where it is restricted';
REVOKE ALL ON FUNCTION @extschema@.durable_inbox_receive(text, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_inbox_receive(text, text, text, jsonb) TO durable_worker;
