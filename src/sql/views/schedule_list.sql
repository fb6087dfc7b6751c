CREATE OR REPLACE VIEW durable.schedule_list AS
SELECT schedule_name, cron, timezone, queue_name, payload, backfill, next_run, last_run,
       last_task_id, created_at, last_error, last_error_at, paused_at
FROM durable.schedules;
COMMENT ON VIEW durable.schedule_list IS 'every schedule with its next run, its last occurrence enqueued, why the last one tried was skipped (last_error, since last_error_at), and since when it is paused';
REVOKE ALL ON durable.schedule_list FROM PUBLIC;
GRANT SELECT ON durable.schedule_list TO durable_operator;
