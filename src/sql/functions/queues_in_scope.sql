--
-- 9. What a queue operator sees: the views that show a queue's rows keep
--    those of the queues in its scope (docs/security.md).  Anyone may ask
--    of its own scope; queues_in_scope reads durable.queues, and so runs
--    with its owner's rights.  A statement of its own, with a function's
--    settings, cannot run in a parallel worker: they are parallel
--    restricted, so that the leader tests the rows.
--
CREATE OR REPLACE FUNCTION durable.queues_in_scope()
RETURNS text[]
AS 'MODULE_PATHNAME', 'durable_queues_in_scope'
LANGUAGE C STABLE PARALLEL RESTRICTED SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION durable.queues_in_scope() IS
  'the queues whose rows durable''s views show the calling role: NULL for every queue, or for a member of durable_queue_operator (and not of durable_operator) the open queues and the restricted ones it holds a grant of';

CREATE OR REPLACE FUNCTION durable.queue_in_scope(queue text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'durable_queue_in_scope'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION durable.queue_in_scope(text) IS
  'whether durable''s views show the calling role the rows of the queue (durable.queues_in_scope())';

CREATE OR REPLACE FUNCTION durable.task_in_scope(task_id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'durable_task_in_scope'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION durable.task_in_scope(bigint) IS
  'whether durable''s views show the calling role the rows of the task: those of a task of a queue in its scope';
