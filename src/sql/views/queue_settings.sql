-- a queue's settings, with the partition_key values of its partitions, for
-- the queues the reader may see (unfinished_tasks.sql)
CREATE OR REPLACE VIEW durable.queue_settings WITH (security_barrier) AS
SELECT q.queue_name, q.partitions,
       ARRAY(SELECT (q.partition_base + i) % 32768
             FROM generate_series(0, q.partitions - 1) i ORDER BY 1) AS partition_keys,
       q.lease, q.max_attempts, q.deadline, q.progress_timeout, q.paused,
       q.paused_partitions, q.restricted, q.concurrency_limit, q.version_timeout, q.fair,
       q.created_at
FROM durable.queues q
WHERE durable.queue_in_scope(q.queue_name);
COMMENT ON VIEW durable.queue_settings IS 'the settings of each queue the reader may see, and the partition_key values of its partitions';
REVOKE ALL ON durable.queue_settings FROM PUBLIC;
GRANT SELECT ON durable.queue_settings TO durable_operator, durable_queue_operator;
