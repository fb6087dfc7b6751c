CREATE OR REPLACE FUNCTION @extschema@.durable_idempotent_advance(queue text, scope text, key text, fence bigint,
                                                       recovery_point text,
                                                       lock interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_idempotent_advance'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_idempotent_advance(text, text, text, bigint, text, interval) IS
  'record the recovery point a request of a queue has reached, under the fence that owns it';
REVOKE ALL ON FUNCTION @extschema@.durable_idempotent_advance(text, text, text, bigint, text, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_idempotent_advance(text, text, text, bigint, text, interval) TO durable_producer, durable_worker;
