CREATE OR REPLACE FUNCTION @extschema@.durable_debounce(
    queue text,
    key text,
    payload jsonb,
    delay interval,
    max_wait interval DEFAULT NULL,
    mode text DEFAULT 'trailing')
RETURNS bigint
AS 'MODULE_PATHNAME', 'durable_debounce'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_debounce(text, text, jsonb, interval, interval, text) IS
  'one task for the calls of a key until it is claimed: it runs delay after the last call, never later than max_wait after the first, with the last payload (trailing) or the first (leading)';
REVOKE ALL ON FUNCTION @extschema@.durable_debounce(text, text, jsonb, interval, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_debounce(text, text, jsonb, interval, interval, text) TO durable_producer;
