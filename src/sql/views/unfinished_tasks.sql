--
-- The views that show a queue's rows show a queue operator those of the
-- queues in its scope only (durable.queues_in_scope(), NULL for anyone
-- else), and are security barriers: no function of a reader's query sees
-- a row the filter keeps from it.  The filter is evaluated once per
-- statement; for an operator of every queue it is one test of NULL.
--
CREATE OR REPLACE VIEW durable.unfinished_tasks WITH (security_barrier) AS
SELECT partition_key, task_id, state, class, priority, attempt, max_attempts, version, fence,
       run_at, created_at, lease_until, heartbeat_at, progress_at, stuck_alarm_at, finished_at,
       lease, deadline, queue_name, owner, progress, stop_code, idempotency_key, request_hash,
       workflow_version, payload, result, last_error, checkpoint, checkpoint_version,
       steps_in_doubt, metadata, parent_id, concurrency_key, waits, versions, fairness_key,
       rate_limits, budgets
FROM durable.live_tasks
WHERE ((SELECT durable.queues_in_scope()) IS NULL
       OR queue_name = ANY ((SELECT durable.queues_in_scope())::text[]));
COMMENT ON VIEW durable.unfinished_tasks IS 'the tasks not finished (durable.live_tasks) of the queues the reader may see';
REVOKE ALL ON durable.unfinished_tasks FROM PUBLIC;
GRANT SELECT ON durable.unfinished_tasks TO durable_operator, durable_queue_operator;
