--
-- The keys of the fair queues (src/core/fairness.c), from the unfinished
-- tasks only, aggregated per key where the rows are and then joined to the
-- queue and the weights (as durable.queue_gauges, for Citus).
--
CREATE OR REPLACE VIEW durable.fairness_keys WITH (security_barrier) AS
SELECT q.queue_name, g.fairness_key,
       coalesce(w.weight, 1)::float8 AS weight,
       g.ready, g.running, g.unadmitted,
       coalesce(EXTRACT(EPOCH FROM now() - g.oldest_ready), 0)::float8 AS oldest_ready_age_seconds
FROM durable.queues q
JOIN (
    SELECT t.queue_name, t.fairness_key,
           count(*) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now()) AS ready,
           count(*) FILTER (WHERE t.state = 'running') AS running,
           count(*) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now()
                              AND t.fair_pass = 'Infinity') AS unadmitted,
           min(t.run_at) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now())
               AS oldest_ready
    FROM durable.live_tasks t
    WHERE t.fair_pass IS NOT NULL
    GROUP BY t.queue_name, t.fairness_key) g ON g.queue_name = q.queue_name
LEFT JOIN durable.fairness_weights w
    ON w.queue_name = g.queue_name AND w.fairness_key = g.fairness_key
WHERE q.fair
  -- a queue operator's queues only (unfinished_tasks.sql)
  AND durable.queue_in_scope(q.queue_name);
COMMENT ON VIEW durable.fairness_keys IS 'per fairness key of a fair queue (NULL: the tasks without a key), from the unfinished tasks only: its weight, ready (due) and running tasks, due tasks still waiting for their pass, and the age of its oldest due task';
REVOKE ALL ON durable.fairness_keys FROM PUBLIC;
GRANT SELECT ON durable.fairness_keys TO durable_operator, durable_queue_operator;
