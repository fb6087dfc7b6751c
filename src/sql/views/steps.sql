-- a step is in a queue operator's scope when its task is (unfinished_tasks.sql)
CREATE OR REPLACE VIEW durable.steps WITH (security_barrier) AS
SELECT s.*
FROM (SELECT * FROM durable.live_steps
      UNION ALL
      SELECT partition_key, task_id, step, state, class, version, attempt, ordinal, created_at,
             updated_at, idempotency_key, request_hash, compensates, receipt, effect_id,
             error_class, request, result, evidence, error
      FROM durable.step_history) s
WHERE durable.task_in_scope(s.task_id);
COMMENT ON VIEW durable.steps IS 'every step retained of the tasks the reader may see: those of unfinished tasks (durable.live_steps) and those of finished ones (durable.step_history)';
REVOKE ALL ON durable.steps FROM PUBLIC;
GRANT SELECT ON durable.steps TO durable_operator, durable_queue_operator;
