--
-- Metrics aggregated where the rows are.  Each queue's figures are summed
-- per queue first and only then joined to its row in durable.queues: on
-- Citus a reference table outer-joined to a distributed one pulls every
-- row of the distributed side to the coordinator, while an aggregate per
-- queue runs on each shard and sends a row per queue.  On one server the
-- answers are the same.
--
CREATE OR REPLACE VIEW durable.queue_gauges WITH (security_barrier) AS
SELECT q.queue_name, q.paused, q.paused_partitions,
       coalesce(g.ready, 0) AS ready,
       coalesce(g.running, 0) AS running,
       coalesce(g.waiting, 0) AS waiting,
       coalesce(g.needs_review, 0) AS needs_review,
       coalesce(g.scheduled, 0) AS scheduled,
       coalesce(EXTRACT(EPOCH FROM now() - g.oldest_ready), 0)::float8 AS oldest_ready_age_seconds,
       coalesce(EXTRACT(EPOCH FROM now() - g.oldest_heartbeat), 0)::float8 AS oldest_heartbeat_age_seconds
FROM durable.queues q
LEFT JOIN (
    SELECT t.queue_name,
           count(*) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now()) AS ready,
           count(*) FILTER (WHERE t.state = 'running') AS running,
           count(*) FILTER (WHERE t.state = 'waiting' AND t.run_at > now()) AS waiting,
           count(*) FILTER (WHERE t.state = 'needs_review') AS needs_review,
           count(*) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at > now()
                              AND t.run_at < 'infinity') AS scheduled,
           min(t.run_at) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now())
               AS oldest_ready,
           min(t.heartbeat_at) FILTER (WHERE t.state = 'running') AS oldest_heartbeat
    FROM durable.live_tasks t
    GROUP BY t.queue_name) g ON g.queue_name = q.queue_name
-- a queue operator's queues only (unfinished_tasks.sql)
WHERE durable.queue_in_scope(q.queue_name);
COMMENT ON VIEW durable.queue_gauges IS 'per queue, from the unfinished tasks only: ready (due), running, waiting (not due), in review, scheduled (due later), the ages of the oldest due task and of the oldest heartbeat; cheap whatever history is kept';
REVOKE ALL ON durable.queue_gauges FROM PUBLIC;
GRANT SELECT ON durable.queue_gauges TO durable_operator, pg_monitor, durable_queue_operator;
