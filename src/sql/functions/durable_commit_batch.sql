CREATE OR REPLACE FUNCTION @extschema@.durable_commit_batch(task_ids bigint[], fences bigint[],
                                                 results jsonb[] DEFAULT NULL)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_commit_batch'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_commit_batch(bigint[], bigint[], jsonb[]) IS
  'complete many running tasks, each under its own fence, in one statement; all or none';
REVOKE ALL ON FUNCTION @extschema@.durable_commit_batch(bigint[], bigint[], jsonb[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_commit_batch(bigint[], bigint[], jsonb[]) TO durable_worker;
