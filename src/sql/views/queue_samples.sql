-- the samples of the queues the reader may see (unfinished_tasks.sql)
CREATE OR REPLACE VIEW durable.queue_samples WITH (security_barrier) AS
SELECT s.at, s.queue_name, s.ready, s.running, s.waiting, s.needs_review,
       s.oldest_ready_age_seconds, s.enqueued, s.completed, s.failed, s.dead_lettered,
       s.leases_expired, s.sent_to_review, s.counters_since
FROM durable.samples s
WHERE durable.queue_in_scope(s.queue_name);
COMMENT ON VIEW durable.queue_samples IS 'per queue and minute of the last 48 hours: the unfinished tasks by state, the age of the oldest due one, and the counters of durable.queue_counters at that time (NULL where durable is not preloaded)';
REVOKE ALL ON durable.queue_samples FROM PUBLIC;
GRANT SELECT ON durable.queue_samples TO durable_operator, durable_queue_operator, pg_monitor;
