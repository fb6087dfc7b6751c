CREATE OR REPLACE FUNCTION @extschema@.durable_throttle(
    queue text,
    key text,
    payload jsonb,
    per interval)
RETURNS bigint
AS 'MODULE_PATHNAME', 'durable_throttle'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_throttle(text, text, jsonb, interval) IS
  'at most one task a key per period: a call within the period of the key''s last task returns that task''s id, a later one enqueues a new task';
REVOKE ALL ON FUNCTION @extschema@.durable_throttle(text, text, jsonb, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_throttle(text, text, jsonb, interval) TO durable_producer;
