CREATE OR REPLACE VIEW durable.review_queue AS
SELECT t.task_id, t.queue_name, t.class, t.attempt, t.owner AS last_owner,
       s.step, s.class AS step_class, s.state AS step_state, s.idempotency_key, s.receipt,
       e.at AS since, e.kind AS reason, e.detail->>'action' AS decided
FROM durable.unfinished_tasks t
LEFT JOIN durable.live_steps s ON s.partition_key = t.partition_key AND s.task_id = t.task_id
                              AND s.state IN ('started', 'unknown')
LEFT JOIN LATERAL (SELECT * FROM durable.events e
                   WHERE e.partition_key = t.partition_key AND e.task_id = t.task_id
                     AND e.state = 'needs_review'
                   ORDER BY e.seq DESC LIMIT 1) e ON true
WHERE t.state = 'needs_review';
COMMENT ON VIEW durable.review_queue IS 'tasks waiting for a person, one row per step in doubt, and why they are here; settle them with durable_resolve()';
REVOKE ALL ON durable.review_queue FROM PUBLIC;
GRANT SELECT ON durable.review_queue TO durable_operator, durable_queue_operator;
