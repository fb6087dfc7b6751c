CREATE OR REPLACE VIEW durable.wait_stats AS
SELECT queue_name, kind, count(*) AS waiting, now() - min(since) AS oldest_wait,
       count(*) FILTER (WHERE until IS NOT NULL) AS with_timeout
FROM durable.waiting_tasks
GROUP BY queue_name, kind;
COMMENT ON VIEW durable.wait_stats IS 'per queue and kind of wait (sleep, event, join): tasks waiting, the oldest wait''s age, how many have a timeout';
REVOKE ALL ON durable.wait_stats FROM PUBLIC;
GRANT SELECT ON durable.wait_stats TO durable_operator, pg_monitor;
