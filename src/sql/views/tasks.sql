-- the union of the two tables, filtered as a whole: Citus plans that
-- joined to a function of its rows (jsonb_each(t.waits)), not a union of
-- filtered tables or of the two views
CREATE OR REPLACE VIEW durable.tasks WITH (security_barrier) AS
SELECT t.*
FROM (
    SELECT partition_key, task_id, state, class, priority, attempt, max_attempts, version, fence,
           run_at, created_at, lease_until, heartbeat_at, progress_at, stuck_alarm_at, finished_at,
           lease, deadline, queue_name, owner, progress, stop_code, idempotency_key, request_hash,
           workflow_version, payload, result, last_error, checkpoint, checkpoint_version,
           steps_in_doubt, metadata, parent_id, concurrency_key, waits, versions, fairness_key,
           rate_limits, budgets, began_at, unbegun_expiries
    FROM durable.live_tasks
    UNION ALL
    SELECT partition_key, task_id, state, class, priority, attempt, max_attempts, version, fence,
           run_at, created_at, lease_until, heartbeat_at, progress_at, stuck_alarm_at, finished_at,
           lease, deadline, queue_name, owner, progress, stop_code, idempotency_key, request_hash,
           workflow_version, payload, result, last_error, checkpoint, checkpoint_version,
           steps_in_doubt, metadata, parent_id, concurrency_key, waits, versions, fairness_key,
           rate_limits, budgets, began_at, unbegun_expiries
    FROM durable.task_history) t
WHERE durable.queue_in_scope(t.queue_name);
COMMENT ON VIEW durable.tasks IS 'every task retained of the queues the reader may see: the unfinished ones (durable.unfinished_tasks) and the finished ones (durable.finished_tasks)';
REVOKE ALL ON durable.tasks FROM PUBLIC;
GRANT SELECT ON durable.tasks TO durable_operator, durable_queue_operator;
