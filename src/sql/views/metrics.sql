-- The metrics of docs/design.md section 7 per queue, from the counters
-- this server keeps in shared memory (durable.queue_counters) and the live
-- tasks: as cheap with ten million finished tasks as with none, and since
-- the counters began (since), not over the tasks retained; without
-- preloading only the lag is known.  durable.history_metrics computes them
-- from the history retained instead.
CREATE OR REPLACE VIEW durable.metrics AS
WITH recovery AS MATERIALIZED (
    SELECT s.labels->>'queue' AS queue_name,
           sum(s.value) FILTER (WHERE s.metric = 'durable_recovery_time_seconds_sum') AS seconds,
           sum(s.value) FILTER (WHERE s.metric = 'durable_recovery_time_seconds_count') AS recovered
    FROM durable.metric_samples(ARRAY['durable_recovery_time_seconds']) s
    GROUP BY 1
), lag AS MATERIALIZED (
    SELECT t.queue_name, min(t.lease_until) AS oldest_expired
    FROM durable.live_tasks t WHERE t.state = 'running' AND t.lease_until < now()
    GROUP BY t.queue_name
)
SELECT q.queue_name,
       c.completed + c.dead_lettered + c.cancelled AS finished,
       c.duplicate_effects AS duplicate_side_effects,
       c.finished_after_expiry AS recoveries,
       round(c.recovered::numeric / nullif(c.finished_after_expiry, 0), 3) AS recovery_success_rate,
       make_interval(secs => r.seconds / nullif(r.recovered, 0)) AS mean_recovery_time,
       round(c.steps_left_in_doubt::numeric / nullif(c.steps_started, 0), 3) AS ambiguous_outcome_rate,
       round(c.sent_to_review::numeric
             / nullif(c.completed + c.dead_lettered + c.cancelled, 0), 3) AS human_escalation_rate,
       round(c.claimed::numeric
             / nullif(c.completed + c.dead_lettered + c.cancelled, 0), 3) AS claims_per_task,
       coalesce(now() - l.oldest_expired, '0') AS reconciliation_lag,
       c.stats_reset AS since
FROM durable.queues q
LEFT JOIN durable.queue_counters() c ON c.queue_name = q.queue_name
LEFT JOIN recovery r ON r.queue_name = q.queue_name
LEFT JOIN lag l ON l.queue_name = q.queue_name;
COMMENT ON VIEW durable.metrics IS 'per queue, counted since the counters began (since): duplicate side effects, recovery success rate and mean time, ambiguous outcome rate, human escalation rate, claims per task, and the reconciliation lag now; cheap at any history';
REVOKE ALL ON durable.metrics FROM PUBLIC;
GRANT SELECT ON durable.metrics TO durable_operator, pg_monitor;
