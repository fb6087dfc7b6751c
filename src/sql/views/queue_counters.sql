CREATE OR REPLACE VIEW durable.queue_counters AS SELECT * FROM durable.queue_counters();
COMMENT ON VIEW durable.queue_counters IS 'per queue: what durable did since the server started or durable_reset_counters() (enqueued, claimed, completed, failed attempts, ...); empty unless durable is preloaded; queue "" counts the queues past durable.counters_queues';
REVOKE ALL ON durable.queue_counters FROM PUBLIC;
GRANT SELECT ON durable.queue_counters TO durable_operator, pg_monitor;
