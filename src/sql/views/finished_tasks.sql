CREATE OR REPLACE VIEW durable.finished_tasks WITH (security_barrier) AS
SELECT partition_key, task_id, state, class, priority, attempt, max_attempts, version, fence,
       run_at, created_at, lease_until, heartbeat_at, progress_at, stuck_alarm_at, finished_at,
       lease, deadline, queue_name, owner, progress, stop_code, idempotency_key, request_hash,
       workflow_version, payload, result, last_error, checkpoint, checkpoint_version,
       steps_in_doubt, metadata, parent_id, concurrency_key, waits, versions, fairness_key,
       rate_limits, budgets
FROM durable.task_history
WHERE durable.queue_in_scope(queue_name);
COMMENT ON VIEW durable.finished_tasks IS 'the finished tasks retained (durable.task_history) of the queues the reader may see';
REVOKE ALL ON durable.finished_tasks FROM PUBLIC;
GRANT SELECT ON durable.finished_tasks TO durable_operator, durable_queue_operator;
