CREATE OR REPLACE FUNCTION @extschema@.durable_checkpoint(task_id bigint, fence bigint,
                                               checkpoint jsonb, expected_version int)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_checkpoint'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_checkpoint(bigint, bigint, jsonb, int) IS
  'save the task''s checkpoint by compare-and-swap on its checkpoint version; returns the new version';
REVOKE ALL ON FUNCTION @extschema@.durable_checkpoint(bigint, bigint, jsonb, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_checkpoint(bigint, bigint, jsonb, integer) TO durable_worker;
