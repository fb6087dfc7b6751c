CREATE OR REPLACE VIEW durable.queue_stats AS
SELECT q.queue_name, q.paused,
       coalesce(l.ready, 0) AS ready, coalesce(l.waiting, 0) AS waiting,
       coalesce(l.running, 0) AS running, coalesce(l.needs_review, 0) AS needs_review,
       coalesce(h.completed, 0) AS completed, coalesce(h.failed, 0) AS failed,
       coalesce(h.cancelled, 0) AS cancelled,
       l.oldest_due_age, l.oldest_heartbeat_age,
       coalesce(l.expired_leases, 0) AS expired_leases, coalesce(l.stuck, 0) AS stuck,
       q.paused_partitions
FROM durable.queues q
LEFT JOIN (
    SELECT t.queue_name,
           count(*) FILTER (WHERE t.state = 'ready') AS ready,
           count(*) FILTER (WHERE t.state = 'waiting') AS waiting,
           count(*) FILTER (WHERE t.state = 'running') AS running,
           count(*) FILTER (WHERE t.state = 'needs_review') AS needs_review,
           now() - min(t.run_at) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now()) AS oldest_due_age,
           now() - min(t.heartbeat_at) FILTER (WHERE t.state = 'running') AS oldest_heartbeat_age,
           count(*) FILTER (WHERE t.state = 'running' AND t.lease_until < now()) AS expired_leases,
           count(*) FILTER (WHERE t.state = 'running' AND p.progress_timeout IS NOT NULL
                              AND t.progress_at < pg_catalog.timezone('UTC',
                                  pg_catalog.timezone('UTC', now()) - p.progress_timeout)) AS stuck
    FROM durable.live_tasks t JOIN durable.queues p ON p.queue_name = t.queue_name
    GROUP BY t.queue_name) l ON l.queue_name = q.queue_name
LEFT JOIN (
    SELECT t.queue_name,
           count(*) FILTER (WHERE t.state = 'completed') AS completed,
           count(*) FILTER (WHERE t.state = 'failed') AS failed,
           count(*) FILTER (WHERE t.state = 'cancelled') AS cancelled
    FROM durable.task_history t
    GROUP BY t.queue_name) h ON h.queue_name = q.queue_name;
COMMENT ON VIEW durable.queue_stats IS 'per queue: tasks by state, the oldest due and running work, expired leases and stuck tasks';
REVOKE ALL ON durable.queue_stats FROM PUBLIC;
GRANT SELECT ON durable.queue_stats TO durable_operator, pg_monitor;
