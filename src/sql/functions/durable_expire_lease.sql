--
-- Ending a lease now: for an operator facing a hung worker, and for the
-- tests of one's own worker, which should not have to sleep out a lease
-- to see its task recovered.
--
CREATE OR REPLACE FUNCTION @extschema@.durable_expire_lease(task_id bigint, reason text)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_expire_lease'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_expire_lease(bigint, text) IS
  'end a running task''s lease now and settle it through the recovery table as the reconciler would, with an event naming the caller and the reason; returns the action taken';
REVOKE ALL ON FUNCTION @extschema@.durable_expire_lease(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_expire_lease(bigint, text) TO durable_operator, durable_queue_operator;
