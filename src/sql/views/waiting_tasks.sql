-- what a task waits for shows the event's queue
CREATE OR REPLACE VIEW durable.waiting_tasks AS
SELECT t.task_id, t.queue_name, w.key AS wait_name, w.value ->> 'kind' AS kind,
       (w.value ->> 'at')::timestamptz AS since,
       (w.value ->> 'until')::timestamptz AS until,
       w.value -> 'args' ->> 'event' AS event,
       t.run_at,
       CASE WHEN w.value ->> 'kind' = 'event'
            THEN coalesce(w.value -> 'args' ->> 'queue', t.queue_name) END AS event_queue
FROM durable.unfinished_tasks t, LATERAL jsonb_each(t.waits) w
WHERE t.state = 'waiting' AND t.waits IS NOT NULL
  AND w.value ->> 'status' IN ('sleeping', 'waiting');
COMMENT ON VIEW durable.waiting_tasks IS 'every task parked on a wait (a sleep, an event, its children), what it waits for (an event with its queue), since when and until when';
REVOKE ALL ON durable.waiting_tasks FROM PUBLIC;
GRANT SELECT ON durable.waiting_tasks TO durable_operator, durable_queue_operator;
