CREATE OR REPLACE VIEW durable.tasks AS
SELECT partition_key, task_id, state, class, priority, attempt, max_attempts, version, fence,
       run_at, created_at, lease_until, heartbeat_at, progress_at, stuck_alarm_at, finished_at,
       lease, deadline, queue_name, owner, progress, stop_code, idempotency_key, request_hash,
       workflow_version, payload, result, last_error, checkpoint, checkpoint_version,
       steps_in_doubt, metadata, parent_id, concurrency_key, waits, versions, fairness_key,
       rate_limits, budgets
FROM durable.live_tasks
UNION ALL
SELECT partition_key, task_id, state, class, priority, attempt, max_attempts, version, fence,
       run_at, created_at, lease_until, heartbeat_at, progress_at, stuck_alarm_at, finished_at,
       lease, deadline, queue_name, owner, progress, stop_code, idempotency_key, request_hash,
       workflow_version, payload, result, last_error, checkpoint, checkpoint_version,
       steps_in_doubt, metadata, parent_id, concurrency_key, waits, versions, fairness_key,
       rate_limits, budgets
FROM durable.task_history;
COMMENT ON VIEW durable.tasks IS 'every task retained: the unfinished ones (durable.live_tasks) and the finished ones (durable.task_history)';
REVOKE ALL ON durable.tasks FROM PUBLIC;
GRANT SELECT ON durable.tasks TO durable_operator;
