CREATE OR REPLACE FUNCTION @extschema@.durable_idempotency_key(VARIADIC parts text[])
RETURNS text
AS 'MODULE_PATHNAME', 'durable_idempotency_key'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.durable_idempotency_key(text[]) IS
  'stable idempotency key of a logical operation: hex SHA-256 over its length-prefixed parts';
