CREATE OR REPLACE FUNCTION @extschema@.durable_pause(queue text, partition int DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_pause'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_pause(text, int) IS
  'stop claims from a queue, or from one of its partitions (its partition_key); nothing is lost, leases still expire and are recovered';
REVOKE ALL ON FUNCTION @extschema@.durable_pause(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_pause(text, integer) TO durable_operator, durable_queue_operator;
