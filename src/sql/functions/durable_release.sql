--
-- workers: what a reference worker needs (issue 12).  A worker that stops
-- gives the tasks it has not started back at once, instead of letting
-- their leases run out and use an attempt; a heartbeat timer renews every
-- held lease in one statement and learns which tasks it lost from the
-- result, not from an error.
--
CREATE OR REPLACE FUNCTION @extschema@.durable_release(task_id bigint, fence bigint, reason text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_release(bigint, bigint, text) IS
  'give a claimed task back at once: ready, fence + 1, its attempt given back; refused while a step is started or unknown';
REVOKE ALL ON FUNCTION @extschema@.durable_release(bigint, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_release(bigint, bigint, text) TO durable_worker;
