CREATE OR REPLACE FUNCTION @extschema@.durable_idempotent_finish(queue text, scope text, key text, fence bigint,
                                                      response jsonb,
                                                      retention interval DEFAULT '24 hours')
RETURNS void
AS 'MODULE_PATHNAME', 'durable_idempotent_finish'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_idempotent_finish(text, text, text, bigint, jsonb, interval) IS
  'store the response of a request of a queue under the fence that owns it; later begins get it back until the retention has passed';
REVOKE ALL ON FUNCTION @extschema@.durable_idempotent_finish(text, text, text, bigint, jsonb, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_idempotent_finish(text, text, text, bigint, jsonb, interval) TO durable_producer, durable_worker;
