-- durable_verify() matches an await with its event in the event's queue
CREATE OR REPLACE FUNCTION @extschema@.durable_verify()
RETURNS TABLE (task_id bigint, problem text)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
-- the settings its text forms follow are pinned (docs/design.md section 7;
-- test/t/015_hostile_settings.pl checks every function in SQL or PL/pgSQL)
SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
SET TimeZone = 'UTC' SET extra_float_digits = 1
AS $$
    WITH history AS (
        SELECT e.partition_key, e.task_id, count(*) AS events, max(e.seq) AS last_seq,
               max(e.at) AS last_at,
               (array_agg(e.state ORDER BY e.seq DESC))[1] AS state,
               (array_agg(e.fence ORDER BY e.seq DESC))[1] AS fence
        FROM durable.events e GROUP BY e.partition_key, e.task_id
    ), step_history AS (
        SELECT e.partition_key, e.task_id, e.step,
               (array_agg(coalesce(e.detail->>'to', 'planned') ORDER BY e.seq DESC))[1] AS state
        FROM durable.events e WHERE e.step IS NOT NULL
        GROUP BY e.partition_key, e.task_id, e.step
    ),
    -- What is checked across partitions is gathered first: on Citus a
    -- join that is not on partition_key runs on what these collect.
    awaited AS MATERIALIZED (
        SELECT t.task_id, w.key AS name, w.value -> 'args' ->> 'event' AS event,
               coalesce(w.value -> 'args' ->> 'queue', t.queue_name) AS queue_name
        FROM durable.live_tasks t, LATERAL jsonb_each(t.waits) w
        WHERE t.state = 'waiting' AND w.value ->> 'kind' = 'event' AND w.value ->> 'status' = 'waiting'
    ), registered AS MATERIALIZED (
        SELECT ew.task_id, ew.name, ew.queue_name, ew.event FROM durable.event_waits ew
    ), emitted AS MATERIALIZED (
        SELECT ee.queue_name, ee.event FROM durable.emitted_events ee WHERE ee.emitted_at IS NOT NULL
    ), live AS MATERIALIZED (
        SELECT l.task_id FROM durable.live_tasks l
        WHERE l.task_id IN (SELECT r.task_id FROM registered r)
    ), children AS MATERIALIZED (
        SELECT c.task_id, c.parent_id FROM durable.tasks c WHERE c.parent_id IS NOT NULL
    ), parents AS MATERIALIZED (
        SELECT p.task_id, p.waits FROM durable.tasks p
        WHERE p.task_id IN (SELECT c.parent_id FROM children c)
    )
    SELECT t.task_id, format('row says %s with fence %s, events say %s with fence %s',
                             t.state, t.fence, coalesce(h.state::text, 'nothing'), h.fence)
    FROM durable.tasks t LEFT JOIN history h USING (partition_key, task_id)
    WHERE h.state IS DISTINCT FROM t.state OR h.fence IS DISTINCT FROM t.fence
    UNION ALL
    SELECT t.task_id, format('version %s, but %s events up to seq %s', t.version, h.events, h.last_seq)
    FROM durable.tasks t JOIN history h USING (partition_key, task_id)
    WHERE h.events <> t.version OR h.last_seq <> t.version
    UNION ALL
    SELECT s.task_id, format('step %s is %s, its events say %s', s.step, s.state, coalesce(sh.state, 'nothing'))
    FROM durable.steps s LEFT JOIN step_history sh USING (partition_key, task_id, step)
    WHERE sh.state IS DISTINCT FROM s.state::text
    UNION ALL
    SELECT t.task_id, format('%s steps in doubt counted, %s found', t.steps_in_doubt, count(s.step))
    FROM durable.tasks t
    LEFT JOIN durable.steps s ON s.partition_key = t.partition_key AND s.task_id = t.task_id
                             AND s.state IN ('started', 'unknown')
    GROUP BY t.partition_key, t.task_id, t.steps_in_doubt
    HAVING count(s.step) <> t.steps_in_doubt
    UNION ALL
    SELECT l.task_id, format('task is %s but kept among the live tasks', l.state)
    FROM durable.live_tasks l WHERE l.state IN ('completed', 'failed', 'cancelled')
    UNION ALL
    SELECT a.task_id, format('task is %s but kept in history', a.state)
    FROM durable.task_history a WHERE a.state NOT IN ('completed', 'failed', 'cancelled')
    UNION ALL
    SELECT h.task_id, 'events of a task that does not exist'
    FROM history h LEFT JOIN durable.tasks t USING (partition_key, task_id)
    WHERE t.task_id IS NULL
      AND h.last_at >= coalesce((SELECT removed_before FROM durable.history_horizon), '-infinity')
    UNION ALL
    -- a wait that nothing would end
    SELECT a.task_id, format('awaits event %s of queue %s but no emit of it would wake the task',
                             a.event, a.queue_name)
    FROM awaited a
    WHERE NOT EXISTS (SELECT FROM registered r
                      WHERE r.task_id = a.task_id AND r.name = a.name
                        AND r.queue_name = a.queue_name AND r.event = a.event)
      AND NOT EXISTS (SELECT FROM emitted ee
                      WHERE ee.queue_name = a.queue_name AND ee.event = a.event)
    UNION ALL
    SELECT t.task_id, 'waits with nothing to wake it: no timer, no wait, no step in doubt'
    FROM durable.live_tasks t
    WHERE t.state = 'waiting' AND t.run_at = 'infinity' AND t.steps_in_doubt = 0
      AND NOT EXISTS (SELECT FROM jsonb_each(coalesce(t.waits, '{}')) w
                      WHERE w.value ->> 'status' = 'waiting')
    UNION ALL
    SELECT r.task_id, format('an await of event %s of queue %s is registered for a task that is not live',
                             r.event, r.queue_name)
    FROM registered r
    WHERE NOT EXISTS (SELECT FROM live l WHERE l.task_id = r.task_id)
    UNION ALL
    SELECT c.task_id, format('child of task %s, which does not list it', c.parent_id)
    FROM children c JOIN parents p ON p.task_id = c.parent_id
    WHERE NOT EXISTS (SELECT FROM jsonb_each(coalesce(p.waits, '{}')) w
                      WHERE w.value ->> 'kind' = 'spawn' AND (w.value ->> 'task_id')::bigint = c.task_id)
    ORDER BY 1, 2
$$;
COMMENT ON FUNCTION @extschema@.durable_verify() IS
  'rebuild every task''s state, fence and version, and every step''s state, from the event log, and report each row that disagrees';
REVOKE ALL ON FUNCTION @extschema@.durable_verify() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_verify() TO durable_operator;
