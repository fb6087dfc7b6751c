/* durable--0.3.0--0.4.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.4.0'" to load this file. \quit

--
-- Scaling out on Citus (DESIGN section 11).
--
-- durable_enable_citus() distributes durable's tables once, on the
-- coordinator, after CREATE EXTENSION citus and CREATE EXTENSION durable:
-- everything that belongs to a task by partition_key, colocated, so that a
-- task's rows, its steps, events, keys, waits, inbox and outbox rows share
-- one shard; the settings every node reads (queues, grants, schedules,
-- the installation id, the history horizon) as reference tables.  The
-- install script never does it (section 11.7): the same extension runs on
-- a single server unchanged.
--
-- There is no function for the way back.  Citus's undistribute_table
-- would pull every shard onto the coordinator table by table while
-- workers still write; the way back is a dump of the coordinator restored
-- into a plain server (see the README).
--
CREATE FUNCTION @extschema@.durable_enable_citus(shard_count int DEFAULT 32)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel text;
    is_coordinator bool;
BEGIN
    IF shard_count IS NULL OR shard_count < 1 OR shard_count > 1024 THEN
        RAISE EXCEPTION 'shard_count must be between 1 and 1024'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'extension "citus" is not installed in this database'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Run CREATE EXTENSION citus on every node, add the workers, then call durable_enable_citus() on the coordinator.';
    END IF;
    EXECUTE 'SELECT pg_catalog.citus_is_coordinator()' INTO is_coordinator;
    IF NOT is_coordinator THEN
        RAISE EXCEPTION 'durable_enable_citus() must run on the Citus coordinator'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
               WHERE logicalrelid = 'durable.live_tasks'::pg_catalog.regclass) THEN
        RAISE EXCEPTION 'durable is already distributed by Citus'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;

    -- Each worker ran CREATE EXTENSION durable itself (Citus propagates
    -- it), and its reconciler may have made days of history there before
    -- the node joined: those local tables would clash with the
    -- coordinator's partitions that distribution creates on it.  A
    -- worker's own foreign key from queue_grants to queues would clash
    -- with the one the reference tables get.
    PERFORM pg_catalog.run_command_on_workers($cmd$
        DO $do$
        DECLARE r record;
        BEGIN
            FOR r IN SELECT c.oid::pg_catalog.regclass AS rel
                     FROM pg_catalog.pg_inherits i
                     JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
                     WHERE i.inhparent IN ('durable.task_history'::pg_catalog.regclass,
                                           'durable.step_history'::pg_catalog.regclass,
                                           'durable.event_log'::pg_catalog.regclass)
                       AND pg_catalog.pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
            LOOP
                EXECUTE pg_catalog.format('DROP TABLE %s', r.rel);
            END LOOP;
            ALTER TABLE durable.queue_grants DROP CONSTRAINT IF EXISTS queue_grants_queue_name_fkey;
        END
        $do$
    $cmd$);

    ALTER TABLE durable.queue_grants DROP CONSTRAINT queue_grants_queue_name_fkey;
    FOREACH rel IN ARRAY ARRAY['durable.queues', 'durable.queue_grants', 'durable.schedules',
                               'durable.installation', 'durable.history_horizon'] LOOP
        EXECUTE 'SELECT pg_catalog.create_reference_table($1)' USING rel;
    END LOOP;
    ALTER TABLE durable.queue_grants ADD CONSTRAINT queue_grants_queue_name_fkey
        FOREIGN KEY (queue_name) REFERENCES durable.queues ON DELETE CASCADE;

    EXECUTE 'SELECT pg_catalog.create_distributed_table($1, ''partition_key'', shard_count => $2)'
        USING 'durable.live_tasks', shard_count;
    FOREACH rel IN ARRAY ARRAY['durable.live_steps', 'durable.task_keys', 'durable.task_history',
                               'durable.step_history', 'durable.event_log', 'durable.inbox',
                               'durable.outbox', 'durable.idempotency_keys',
                               'durable.emitted_events', 'durable.event_waits'] LOOP
        EXECUTE 'SELECT pg_catalog.create_distributed_table($1, ''partition_key'', colocate_with => ''durable.live_tasks'')'
            USING rel;
    END LOOP;
    -- Enqueues lock their queue's row through this key, on the node of the
    -- task's shard only (DurableQueueGetShared locks it everywhere else).
    ALTER TABLE durable.live_tasks ADD CONSTRAINT live_tasks_queue_name_fkey
        FOREIGN KEY (queue_name) REFERENCES durable.queues (queue_name);
END
$$;
COMMENT ON FUNCTION @extschema@.durable_enable_citus(int) IS 'distribute durable''s tables by partition_key on a Citus cluster (once, on the coordinator)';
REVOKE ALL ON FUNCTION @extschema@.durable_enable_citus(int) FROM PUBLIC;

--
-- durable_verify() gathers what it checks across partitions (awaits and
-- their registrations, children and their parents) before it joins them:
-- on Citus a join must be on partition_key or on collected rows.
--
CREATE OR REPLACE FUNCTION @extschema@.durable_verify()
RETURNS TABLE (task_id bigint, problem text)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
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
        SELECT t.task_id, w.key AS name, w.value -> 'args' ->> 'event' AS event
        FROM durable.live_tasks t, LATERAL jsonb_each(t.waits) w
        WHERE t.state = 'waiting' AND w.value ->> 'kind' = 'event' AND w.value ->> 'status' = 'waiting'
    ), registered AS MATERIALIZED (
        SELECT ew.task_id, ew.name, ew.event FROM durable.event_waits ew
    ), emitted AS MATERIALIZED (
        SELECT ee.event FROM durable.emitted_events ee WHERE ee.emitted_at IS NOT NULL
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
    SELECT a.task_id, format('awaits event %s but no emit of it would wake the task', a.event)
    FROM awaited a
    WHERE NOT EXISTS (SELECT FROM registered r WHERE r.task_id = a.task_id AND r.name = a.name)
      AND NOT EXISTS (SELECT FROM emitted ee WHERE ee.event = a.event)
    UNION ALL
    SELECT t.task_id, 'waits with nothing to wake it: no timer, no wait, no step in doubt'
    FROM durable.live_tasks t
    WHERE t.state = 'waiting' AND t.run_at = 'infinity' AND t.steps_in_doubt = 0
      AND NOT EXISTS (SELECT FROM jsonb_each(coalesce(t.waits, '{}')) w
                      WHERE w.value ->> 'status' = 'waiting')
    UNION ALL
    SELECT r.task_id, format('an await of event %s is registered for a task that is not live', r.event)
    FROM registered r
    WHERE NOT EXISTS (SELECT FROM live l WHERE l.task_id = r.task_id)
    UNION ALL
    SELECT c.task_id, format('child of task %s, which does not list it', c.parent_id)
    FROM children c JOIN parents p ON p.task_id = c.parent_id
    WHERE NOT EXISTS (SELECT FROM jsonb_each(coalesce(p.waits, '{}')) w
                      WHERE w.value ->> 'kind' = 'spawn' AND (w.value ->> 'task_id')::bigint = c.task_id)
    ORDER BY 1, 2
$$;
--
-- queue_stats counts each half of the tasks per queue first and then
-- joins the queues: on Citus each shard counts its own rows, and the
-- coordinator adds up one row per queue and shard.
--
CREATE OR REPLACE VIEW durable.queue_stats AS
SELECT q.queue_name, q.paused,
       coalesce(l.ready, 0) AS ready, coalesce(l.waiting, 0) AS waiting,
       coalesce(l.running, 0) AS running, coalesce(l.needs_review, 0) AS needs_review,
       coalesce(h.completed, 0) AS completed, coalesce(h.failed, 0) AS failed,
       coalesce(h.cancelled, 0) AS cancelled,
       l.oldest_due_age, l.oldest_heartbeat_age,
       coalesce(l.expired_leases, 0) AS expired_leases, coalesce(l.stuck, 0) AS stuck
FROM durable.queues q
LEFT JOIN (
    SELECT t.queue_name,
           count(*) FILTER (WHERE t.state = 'ready') AS ready,
           count(*) FILTER (WHERE t.state = 'waiting') AS waiting,
           count(*) FILTER (WHERE t.state = 'running') AS running,
           count(*) FILTER (WHERE t.state = 'needs_review') AS needs_review,
           now() - min(t.run_at) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now()) AS oldest_due_age,
           now() - min(t.heartbeat_at) FILTER (WHERE t.state = 'running') AS oldest_heartbeat_age,
           count(*) FILTER (WHERE t.state = 'running' AND t.lease_until < now()) AS expired_leases,
           count(*) FILTER (WHERE t.state = 'running' AND p.progress_timeout IS NOT NULL
                              AND t.progress_at < now() - p.progress_timeout) AS stuck
    FROM durable.live_tasks t JOIN durable.queues p ON p.queue_name = t.queue_name
    GROUP BY t.queue_name) l ON l.queue_name = q.queue_name
LEFT JOIN (
    SELECT t.queue_name,
           count(*) FILTER (WHERE t.state = 'completed') AS completed,
           count(*) FILTER (WHERE t.state = 'failed') AS failed,
           count(*) FILTER (WHERE t.state = 'cancelled') AS cancelled
    FROM durable.task_history t
    GROUP BY t.queue_name) h ON h.queue_name = q.queue_name;
