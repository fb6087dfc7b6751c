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

--
-- 3. Events belong to a queue.
--

--
-- 4. pg_monitor reads aggregates only; a queue's schedules go with it;
--    a cascading cancel leaves doubt to a person; spawn replays compare
--    every option; request-key fences never restart.
--
