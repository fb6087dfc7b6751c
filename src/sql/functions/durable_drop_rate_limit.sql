CREATE OR REPLACE FUNCTION @extschema@.durable_drop_rate_limit(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_drop_rate_limit'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_drop_rate_limit(text) IS
  'drop a rate limit and its buckets: tasks that name it are no longer held back by it';
REVOKE ALL ON FUNCTION @extschema@.durable_drop_rate_limit(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_drop_rate_limit(text) TO durable_operator;
