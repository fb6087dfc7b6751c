CREATE OR REPLACE FUNCTION @extschema@.durable_join(task_id bigint, fence bigint, name text,
                                         children text[] DEFAULT NULL,
                                         timeout interval DEFAULT NULL)
RETURNS TABLE (status text, children jsonb)
AS 'MODULE_PATHNAME', 'durable_join'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_join(bigint, bigint, text, text[], interval) IS
  'a named wait for children (all when NULL) to finish: (''done'', [{name, task_id, state, result, error}]) or (''waiting'', NULL); (''timed_out'', ...) after the timeout';
REVOKE ALL ON FUNCTION @extschema@.durable_join(bigint, bigint, text, text[], interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_join(bigint, bigint, text, text[], interval) TO durable_worker;
