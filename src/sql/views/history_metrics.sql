-- The metrics of durable.metrics, computed from the tasks and events
-- retained rather than counted: it reads all of them, so it is for an
-- audit (the chaos soak's verdict), not for a scrape.
CREATE OR REPLACE VIEW durable.history_metrics AS
WITH per_task AS (
    SELECT t.queue_name, t.partition_key, t.task_id, t.state,
           count(*) FILTER (WHERE e.kind IN ('claimed', 'pinned')) AS claims,
           -- a lease that ran out before its task began lost nothing
           min(e.at) FILTER (WHERE e.kind = 'lease_expired'
                               AND e.detail->>'action' IS DISTINCT FROM 'not_begun') AS first_expiry,
           min(e.at) FILTER (WHERE e.kind = 'completed') AS completed_at,
           bool_or(e.state = 'needs_review') AS escalated
    FROM durable.tasks t
    JOIN durable.events e ON e.partition_key = t.partition_key AND e.task_id = t.task_id
    GROUP BY t.queue_name, t.partition_key, t.task_id, t.state
), per_queue AS MATERIALIZED (
    SELECT p.queue_name,
           count(*) AS tasks,
           count(*) FILTER (WHERE p.first_expiry IS NOT NULL) AS recoveries,
           avg((p.state = 'completed')::int) FILTER (WHERE p.first_expiry IS NOT NULL) AS recovered,
           avg(p.completed_at - p.first_expiry)
               FILTER (WHERE p.first_expiry IS NOT NULL AND p.completed_at IS NOT NULL) AS recovery_time,
           avg(p.escalated::int) AS escalated,
           avg(p.claims) AS claims
    FROM per_task p
    GROUP BY p.queue_name
), effects AS MATERIALIZED (
    SELECT t.queue_name, count(*) AS duplicate_side_effects
    FROM (SELECT e.partition_key, e.task_id, e.step
          FROM durable.events e
          WHERE e.kind = 'receipt_recorded' AND e.detail->>'effect_id' IS NOT NULL
          GROUP BY e.partition_key, e.task_id, e.step
          HAVING count(DISTINCT e.detail->>'effect_id') > 1) d
    JOIN durable.tasks t USING (partition_key, task_id)
    GROUP BY t.queue_name
), outcomes AS MATERIALIZED (
    SELECT t.queue_name,
           count(*) FILTER (WHERE s.state = 'unknown'
                              OR (s.state = 'started' AND t.state <> 'running')) AS ambiguous,
           count(*) AS steps
    FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id)
    GROUP BY t.queue_name
), lag AS MATERIALIZED (
    SELECT t.queue_name, min(t.lease_until) AS oldest_expired
    FROM durable.live_tasks t WHERE t.state = 'running' AND t.lease_until < now()
    GROUP BY t.queue_name
)
SELECT q.queue_name,
       coalesce(p.tasks, 0) AS tasks,
       coalesce(f.duplicate_side_effects, 0) AS duplicate_side_effects,
       coalesce(p.recoveries, 0) AS recoveries,
       round(p.recovered, 3) AS recovery_success_rate,
       p.recovery_time AS mean_recovery_time,
       round(o.ambiguous::numeric / nullif(o.steps, 0), 3) AS ambiguous_outcome_rate,
       round(p.escalated, 3) AS human_escalation_rate,
       round(p.claims, 3) AS claims_per_task,
       coalesce(now() - l.oldest_expired, '0') AS reconciliation_lag
FROM durable.queues q
LEFT JOIN per_queue p ON p.queue_name = q.queue_name
LEFT JOIN effects f ON f.queue_name = q.queue_name
LEFT JOIN outcomes o ON o.queue_name = q.queue_name
LEFT JOIN lag l ON l.queue_name = q.queue_name;
COMMENT ON VIEW durable.history_metrics IS 'per queue, computed from every task and event retained (slow with much history; durable.metrics counts the same): duplicate side effects, recovery success rate and mean time, ambiguous outcome rate, human escalation rate, claims per task, reconciliation lag';
REVOKE ALL ON durable.history_metrics FROM PUBLIC;
GRANT SELECT ON durable.history_metrics TO durable_operator, pg_monitor;
