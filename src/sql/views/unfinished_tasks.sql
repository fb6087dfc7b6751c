--
-- The views that show a queue's rows show a queue operator those of the
-- queues in its scope only (durable.queue_in_scope(), true for anyone
-- else), and are security barriers: no function of a reader's query sees
-- a row the filter keeps from it.  The scope is read once a transaction;
-- for a role that sees every queue the test of a row reads nothing.  A
-- test per row, not a subquery: Citus sends it with the query to the
-- shards.
--
CREATE OR REPLACE VIEW durable.unfinished_tasks WITH (security_barrier) AS
SELECT partition_key, task_id, state, class, priority, attempt, max_attempts, version, fence,
       run_at, created_at, lease_until, heartbeat_at, progress_at, stuck_alarm_at, finished_at,
       lease, deadline, queue_name, owner, progress, stop_code, idempotency_key, request_hash,
       workflow_version, payload, result, last_error, checkpoint, checkpoint_version,
       steps_in_doubt, metadata, parent_id, concurrency_key, waits, versions, fairness_key,
       rate_limits, budgets
FROM durable.live_tasks
WHERE durable.queue_in_scope(queue_name);
COMMENT ON VIEW durable.unfinished_tasks IS 'the tasks not finished (durable.live_tasks) of the queues the reader may see';
REVOKE ALL ON durable.unfinished_tasks FROM PUBLIC;
GRANT SELECT ON durable.unfinished_tasks TO durable_operator, durable_queue_operator;
