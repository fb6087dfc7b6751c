CREATE OR REPLACE FUNCTION @extschema@.durable_resume(queue text, partition int DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_resume'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_resume(text, int) IS
  'let claims take from a paused queue, or from a paused partition of it, again';
REVOKE ALL ON FUNCTION @extschema@.durable_resume(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_resume(text, integer) TO durable_operator, durable_queue_operator;
