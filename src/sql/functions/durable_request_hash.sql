CREATE OR REPLACE FUNCTION @extschema@.durable_request_hash(request jsonb)
RETURNS bytea
AS 'MODULE_PATHNAME', 'durable_request_hash'
LANGUAGE C IMMUTABLE PARALLEL SAFE;  -- not STRICT: a NULL argument is 22004, never a NULL result
COMMENT ON FUNCTION @extschema@.durable_request_hash(jsonb) IS
  'SHA-256 of the canonical text of a request; key order and white space never change it';
