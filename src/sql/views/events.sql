-- an event is in a queue operator's scope when its task is (unfinished_tasks.sql)
CREATE OR REPLACE VIEW durable.events WITH (security_barrier) AS
SELECT e.*
FROM (
    SELECT partition_key, task_id, seq, state, fence, at, kind, actor, detail, step, role
    FROM durable.event_log
    UNION ALL
    -- the claims of the leases those events ended
    SELECT partition_key, task_id, lease_seq, 'running', lease_fence, lease_at, lease_kind,
           lease_actor, NULL, NULL, lease_role
    FROM durable.event_log WHERE lease_seq IS NOT NULL
    UNION ALL
    -- the claims of the leases running now
    SELECT partition_key, task_id, claim_seq, 'running', fence, claimed_at, claim_kind,
           owner, NULL, NULL, claim_role
    FROM durable.live_tasks WHERE state = 'running' AND claim_seq IS NOT NULL
    UNION ALL
    -- the events that finished tasks, and the claims of the leases they ended
    SELECT partition_key, task_id, version, state, fence, finished_at, final_kind,
           final_actor, final_detail, NULL, final_role
    FROM durable.task_history WHERE final_kind IS NOT NULL
    UNION ALL
    SELECT partition_key, task_id, claim_seq, 'running', claim_fence, claimed_at, claim_kind,
           owner, NULL, NULL, claim_role
    FROM durable.task_history WHERE claim_seq IS NOT NULL) e
WHERE durable.task_in_scope(e.task_id);
COMMENT ON VIEW durable.events IS 'the history of every task retained that the reader may see: one row per change, with the state and fence it left; seq is the task''s version after the change';
REVOKE ALL ON durable.events FROM PUBLIC;
GRANT SELECT ON durable.events TO durable_operator, durable_queue_operator;
