CREATE OR REPLACE VIEW durable.tasks WITH (security_barrier) AS
SELECT * FROM durable.unfinished_tasks
UNION ALL
SELECT * FROM durable.finished_tasks;
COMMENT ON VIEW durable.tasks IS 'every task retained of the queues the reader may see: the unfinished ones (durable.unfinished_tasks) and the finished ones (durable.finished_tasks)';
REVOKE ALL ON durable.tasks FROM PUBLIC;
GRANT SELECT ON durable.tasks TO durable_operator, durable_queue_operator;
