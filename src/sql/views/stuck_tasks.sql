-- A view has no SET clause: the two that count stuck tasks subtract the
-- queue's progress_timeout on the UTC calendar, as the reconciler's stuck
-- alarm does, not in the reader's TimeZone (a timeout of days would move
-- by an hour across a change to summer time).
CREATE OR REPLACE VIEW durable.stuck_tasks AS
SELECT t.task_id, t.queue_name, t.owner, t.progress, t.progress_at,
       now() - t.progress_at AS without_progress_for, q.progress_timeout,
       t.stuck_alarm_at IS NOT NULL AND t.stuck_alarm_at >= t.progress_at AS alarmed
FROM durable.unfinished_tasks t JOIN durable.queues q ON q.queue_name = t.queue_name
WHERE t.state = 'running' AND q.progress_timeout IS NOT NULL
  AND t.progress_at < pg_catalog.timezone('UTC', pg_catalog.timezone('UTC', now()) - q.progress_timeout);
COMMENT ON VIEW durable.stuck_tasks IS 'running tasks whose lease is renewed while their progress has not moved for longer than the queue''s progress_timeout';
REVOKE ALL ON durable.stuck_tasks FROM PUBLIC;
GRANT SELECT ON durable.stuck_tasks TO durable_operator, durable_queue_operator;
