--
-- 9. What a queue operator sees: the views that show a queue's rows keep
--    those of the queues in its scope (docs/security.md).
--
CREATE OR REPLACE FUNCTION durable.queues_in_scope()
RETURNS text[]
AS 'MODULE_PATHNAME', 'durable_queues_in_scope'
LANGUAGE C STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION durable.queues_in_scope() IS
  'the queues whose rows durable''s views show the calling role: NULL for every queue, or for a member of durable_queue_operator (and not of durable_operator) the open queues and the restricted ones it holds a grant of';
REVOKE ALL ON FUNCTION durable.queues_in_scope() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION durable.queues_in_scope() TO durable_operator, durable_queue_operator, pg_monitor;
