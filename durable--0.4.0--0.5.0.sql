/* durable--0.4.0--0.5.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.5.0'" to load this file. \quit

--
-- Nothing stops the reconciler, and no application reaches another's work
-- (DESIGN sections 7, 9 and 12).
--

--
-- 1. Tick isolation: each part of a tick in its own subtransaction, its
--    failures kept (and shown) until it recovers.
--

-- What the reconciler could not do in its last ticks: one row per part of
-- a tick (a partition's expired leases, a day of history, retention of a
-- table, a schedule, a queue's retry tokens) from the tick in which it
-- first failed to the one in which it next succeeds.  Each node of a Citus
-- cluster keeps its own (the table is not distributed), and a restore
-- starts without any (not dumped).
CREATE TABLE durable.tick_failures (
    part           text COLLATE "C" PRIMARY KEY,
    sqlstate       text NOT NULL,
    error          text NOT NULL,
    failing_since  timestamptz NOT NULL,
    last_failed_at timestamptz NOT NULL,
    failures       bigint NOT NULL
);
COMMENT ON TABLE durable.tick_failures IS 'the parts of the reconciler''s tick that fail, with their last error and since when; a part that succeeds again leaves';
REVOKE ALL ON durable.tick_failures FROM PUBLIC;
GRANT SELECT ON durable.tick_failures TO durable_operator;

-- pg_monitor sees how many parts fail and since when, not their errors
CREATE OR REPLACE VIEW durable.status AS
SELECT l.preloaded,
       CASE WHEN NOT l.preloaded THEN 'not preloaded'
            WHEN l.reconciler_database IS DISTINCT FROM current_database()::text THEN 'in another database'
            WHEN NOT l.reconciler_enabled THEN 'disabled'
            WHEN p.pid IS NULL THEN 'not running'
            ELSE 'running' END AS reconciler,
       p.pid AS reconciler_pid,
       l.reconciler_database,
       l.node_id,
       f.failing_parts,
       f.failing_since,
       f.failures
FROM durable.library_status() l,
     LATERAL (SELECT durable.reconciler_pid() AS pid) p,
     LATERAL (SELECT pg_catalog.count(*)::int AS failing_parts,
                     pg_catalog.min(t.failing_since) AS failing_since,
                     COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                         'part', t.part, 'sqlstate', t.sqlstate, 'error', t.error,
                         'failing_since', t.failing_since, 'last_failed_at', t.last_failed_at,
                         'failures', t.failures) ORDER BY t.failing_since, t.part),
                         '[]') AS failures
              FROM durable.tick_failures t) f;
COMMENT ON VIEW durable.status IS 'whether durable is preloaded, whether a reconciler works in this database (running, not running, disabled, in another database, not preloaded), the database it works in, the node number in task ids, and the parts of its tick that fail: how many, since when, and (failures, for durable_operator) each with its error';
REVOKE SELECT ON durable.status FROM pg_monitor;
GRANT SELECT (preloaded, reconciler, reconciler_pid, reconciler_database, node_id,
              failing_parts, failing_since)
    ON durable.status TO pg_monitor;

-- A schedule whose occurrence cannot be enqueued is skipped, with why.
ALTER TABLE durable.schedules
    ADD COLUMN last_error text,
    ADD COLUMN last_error_at timestamptz;
COMMENT ON COLUMN durable.schedules.last_error IS 'why the last occurrence the reconciler tried could not be enqueued (it was skipped); NULL once one is enqueued again';
COMMENT ON COLUMN durable.schedules.last_error_at IS 'since when the schedule''s occurrences fail';
CREATE OR REPLACE VIEW durable.schedule_list AS
SELECT schedule_name, cron, timezone, queue_name, payload, backfill, next_run, last_run,
       last_task_id, created_at, last_error, last_error_at
FROM durable.schedules;
COMMENT ON VIEW durable.schedule_list IS 'every schedule with its next run, its last occurrence enqueued, and why the last one tried was skipped (last_error, since last_error_at)';

--
-- History, a part per day: each day made or dropped, the default
-- partitions' batch and the keys of tasks gone each in a subtransaction of
-- its own (an EXCEPTION block), so that one that fails is reported
-- ('failed', with the part, its error code and message) and the others go on.
-- A day's bounds come from its name (task_history_pYYYYMMDD is the day
-- from that midnight UTC), never from parsing pg_get_expr, whose text
-- follows DateStyle and TimeZone; partitions of other names are never
-- dropped.  The settings that a text form follows are pinned all the same
-- (the bounds given to ATTACH PARTITION are text).  'busy' says that
-- another maintainer holds history now.
--
DROP FUNCTION durable.maintain_history(timestamptz, interval, int);
CREATE FUNCTION durable.maintain_history(now timestamptz, retention interval, batch int)
RETURNS TABLE (task_id bigint, action text, part text, error_code text, error_message text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '100ms'
SET DateStyle = 'ISO, MDY'
SET IntervalStyle = 'postgres'
SET TimeZone = 'UTC'
SET extra_float_digits = 1
AS $$
DECLARE
    today timestamptz := pg_catalog.date_trunc('day', now, 'UTC');
    cutoff timestamptz := now OPERATOR(pg_catalog.-) retention;
    oldest_live timestamptz;
    day timestamptz;
    parent text;
    name text;
    old_day record;
    outside bool;
    held_checked timestamptz;
BEGIN
    -- One maintainer at a time: another one at work now (a second
    -- reconciler, durable_reconcile() from pg_cron) does this tick's work,
    -- and would otherwise make the same day or drop the same one.
    BEGIN
        LOCK TABLE durable.history_horizon IN EXCLUSIVE MODE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        action := 'busy';
        RETURN NEXT;
        RETURN;
    END;
    task_id := NULL;
    FOR i IN 0..2 LOOP
        day := today OPERATOR(pg_catalog.+) pg_catalog.make_interval(days => i);
        FOREACH parent IN ARRAY ARRAY['task_history', 'step_history', 'event_log'] LOOP
            name := pg_catalog.format('%s_p%s', parent,
                                      pg_catalog.to_char(day AT TIME ZONE 'UTC', 'YYYYMMDD'));
            CONTINUE WHEN pg_catalog.to_regclass('durable.' OPERATOR(pg_catalog.||) name) IS NOT NULL;
            -- A day with rows in the default partition stays there.  Else
            -- the day is made apart and attached: ATTACH PARTITION takes a
            -- lock on the parent that lets commits go on (CREATE TABLE ...
            -- PARTITION OF would stop them), and one on the default
            -- partition, which is not waited for.  Today also needs the
            -- parent to itself: a transaction under way may have routed a
            -- row of today to the default partition, and would fail on
            -- its new constraint.  A day ahead has no rows yet.
            BEGIN
                EXECUTE pg_catalog.format(
                    'SELECT EXISTS (SELECT FROM durable.%I WHERE %I >= $1 AND %I < $2)',
                    parent OPERATOR(pg_catalog.||) '_default',
                    CASE WHEN parent OPERATOR(pg_catalog.=) 'event_log' THEN 'at' ELSE 'finished_at' END,
                    CASE WHEN parent OPERATOR(pg_catalog.=) 'event_log' THEN 'at' ELSE 'finished_at' END)
                INTO outside USING day, day OPERATOR(pg_catalog.+) '1 day'::pg_catalog.interval;
                CONTINUE WHEN outside;
                IF i OPERATOR(pg_catalog.=) 0 THEN
                    EXECUTE pg_catalog.format('LOCK TABLE ONLY durable.%I IN SHARE MODE NOWAIT', parent);
                END IF;
                EXECUTE pg_catalog.format('LOCK TABLE durable.%I IN ACCESS EXCLUSIVE MODE NOWAIT',
                                          parent OPERATOR(pg_catalog.||) '_default');
                EXECUTE pg_catalog.format(
                    'CREATE TABLE durable.%I (LIKE durable.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                    name, parent);
                PERFORM durable.index_history(parent, name);
                EXECUTE pg_catalog.format(
                    'ALTER TABLE durable.%I ATTACH PARTITION durable.%I FOR VALUES FROM (%L) TO (%L)',
                    parent, name, day, day OPERATOR(pg_catalog.+) '1 day'::pg_catalog.interval);
            EXCEPTION
                -- rows of the day are in the default partition already, or
                -- the lock was not to be had now
                WHEN check_violation OR lock_not_available THEN NULL;
                WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS error_code = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT;
                    action := 'failed';
                    part := 'history: make ' OPERATOR(pg_catalog.||) name;
                    RETURN NEXT;
            END;
        END LOOP;
    END LOOP;

    IF retention IS NULL THEN
        RETURN;
    END IF;
    -- whole days, oldest first, by their names
    FOR old_day IN
        SELECT c.relname AS rel, p.relname AS parent,
               pg_catalog.make_timestamptz(
                   pg_catalog.substring(c.relname, '_p([0-9]{4})[0-9]{4}$')::int,
                   pg_catalog.substring(c.relname, '_p[0-9]{4}([0-9]{2})[0-9]{2}$')::int,
                   pg_catalog.substring(c.relname, '_p[0-9]{6}([0-9]{2})$')::int,
                   0, 0, 0, 'UTC') OPERATOR(pg_catalog.+) '1 day'::pg_catalog.interval AS upper_bound
        FROM pg_catalog.pg_inherits i
        JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
        JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) i.inhparent
        WHERE i.inhparent IN ('durable.task_history'::pg_catalog.regclass,
                              'durable.step_history'::pg_catalog.regclass,
                              'durable.event_log'::pg_catalog.regclass)
          AND c.relname OPERATOR(pg_catalog.~) '^(task_history|step_history|event_log)_p[0-9]{8}$'
          AND c.relname::text OPERATOR(pg_catalog.=) (p.relname::text OPERATOR(pg_catalog.||)
              pg_catalog.substring(c.relname, '_p[0-9]{8}$'))
        ORDER BY 3, 2 DESC
    LOOP
        CONTINUE WHEN old_day.upper_bound OPERATOR(pg_catalog.>) cutoff;
        BEGIN
            IF old_day.parent OPERATOR(pg_catalog.=) 'event_log' THEN
                -- A day of events held by a task still kept is looked at
                -- again ten minutes later, not at every tick: the oldest
                -- live task is found by reading all of them.
                IF held_checked IS NULL THEN
                    SELECT coalesce(h.events_checked_at, '-infinity') INTO held_checked
                    FROM (SELECT) x LEFT JOIN durable.history_horizon h ON true;
                END IF;
                CONTINUE WHEN held_checked OPERATOR(pg_catalog.>) (now OPERATOR(pg_catalog.-) '10 minutes'::pg_catalog.interval)
                          AND held_checked OPERATOR(pg_catalog.<=) now;
                IF oldest_live IS NULL THEN
                    SELECT coalesce(min(t.created_at), 'infinity') INTO oldest_live
                    FROM durable.live_tasks t;
                END IF;
                IF old_day.upper_bound OPERATOR(pg_catalog.>) oldest_live
                   OR EXISTS (SELECT FROM durable.task_history h
                              WHERE h.created_at OPERATOR(pg_catalog.<) old_day.upper_bound) THEN
                    INSERT INTO durable.history_horizon AS h (events_checked_at) VALUES (now)
                    ON CONFLICT (one) DO UPDATE SET events_checked_at = excluded.events_checked_at;
                    held_checked := now;
                    CONTINUE;
                END IF;
            END IF;
            EXECUTE pg_catalog.format('DROP TABLE durable.%I', old_day.rel);
            IF old_day.parent OPERATOR(pg_catalog.=) 'task_history' THEN
                INSERT INTO durable.history_horizon AS h (removed_before) VALUES (old_day.upper_bound)
                ON CONFLICT (one) DO UPDATE
                SET removed_before = GREATEST(h.removed_before, excluded.removed_before);
                action := pg_catalog.format('removed durable.%s', old_day.rel);
                part := NULL; error_code := NULL; error_message := NULL;
                RETURN NEXT;
            END IF;
        EXCEPTION
            WHEN lock_not_available THEN NULL;
            WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS error_code = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT;
                action := 'failed';
                part := 'history: drop durable.' OPERATOR(pg_catalog.||) old_day.rel;
                RETURN NEXT;
        END;
    END LOOP;
    part := NULL; error_code := NULL; error_message := NULL;

    -- tasks of the default partitions, a batch at a time
    BEGIN
        FOR task_id IN
            WITH doomed AS (
                SELECT h.partition_key, h.task_id FROM durable.task_history_default h
                WHERE h.finished_at OPERATOR(pg_catalog.<) cutoff
                ORDER BY h.finished_at LIMIT batch FOR UPDATE SKIP LOCKED),
            s AS (DELETE FROM durable.step_history_default s USING doomed d
                  WHERE s.partition_key OPERATOR(pg_catalog.=) d.partition_key
                    AND s.task_id OPERATOR(pg_catalog.=) d.task_id),
            e AS (DELETE FROM durable.event_log e USING doomed d
                  WHERE e.partition_key OPERATOR(pg_catalog.=) d.partition_key
                    AND e.task_id OPERATOR(pg_catalog.=) d.task_id)
            DELETE FROM durable.task_history_default h USING doomed d
            WHERE h.partition_key OPERATOR(pg_catalog.=) d.partition_key
              AND h.task_id OPERATOR(pg_catalog.=) d.task_id
            RETURNING h.task_id
        LOOP
            action := 'removed';
            RETURN NEXT;
        END LOOP;
        IF FOUND THEN
            INSERT INTO durable.history_horizon AS h (removed_before) VALUES (cutoff)
            ON CONFLICT (one) DO UPDATE
            SET removed_before = GREATEST(h.removed_before, excluded.removed_before);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS error_code = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT;
        task_id := NULL;
        action := 'failed';
        part := 'history: default partitions';
        RETURN NEXT;
        part := NULL; error_code := NULL; error_message := NULL;
    END;

    -- keys of tasks that are gone
    BEGIN
        DELETE FROM durable.task_keys k
        WHERE k.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
            SELECT x.ctid FROM durable.task_keys x
            WHERE x.created_at OPERATOR(pg_catalog.<) cutoff
              AND NOT EXISTS (SELECT FROM durable.tasks t
                              WHERE t.partition_key OPERATOR(pg_catalog.=) x.partition_key
                                AND t.task_id OPERATOR(pg_catalog.=) x.task_id)
            LIMIT batch));
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS error_code = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT;
        task_id := NULL;
        action := 'failed';
        part := 'history: task keys';
        RETURN NEXT;
    END;
END
$$;
COMMENT ON FUNCTION durable.maintain_history(timestamptz, interval, int) IS
  'make the coming days of history and remove those older than retention, each day a part of its own: returns what was removed, ''failed'' rows for the parts that could not be done (part, error_code, error_message), or ''busy'' when another maintainer is at work';
REVOKE EXECUTE ON FUNCTION durable.maintain_history(timestamptz, interval, int) FROM PUBLIC;

--
-- 2. Pinned settings: nothing a session, a role or a database owner sets
--    changes what durable's SQL functions compute.
--
-- Every function written in SQL or PL/pgSQL runs with the settings whose
-- value changes a text form it reads or writes: to_jsonb of a time or an
-- interval (the recovery package), format() of one, a literal it parses.
-- The C functions read and write no such text (their statements build
-- times in jsonb in UTC), so the hot path takes no SET clause.  The pins
-- are set at the end of this script, for every such function at once:
-- CREATE OR REPLACE drops the settings of the function it replaces, and
-- the sections after this one replace some.

-- A view has no SET clause: the two that count stuck tasks subtract the
-- queue's progress_timeout on the UTC calendar, as the reconciler's stuck
-- alarm does, not in the reader's TimeZone (a timeout of days would move
-- by an hour across a change to summer time).
CREATE OR REPLACE VIEW durable.stuck_tasks AS
SELECT t.task_id, t.queue_name, t.owner, t.progress, t.progress_at,
       now() - t.progress_at AS without_progress_for, q.progress_timeout,
       t.stuck_alarm_at IS NOT NULL AND t.stuck_alarm_at >= t.progress_at AS alarmed
FROM durable.live_tasks t JOIN durable.queues q ON q.queue_name = t.queue_name
WHERE t.state = 'running' AND q.progress_timeout IS NOT NULL
  AND t.progress_at < pg_catalog.timezone('UTC', pg_catalog.timezone('UTC', now()) - q.progress_timeout);

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
                              AND t.progress_at < pg_catalog.timezone('UTC',
                                  pg_catalog.timezone('UTC', now()) - p.progress_timeout)) AS stuck
    FROM durable.live_tasks t JOIN durable.queues p ON p.queue_name = t.queue_name
    GROUP BY t.queue_name) l ON l.queue_name = q.queue_name
LEFT JOIN (
    SELECT t.queue_name,
           count(*) FILTER (WHERE t.state = 'completed') AS completed,
           count(*) FILTER (WHERE t.state = 'failed') AS failed,
           count(*) FILTER (WHERE t.state = 'cancelled') AS cancelled
    FROM durable.task_history t
    GROUP BY t.queue_name) h ON h.queue_name = q.queue_name;


--
-- 3. Events belong to a queue.
--
--
-- (queue, event) names an event now, so that one application's names never
-- meet another's (DESIGN sections 9 and 12): durable_emit(queue, event,
-- payload) needs the queue's enqueue grant where it is restricted, and
-- durable_await(..., queue => ...) the work grant of the queue it names.
-- An event's rows live in one of its queue's partitions, the one
-- DurableQueueKeyPartition (enqueue.c) gives its name: the first four bytes
-- of the SHA-256 of the name, modulo the queue's partitions, from the
-- queue's base.  On Citus the event tables so distribute by the queue's
-- partitioning as its tasks do; durable_enable_citus() distributes them by
-- partition_key as before and needs no change.
--
-- The rows of 0.4.0 move as follows (0.4.0 refused events on Citus, so
-- there these tables are empty and nothing moves):
-- * an await registered for an event not yet emitted belongs to the
--   awaiting task's queue (a registration of a task that is no longer live
--   is dropped: durable_verify() reported it, and no emit could wake it);
-- * an event already emitted is copied into each queue that its emitter
--   could emit it into now: every open queue, and every restricted queue
--   whose enqueue grant the emitter's role holds (directly, through a
--   role it is a member of, by a grant to public, or as a superuser).
--   Nothing an application could legitimately have emitted for its own
--   queue is lost to an await after the update; an event another
--   application's role forged before it does not enter a restricted queue
--   (that is what this section closes).  An event whose emitter's role no
--   longer exists is copied into the open queues only.
-- * an event's row that only an await made (emitted_at NULL) is made again
--   for each queue that awaits it; one that nobody awaits any more goes.
-- Waits kept in a task's row (live_tasks.waits, task_history) are left as
-- they are: an await recorded without a queue replays as an await of the
-- task's own queue (signal.c), as it was.
--
ALTER TABLE durable.event_waits ADD COLUMN queue_name text COLLATE "C";
ALTER TABLE durable.event_waits DROP CONSTRAINT event_waits_pkey;
INSERT INTO durable.event_waits (partition_key, queue_name, event, task_id, name)
SELECT DISTINCT
       (q.partition_base
        OPERATOR(pg_catalog.+) (((pg_catalog.get_byte(h.digest, 0)::bigint OPERATOR(pg_catalog.<<) 24)
             OPERATOR(pg_catalog.|) (pg_catalog.get_byte(h.digest, 1)::bigint OPERATOR(pg_catalog.<<) 16)
             OPERATOR(pg_catalog.|) (pg_catalog.get_byte(h.digest, 2)::bigint OPERATOR(pg_catalog.<<) 8)
             OPERATOR(pg_catalog.|) pg_catalog.get_byte(h.digest, 3)::bigint)
            OPERATOR(pg_catalog.%) q.partitions))
       OPERATOR(pg_catalog.%) 32768,
       q.queue_name, w.event, w.task_id, w.name
FROM durable.event_waits w
JOIN durable.live_tasks t
  ON t.partition_key OPERATOR(pg_catalog.=) (w.task_id OPERATOR(pg_catalog.&) 32767)::int
 AND t.task_id OPERATOR(pg_catalog.=) w.task_id
JOIN durable.queues q ON q.queue_name OPERATOR(pg_catalog.=) t.queue_name,
LATERAL (SELECT pg_catalog.sha256(pg_catalog.convert_to(w.event, pg_catalog.getdatabaseencoding()))
         AS digest) h
WHERE w.queue_name IS NULL;
DELETE FROM durable.event_waits WHERE queue_name IS NULL;
ALTER TABLE durable.event_waits ALTER COLUMN queue_name SET NOT NULL;
ALTER TABLE durable.event_waits ADD PRIMARY KEY (partition_key, queue_name, event, task_id, name);
COMMENT ON COLUMN durable.event_waits.queue_name IS 'the queue of the awaited event (the awaiting task''s own, or the queue its await named)';

ALTER TABLE durable.emitted_events ADD COLUMN queue_name text COLLATE "C";
ALTER TABLE durable.emitted_events DROP CONSTRAINT emitted_events_pkey;
INSERT INTO durable.emitted_events (partition_key, queue_name, event, payload, payload_hash,
                                    emitted_at, role, created_at)
SELECT (q.partition_base
        OPERATOR(pg_catalog.+) (((pg_catalog.get_byte(h.digest, 0)::bigint OPERATOR(pg_catalog.<<) 24)
             OPERATOR(pg_catalog.|) (pg_catalog.get_byte(h.digest, 1)::bigint OPERATOR(pg_catalog.<<) 16)
             OPERATOR(pg_catalog.|) (pg_catalog.get_byte(h.digest, 2)::bigint OPERATOR(pg_catalog.<<) 8)
             OPERATOR(pg_catalog.|) pg_catalog.get_byte(h.digest, 3)::bigint)
            OPERATOR(pg_catalog.%) q.partitions))
       OPERATOR(pg_catalog.%) 32768,
       q.queue_name, e.event, e.payload, e.payload_hash, e.emitted_at, e.role, e.created_at
FROM durable.emitted_events e
CROSS JOIN durable.queues q
LEFT JOIN pg_catalog.pg_roles r ON r.rolname OPERATOR(pg_catalog.=) e.role,
LATERAL (SELECT pg_catalog.sha256(pg_catalog.convert_to(e.event, pg_catalog.getdatabaseencoding()))
         AS digest) h
WHERE e.queue_name IS NULL AND e.emitted_at IS NOT NULL
  AND (NOT q.restricted
       OR r.rolsuper
       OR EXISTS (SELECT FROM durable.queue_grants g
                  WHERE g.queue_name OPERATOR(pg_catalog.=) q.queue_name
                    AND g.privilege OPERATOR(pg_catalog.=) 'enqueue'
                    AND (g.grantee OPERATOR(pg_catalog.=) 0
                         OR pg_catalog.pg_has_role(r.oid, g.grantee, 'USAGE'))));
INSERT INTO durable.emitted_events (partition_key, queue_name, event, created_at)
SELECT w.partition_key, w.queue_name, w.event,
       coalesce(pg_catalog.min(e.created_at), pg_catalog.now())
FROM durable.event_waits w
LEFT JOIN durable.emitted_events e
  ON e.queue_name IS NULL AND e.event OPERATOR(pg_catalog.=) w.event
WHERE NOT EXISTS (SELECT FROM durable.emitted_events c
                  WHERE c.queue_name OPERATOR(pg_catalog.=) w.queue_name
                    AND c.event OPERATOR(pg_catalog.=) w.event)
GROUP BY w.partition_key, w.queue_name, w.event;
DELETE FROM durable.emitted_events WHERE queue_name IS NULL;
ALTER TABLE durable.emitted_events ALTER COLUMN queue_name SET NOT NULL;
ALTER TABLE durable.emitted_events ADD PRIMARY KEY (partition_key, queue_name, event);
COMMENT ON COLUMN durable.emitted_events.queue_name IS 'the queue the event belongs to; partition_key is one of the queue''s partitions';
COMMENT ON TABLE durable.emitted_events IS 'events emitted into a queue with durable_emit (first emit wins), and those awaited before anybody emitted them (emitted_at NULL)';
COMMENT ON TABLE durable.event_waits IS 'the awaits registered for an event of a queue not yet emitted; its emit into that queue wakes them';

-- the 0.3.0 emit without a queue goes (the library refuses it until now)
DROP FUNCTION @extschema@.durable_emit(text, jsonb);
CREATE FUNCTION @extschema@.durable_emit(queue text, event text, payload jsonb DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'durable_emit'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_emit(text, text, jsonb) IS
  'emit an event of a queue in the caller''s transaction and wake its awaits: true the first time, false for the same payload again, 55U03 for another; needs the queue''s enqueue grant where it is restricted';

DROP FUNCTION @extschema@.durable_await(bigint, bigint, text, text, interval);
CREATE FUNCTION @extschema@.durable_await(task_id bigint, fence bigint, name text, event text,
                                          timeout interval DEFAULT NULL, queue text DEFAULT NULL)
RETURNS TABLE (status text, payload jsonb)
AS 'MODULE_PATHNAME', 'durable_await'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_await(bigint, bigint, text, text, interval, text) IS
  'a named wait for an event of the task''s queue (or of queue, with its work grant): (''received'', payload) once emitted, else (''waiting'', NULL) and the task waits; (''timed_out'', NULL) for ever after the timeout';

REVOKE EXECUTE ON FUNCTION
    @extschema@.durable_emit(text, text, jsonb),
    @extschema@.durable_await(bigint, bigint, text, text, interval, text)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_emit(text, text, jsonb)
TO durable_producer, durable_worker;
GRANT EXECUTE ON FUNCTION @extschema@.durable_await(bigint, bigint, text, text, interval, text)
TO durable_worker;

-- what a task waits for shows the event's queue
CREATE OR REPLACE VIEW durable.waiting_tasks AS
SELECT t.task_id, t.queue_name, w.key AS wait_name, w.value ->> 'kind' AS kind,
       (w.value ->> 'at')::timestamptz AS since,
       (w.value ->> 'until')::timestamptz AS until,
       w.value -> 'args' ->> 'event' AS event,
       t.run_at,
       CASE WHEN w.value ->> 'kind' = 'event'
            THEN coalesce(w.value -> 'args' ->> 'queue', t.queue_name) END AS event_queue
FROM durable.live_tasks t, LATERAL jsonb_each(t.waits) w
WHERE t.state = 'waiting' AND t.waits IS NOT NULL
  AND w.value ->> 'status' IN ('sleeping', 'waiting');
COMMENT ON VIEW durable.waiting_tasks IS 'every task parked on a wait (a sleep, an event, its children), what it waits for (an event with its queue), since when and until when';

-- the recovery package names the event's queue in the emit that wakes it
CREATE OR REPLACE FUNCTION @extschema@.durable_recovery_package(task_id bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t durable.tasks;
    doubt text;
    in_doubt bigint;
    package jsonb;
    recommended jsonb;
    pending record;
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION 'task_id must not be null' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO t FROM durable.tasks x
    WHERE x.partition_key = ($1 & 32767)::int AND x.task_id = $1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task % does not exist', $1 USING ERRCODE = '42704';
    END IF;
    SELECT string_agg(format('%s step %s (idempotency key %s)', s.class, s.step, s.idempotency_key),
                      ', ' ORDER BY s.ordinal DESC),
           count(*)
    INTO doubt, in_doubt
    FROM durable.steps s
    WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
      AND s.state IN ('started', 'unknown');

    SELECT w.key AS name, w.value ->> 'kind' AS kind, w.value ->> 'until' AS until,
           w.value -> 'args' ->> 'event' AS event,
           coalesce(w.value -> 'args' ->> 'queue', t.queue_name) AS event_queue
    INTO pending
    FROM jsonb_each(coalesce(t.waits, '{}')) w
    WHERE w.value ->> 'status' IN ('sleeping', 'waiting');

    recommended := CASE
        WHEN t.state = 'needs_review' AND in_doubt = 1 THEN jsonb_build_object(
            'action', 'resolve',
            'reason', format('the outcome of %s is unknown: ask the external system about it, then durable_resolve(%s, ''mark_committed'' or ''mark_not_executed'', ...)',
                             doubt, t.task_id))
        WHEN t.state = 'needs_review' AND in_doubt > 1 THEN jsonb_build_object(
            'action', 'resolve',
            'reason', format('the outcomes of %s are unknown: ask the external systems about each, then durable_resolve(%s, ''mark_committed'' or ''mark_not_executed'', ..., step => ...) for each',
                             doubt, t.task_id))
        WHEN t.state = 'needs_review' THEN jsonb_build_object(
            'action', 'resolve',
            'reason', format('the %s task cannot be recovered automatically: durable_resolve(%s, ''retry'', ''cancel'' or a mark, ...)',
                             t.class, t.task_id))
        WHEN t.state = 'running' THEN jsonb_build_object(
            'action', durable.recovery_action_of(t.task_id),
            'reason', CASE WHEN t.lease_until < now() THEN 'the lease has expired' ELSE 'the lease is live' END)
        WHEN t.state = 'failed' THEN jsonb_build_object(
            'action', 'replay or leave',
            'reason', format('the task failed (%s); durable_replay_dead_letters() gives it a new run', t.stop_code))
        WHEN t.state = 'waiting' AND pending.name IS NOT NULL THEN jsonb_build_object(
            'action', 'wait',
            'reason', format('the task waits (%s %s)%s: %s', pending.kind, pending.name,
                             coalesce(' until ' || pending.until, ''),
                             CASE pending.kind
                                 WHEN 'sleep' THEN 'its timer wakes it'
                                 WHEN 'event' THEN format('durable_emit(%L, %L, ...) wakes it',
                                                          pending.event_queue, pending.event)
                                 ELSE 'the last of its children to finish wakes it' END))
        WHEN t.state = 'waiting' AND t.run_at = 'infinity' AND in_doubt > 0 THEN jsonb_build_object(
            'action', 'reconcile',
            'reason', format('a reconcile handler is to look up the outcome of %s (durable_claim_reconcile)', doubt))
        ELSE jsonb_build_object('action', 'none', 'reason', format('the task is %s', t.state))
    END;

    SELECT jsonb_build_object(
        'task', to_jsonb(t) - 'checkpoint',
        'checkpoint', jsonb_build_object('version', t.checkpoint_version, 'value', t.checkpoint),
        'events', coalesce((SELECT jsonb_agg(to_jsonb(e) - 'partition_key' - 'task_id' ORDER BY e.seq)
                            FROM durable.events e
                            WHERE e.partition_key = t.partition_key AND e.task_id = t.task_id), '[]'),
        'operation_ids', coalesce((SELECT jsonb_agg(DISTINCT s.effect_id)
                                   FROM durable.steps s
                                   WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
                                     AND s.effect_id IS NOT NULL), '[]'),
        'idempotency_keys', coalesce((SELECT jsonb_object_agg(s.step, s.idempotency_key)
                                      FROM durable.steps s
                                      WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id), '{}'),
        'confirmed_side_effects', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                                'step', s.step, 'state', s.state, 'effect_id', s.effect_id,
                                                'receipt', s.receipt, 'result', s.result) ORDER BY s.ordinal)
                                            FROM durable.steps s
                                            WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
                                              AND s.state IN ('committed', 'compensated')), '[]'),
        'unknown_side_effects', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                              'step', s.step, 'state', s.state, 'class', s.class,
                                              'idempotency_key', s.idempotency_key, 'attempt', s.attempt,
                                              'receipt', s.receipt, 'request', s.request) ORDER BY s.ordinal)
                                          FROM durable.steps s
                                          WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
                                            AND s.state IN ('started', 'unknown')), '[]'),
        'recommended_action', recommended)
    INTO package;
    RETURN package;
END
$$;


-- durable_verify() matches an await with its event in the event's queue
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


--
-- 4. pg_monitor reads aggregates only; a queue's schedules go with it;
--    a cascading cancel leaves doubt to a person; spawn replays compare
--    every option; request-key fences never restart.
--

-- pg_monitor reads aggregates only (DESIGN section 9): counts and ages per
-- queue, never a payload, a result, an error text, an event name or a
-- list of task ids.  The views that list tasks or schedules stay the
-- operator's; queue_stats counts what review_queue and stuck_tasks list,
-- wait_stats what waiting_tasks lists, and schedule_stats what
-- schedule_list lists.  (durable.status is decided with the tick's parts.)
REVOKE SELECT ON durable.review_queue, durable.stuck_tasks, durable.waiting_tasks,
                 durable.schedule_list
    FROM pg_monitor;

CREATE VIEW durable.schedule_stats AS
SELECT queue_name, count(*) AS schedules,
       count(*) FILTER (WHERE next_run <= now()) AS due,
       now() - min(next_run) FILTER (WHERE next_run <= now()) AS oldest_due_age
FROM durable.schedules
GROUP BY queue_name;
COMMENT ON VIEW durable.schedule_stats IS 'per queue: its schedules, how many are due and not yet enqueued, and the oldest due occurrence''s age';
GRANT SELECT ON durable.schedule_stats TO durable_operator, pg_monitor;

-- A queue's schedules go with it (DESIGN section 12): durable_drop_queue
-- refuses while schedules target the queue (2BP01), cascade => true drops
-- them too.  The new signature gets the old one's grants, whoever was
-- given them (the same C symbol serves both until this update).
CREATE FUNCTION @extschema@.durable_drop_queue(queue text, cascade boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_drop_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_drop_queue(text, boolean) IS
  'drop a queue with its finished tasks and their events; refused while any task is unfinished, and while schedules target it unless cascade drops them too';
REVOKE EXECUTE ON FUNCTION @extschema@.durable_drop_queue(text, boolean) FROM PUBLIC;
DO $$
DECLARE
    old regprocedure := pg_catalog.to_regprocedure('@extschema@.durable_drop_queue(text)');
    g record;
BEGIN
    FOR g IN
        SELECT a.grantee, a.is_grantable
        FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
        WHERE p.oid OPERATOR(pg_catalog.=) old
          AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
          AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.durable_drop_queue(text, boolean) TO %s%s',
                                  CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                       ELSE g.grantee::pg_catalog.regrole::text END,
                                  CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;
DROP FUNCTION @extschema@.durable_drop_queue(text);

-- Request-key fences never restart (DESIGN section 6): like the outbox's,
-- they come from a sequence that every installation starts from the clock
-- (microseconds since 2025-01-01 UTC), so that after DROP and CREATE
-- EXTENSION a key begun again never hands out a fence that a handler of
-- the earlier installation still holds.  It starts past every fence stored
-- too (those of 0.4.0 counted from 1 per key).
CREATE SEQUENCE durable.request_fence_seq AS bigint;
COMMENT ON SEQUENCE durable.request_fence_seq IS 'the fences durable_idempotent_begin hands out; starts from the clock at every installation';
SELECT pg_catalog.pg_extension_config_dump('durable.request_fence_seq', '');
REVOKE ALL ON SEQUENCE durable.request_fence_seq FROM PUBLIC;
SELECT pg_catalog.setval('durable.request_fence_seq',
           GREATEST(c.us, (SELECT pg_catalog.max(fence) FROM durable.idempotency_keys)))
FROM (SELECT pg_catalog.floor(pg_catalog.date_part('epoch',
                 pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-)
                 '2025-01-01 00:00:00+00'::pg_catalog.timestamptz)
             OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8 AS us) c;

--
-- Last: every function of the extension written in SQL or PL/pgSQL, those
-- this script made included, pins the settings its text forms follow
-- (section 2).  test/t/015_hostile_settings.pl checks every one.
--
DO $$
DECLARE
    f pg_catalog.regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::pg_catalog.regprocedure
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_language l ON l.oid OPERATOR(pg_catalog.=) p.prolang
        JOIN pg_catalog.pg_depend d
          ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
         AND d.objid OPERATOR(pg_catalog.=) p.oid
         AND d.deptype OPERATOR(pg_catalog.=) 'e'
         AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
        JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
        WHERE e.extname OPERATOR(pg_catalog.=) 'durable'
          AND l.lanname OPERATOR(pg_catalog.=) ANY (ARRAY['sql', 'plpgsql'])
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp'
            ' SET DateStyle = ''ISO, MDY'' SET IntervalStyle = ''postgres'''
            ' SET TimeZone = ''UTC'' SET extra_float_digits = 1', f);
    END LOOP;
END
$$;
