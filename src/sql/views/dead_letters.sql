-- the dead letters of every queue the reader may see (finished_tasks.sql): failed tasks, why, and whether a replay
-- would take them (a task with a failed step is final)
CREATE OR REPLACE VIEW durable.dead_letters AS
SELECT t.task_id, t.queue_name, t.partition_key, t.stop_code,
       CASE WHEN t.stop_code = 'quarantined' THEN t.last_error ->> 'reason' ELSE t.stop_code END AS reason,
       t.finished_at AS failed_at, t.attempt, t.last_error, t.versions,
       t.steps_in_doubt = 0
       AND NOT EXISTS (SELECT FROM durable.step_history s
                       WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
                         AND s.state = 'failed') AS replayable
FROM durable.finished_tasks t
WHERE t.state = 'failed';
COMMENT ON VIEW durable.dead_letters IS 'failed tasks: why (a stop code, or the reason a quarantine gave), when, and whether durable_replay_dead_letters() would take them';
REVOKE ALL ON durable.dead_letters FROM PUBLIC;
GRANT SELECT ON durable.dead_letters TO durable_operator, durable_queue_operator;
