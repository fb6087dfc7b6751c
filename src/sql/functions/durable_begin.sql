--
-- A crash costs only the tasks it touched (issue 43): a worker says when it
-- begins a task it claimed.  A lease that runs out before then gives the
-- attempt back (docs/design.md section 4).
--
CREATE OR REPLACE FUNCTION @extschema@.durable_begin(task_id bigint, fence bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_begin'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_begin(bigint, bigint) IS
  'say that the worker begins a task it claimed: from now on a lease that runs out spends the attempt';
REVOKE ALL ON FUNCTION @extschema@.durable_begin(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_begin(bigint, bigint) TO durable_worker;
