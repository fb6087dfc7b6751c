--
-- History on Citus: days made ahead and dropped whole by the coordinator,
-- the default partitions drained a shard at a time.
--
-- After durable_enable_citus() the history tables and their days are
-- distributed partitioned tables, colocated with durable.live_tasks: a day
-- that the coordinator attaches or drops is attached or dropped on every
-- shard.  Only the coordinator runs that DDL (workers' reconcilers leave
-- history to it).  The statements that lock rows go a shard at a time:
-- the rows to remove are found by a read over all shards that locks
-- nothing, and each shard's are then deleted by one statement routed to
-- it by their partition keys (SKIP LOCKED, re-checked), so that no
-- statement locks rows on two shards, which Citus refuses.  On one server
-- everything runs as in 0.5.0.  The reads that ask whether rows exist
-- select a constant: Citus cannot plan a subquery that selects no column.
--
-- The streams of a task (durable_stream_append) go with it, a batch at a
-- time: once neither the live tasks nor history have the task, and
-- nothing was appended to them for as long as retention.
--
-- The days of history are made where durable's tables are: each day and
-- its indexes go where its parent's default partition is (made with the
-- extension), in that partition's access method, whatever
-- default_tablespace and default_table_access_method the caller has,
-- which a database owner or a role sets (with default_tablespace =
-- pg_global no day could be made, and finished tasks would go to the
-- default partitions, which retention empties only row by row).
--
CREATE OR REPLACE FUNCTION durable.maintain_history(now timestamptz, retention interval, batch int)
RETURNS TABLE (task_id bigint, action text, part text, error_code text, error_message text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '100ms'
SET default_tablespace = ''
SET default_table_access_method = 'heap'
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
    distributed bool := false;
    is_coordinator bool;
    shard record;
    stray record;
    removed bool := false;
    place record;
    -- on Citus: the tasks a read found (partition_key, task_id), by shard
    -- (the tables are colocated: one shard id names a shard of each)
    by_shard constant text := 'SELECT pg_catalog.array_agg(DISTINCT c.partition_key) AS keys,'
        ' pg_catalog.array_agg(c.task_id) AS ids FROM (%s) c'
        ' GROUP BY pg_catalog.get_shard_id_for_distribution_column('
        '  ''durable.live_tasks''::pg_catalog.regclass, c.partition_key)';
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition'
                ' WHERE logicalrelid OPERATOR(pg_catalog.=) ''durable.task_history''::pg_catalog.regclass),'
                ' pg_catalog.citus_is_coordinator()'
            INTO distributed, is_coordinator;
        IF distributed AND NOT is_coordinator THEN
            RAISE EXCEPTION 'the days of history are maintained by the Citus coordinator'
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Call durable.maintain_history, or durable_reconcile(), on the coordinator.';
        END IF;
    END IF;
    -- One maintainer at a time: another one at work now (a second
    -- reconciler, durable_reconcile() from pg_cron) does this tick's work,
    -- and would otherwise make the same day or drop the same one.  The
    -- maintainers meet first on this node: on Citus a lock of the table
    -- is taken on every node, and one refused elsewhere is also relayed
    -- as a WARNING.
    IF NOT pg_catalog.pg_try_advisory_xact_lock(
            'durable.history_horizon'::pg_catalog.regclass::pg_catalog.oid::pg_catalog.int8) THEN
        action := 'busy';
        RETURN NEXT;
        RETURN;
    END IF;
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
            -- its new constraint.  A day ahead has no rows yet.  On Citus
            -- the day attached is distributed with its parent.
            BEGIN
                EXECUTE pg_catalog.format(
                    'SELECT EXISTS (SELECT 1 FROM durable.%I WHERE %I >= $1 AND %I < $2)',
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
                -- the day and its indexes go where the default partition
                -- is, in its access method, whatever the caller's
                -- default_tablespace and default_table_access_method say
                -- (this function's SET clauses restore them as it returns)
                SELECT coalesce(t.spcname, '') AS tablespace, a.amname AS method INTO place
                FROM pg_catalog.pg_class c
                JOIN pg_catalog.pg_am a ON a.oid OPERATOR(pg_catalog.=) c.relam
                LEFT JOIN pg_catalog.pg_tablespace t ON t.oid OPERATOR(pg_catalog.=) c.reltablespace
                WHERE c.oid OPERATOR(pg_catalog.=)
                      pg_catalog.format('durable.%I', parent OPERATOR(pg_catalog.||) '_default')::pg_catalog.regclass;
                PERFORM pg_catalog.set_config('default_tablespace', place.tablespace, true);
                PERFORM pg_catalog.set_config('default_table_access_method', place.method, true);
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
                   OR EXISTS (SELECT 1 FROM durable.task_history h
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
        IF NOT distributed THEN
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
                removed := true;
                RETURN NEXT;
            END LOOP;
        ELSE
            -- the batch's oldest tasks, read without locks, then each
            -- shard's by a statement routed to it by their partition keys
            FOR shard IN EXECUTE pg_catalog.format(by_shard,
                'SELECT h.partition_key, h.task_id FROM durable.task_history_default h'
                ' WHERE h.finished_at OPERATOR(pg_catalog.<) $1'
                ' ORDER BY h.finished_at LIMIT $2')
                USING cutoff, batch
            LOOP
                FOR task_id IN EXECUTE pg_catalog.format(
                    'WITH doomed AS ('
                    '  SELECT h.partition_key, h.task_id FROM durable.task_history_default h'
                    '  WHERE h.partition_key OPERATOR(pg_catalog.=) ANY (%1$L::int[])'
                    '    AND h.task_id OPERATOR(pg_catalog.=) ANY ($1)'
                    '    AND h.finished_at OPERATOR(pg_catalog.<) $2'
                    '  FOR UPDATE SKIP LOCKED),'
                    ' s AS (DELETE FROM durable.step_history_default s USING doomed d'
                    '  WHERE s.partition_key OPERATOR(pg_catalog.=) ANY (%1$L::int[])'
                    '    AND s.partition_key OPERATOR(pg_catalog.=) d.partition_key'
                    '    AND s.task_id OPERATOR(pg_catalog.=) d.task_id),'
                    ' e AS (DELETE FROM durable.event_log e USING doomed d'
                    '  WHERE e.partition_key OPERATOR(pg_catalog.=) ANY (%1$L::int[])'
                    '    AND e.partition_key OPERATOR(pg_catalog.=) d.partition_key'
                    '    AND e.task_id OPERATOR(pg_catalog.=) d.task_id)'
                    ' DELETE FROM durable.task_history_default h USING doomed d'
                    ' WHERE h.partition_key OPERATOR(pg_catalog.=) ANY (%1$L::int[])'
                    '   AND h.partition_key OPERATOR(pg_catalog.=) d.partition_key'
                    '   AND h.task_id OPERATOR(pg_catalog.=) d.task_id'
                    ' RETURNING h.task_id', shard.keys)
                    USING shard.ids, cutoff
                LOOP
                    action := 'removed';
                    removed := true;
                    RETURN NEXT;
                END LOOP;
            END LOOP;
        END IF;
        IF removed THEN
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
        IF NOT distributed THEN
            DELETE FROM durable.task_keys k
            WHERE k.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
                SELECT x.ctid FROM durable.task_keys x
                WHERE x.created_at OPERATOR(pg_catalog.<) cutoff
                  AND NOT EXISTS (SELECT FROM durable.tasks t
                                  WHERE t.partition_key OPERATOR(pg_catalog.=)
                                        (x.task_id OPERATOR(pg_catalog.&) 32767)::pg_catalog.int4
                                    AND t.task_id OPERATOR(pg_catalog.=) x.task_id)
                LIMIT batch));
        ELSE
            -- a key bound in its task's partition, checked on its shard
            FOR shard IN EXECUTE pg_catalog.format(by_shard,
                'SELECT x.partition_key, x.task_id FROM durable.task_keys x'
                ' WHERE x.created_at OPERATOR(pg_catalog.<) $1'
                '   AND x.partition_key OPERATOR(pg_catalog.=)'
                '       (x.task_id OPERATOR(pg_catalog.&) 32767)::pg_catalog.int4'
                '   AND NOT EXISTS (SELECT 1 FROM durable.live_tasks t'
                '       WHERE t.partition_key OPERATOR(pg_catalog.=) x.partition_key'
                '         AND t.task_id OPERATOR(pg_catalog.=) x.task_id)'
                '   AND NOT EXISTS (SELECT 1 FROM durable.task_history t'
                '       WHERE t.partition_key OPERATOR(pg_catalog.=) x.partition_key'
                '         AND t.task_id OPERATOR(pg_catalog.=) x.task_id)'
                ' LIMIT $2')
                USING cutoff, batch
            LOOP
                EXECUTE pg_catalog.format(
                    'DELETE FROM durable.task_keys k'
                    ' WHERE k.partition_key OPERATOR(pg_catalog.=) ANY (%1$L::int[])'
                    '   AND k.task_id OPERATOR(pg_catalog.=) ANY ($1)'
                    '   AND k.created_at OPERATOR(pg_catalog.<) $2'
                    '   AND NOT EXISTS (SELECT 1 FROM durable.live_tasks t'
                    '       WHERE t.partition_key OPERATOR(pg_catalog.=) ANY (%1$L::int[])'
                    '         AND t.partition_key OPERATOR(pg_catalog.=) k.partition_key'
                    '         AND t.task_id OPERATOR(pg_catalog.=) k.task_id)'
                    '   AND NOT EXISTS (SELECT 1 FROM durable.task_history t'
                    '       WHERE t.partition_key OPERATOR(pg_catalog.=) ANY (%1$L::int[])'
                    '         AND t.partition_key OPERATOR(pg_catalog.=) k.partition_key'
                    '         AND t.task_id OPERATOR(pg_catalog.=) k.task_id)', shard.keys)
                    USING shard.ids, cutoff;
            END LOOP;
            -- one bound apart from its task (which has a concurrency key
            -- too, and lives in that key's partition): the task is looked
            -- for on its own shard, the key deleted on the key's
            FOR stray IN
                SELECT x.partition_key, x.queue_name, x.idempotency_key, x.task_id
                FROM durable.task_keys x
                WHERE x.created_at OPERATOR(pg_catalog.<) cutoff
                  AND x.partition_key OPERATOR(pg_catalog.<>)
                      (x.task_id OPERATOR(pg_catalog.&) 32767)::pg_catalog.int4
                LIMIT batch
            LOOP
                CONTINUE WHEN EXISTS (SELECT 1 FROM durable.live_tasks t
                                      WHERE t.partition_key OPERATOR(pg_catalog.=)
                                            (stray.task_id OPERATOR(pg_catalog.&) 32767)::pg_catalog.int4
                                        AND t.task_id OPERATOR(pg_catalog.=) stray.task_id)
                           OR EXISTS (SELECT 1 FROM durable.task_history t
                                      WHERE t.partition_key OPERATOR(pg_catalog.=)
                                            (stray.task_id OPERATOR(pg_catalog.&) 32767)::pg_catalog.int4
                                        AND t.task_id OPERATOR(pg_catalog.=) stray.task_id);
                DELETE FROM durable.task_keys k
                WHERE k.partition_key OPERATOR(pg_catalog.=) stray.partition_key
                  AND k.queue_name OPERATOR(pg_catalog.=) stray.queue_name
                  AND k.idempotency_key OPERATOR(pg_catalog.=) stray.idempotency_key
                  AND k.task_id OPERATOR(pg_catalog.=) stray.task_id;
            END LOOP;
        END IF;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS error_code = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT;
        task_id := NULL;
        action := 'failed';
        part := 'history: task keys';
        RETURN NEXT;
    END;

    -- streams of tasks that are gone, with their chunks
    BEGIN
        IF NOT distributed THEN
            WITH gone AS (
                SELECT x.partition_key, x.task_id, x.stream FROM durable.streams x
                WHERE x.appended_at OPERATOR(pg_catalog.<) cutoff
                  AND NOT EXISTS (SELECT FROM durable.live_tasks t
                                  WHERE t.partition_key OPERATOR(pg_catalog.=) x.partition_key
                                    AND t.task_id OPERATOR(pg_catalog.=) x.task_id)
                  AND NOT EXISTS (SELECT FROM durable.task_history t
                                  WHERE t.partition_key OPERATOR(pg_catalog.=) x.partition_key
                                    AND t.task_id OPERATOR(pg_catalog.=) x.task_id)
                LIMIT batch FOR UPDATE OF x SKIP LOCKED),
            c AS (DELETE FROM durable.stream_chunks c USING gone g
                  WHERE c.partition_key OPERATOR(pg_catalog.=) g.partition_key
                    AND c.task_id OPERATOR(pg_catalog.=) g.task_id
                    AND c.stream OPERATOR(pg_catalog.=) g.stream)
            DELETE FROM durable.streams s USING gone g
            WHERE s.partition_key OPERATOR(pg_catalog.=) g.partition_key
              AND s.task_id OPERATOR(pg_catalog.=) g.task_id
              AND s.stream OPERATOR(pg_catalog.=) g.stream;
        ELSE
            FOR shard IN EXECUTE pg_catalog.format(by_shard,
                'SELECT x.partition_key, x.task_id FROM durable.streams x'
                ' WHERE x.appended_at OPERATOR(pg_catalog.<) $1'
                '   AND NOT EXISTS (SELECT 1 FROM durable.live_tasks t'
                '       WHERE t.partition_key OPERATOR(pg_catalog.=) x.partition_key'
                '         AND t.task_id OPERATOR(pg_catalog.=) x.task_id)'
                '   AND NOT EXISTS (SELECT 1 FROM durable.task_history t'
                '       WHERE t.partition_key OPERATOR(pg_catalog.=) x.partition_key'
                '         AND t.task_id OPERATOR(pg_catalog.=) x.task_id)'
                ' LIMIT $2')
                USING cutoff, batch
            LOOP
                EXECUTE pg_catalog.format(
                    'WITH gone AS ('
                    '  SELECT x.partition_key, x.task_id, x.stream FROM durable.streams x'
                    '  WHERE x.partition_key OPERATOR(pg_catalog.=) ANY (%1$L::int[])'
                    '    AND x.task_id OPERATOR(pg_catalog.=) ANY ($1)'
                    '    AND x.appended_at OPERATOR(pg_catalog.<) $2'
                    '  FOR UPDATE SKIP LOCKED),'
                    ' c AS (DELETE FROM durable.stream_chunks c USING gone g'
                    '  WHERE c.partition_key OPERATOR(pg_catalog.=) ANY (%1$L::int[])'
                    '    AND c.partition_key OPERATOR(pg_catalog.=) g.partition_key'
                    '    AND c.task_id OPERATOR(pg_catalog.=) g.task_id'
                    '    AND c.stream OPERATOR(pg_catalog.=) g.stream)'
                    ' DELETE FROM durable.streams s USING gone g'
                    ' WHERE s.partition_key OPERATOR(pg_catalog.=) ANY (%1$L::int[])'
                    '   AND s.partition_key OPERATOR(pg_catalog.=) g.partition_key'
                    '   AND s.task_id OPERATOR(pg_catalog.=) g.task_id'
                    '   AND s.stream OPERATOR(pg_catalog.=) g.stream', shard.keys)
                    USING shard.ids, cutoff;
            END LOOP;
        END IF;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS error_code = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT;
        task_id := NULL;
        action := 'failed';
        part := 'history: streams';
        RETURN NEXT;
    END;
END
$$;
COMMENT ON FUNCTION durable.maintain_history(timestamptz, interval, int) IS
  'make the coming days of history and remove those older than retention, each day a part of its own: returns what was removed, ''failed'' rows for the parts that could not be done (part, error_code, error_message), or ''busy'' when another maintainer is at work; on Citus, on the coordinator only';
REVOKE ALL ON FUNCTION durable.maintain_history(timestamp with time zone, interval, integer) FROM PUBLIC;
