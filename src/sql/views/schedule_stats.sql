CREATE OR REPLACE VIEW durable.schedule_stats AS
SELECT queue_name, count(*) AS schedules,
       count(*) FILTER (WHERE next_run <= now()) AS due,
       now() - min(next_run) FILTER (WHERE next_run <= now()) AS oldest_due_age
FROM durable.schedules
GROUP BY queue_name;
COMMENT ON VIEW durable.schedule_stats IS 'per queue: its schedules, how many are due and not yet enqueued, and the oldest due occurrence''s age';
REVOKE ALL ON durable.schedule_stats FROM PUBLIC;
GRANT SELECT ON durable.schedule_stats TO durable_operator, pg_monitor;
