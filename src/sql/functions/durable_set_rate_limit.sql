CREATE OR REPLACE FUNCTION @extschema@.durable_set_rate_limit(
    name text,
    rate int,
    per interval,
    burst int DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_set_rate_limit'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_set_rate_limit(text, int, interval, int) IS
  'create or replace a rate limit: claims take at most burst units of it at once (rate when NULL) and rate units per per after that';
REVOKE ALL ON FUNCTION @extschema@.durable_set_rate_limit(text, int, interval, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_set_rate_limit(text, int, interval, int) TO durable_operator;
