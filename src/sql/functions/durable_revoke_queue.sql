CREATE OR REPLACE FUNCTION @extschema@.durable_revoke_queue(queue text, role text, privilege text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_revoke_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_revoke_queue(text, text, text) IS
  'take a queue grant back; the queue stays restricted';
REVOKE ALL ON FUNCTION @extschema@.durable_revoke_queue(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_revoke_queue(text, text, text) TO durable_operator;
