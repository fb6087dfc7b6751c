/* durable--0.7.0--0.8.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.8.0'" to load this file. \quit

--
-- Citus as a first-class home: what the calls that ran on one server only
-- need to run on a cluster.
--

--
-- Retry tokens per (queue, partition) (budget.c).  A queue's retry-token
-- bucket is split evenly over its partitions: each holds retry_capacity /
-- partitions tokens and refills retry_refill_rate / partitions a second,
-- so that on Citus a retry takes its token on its task's node only (the
-- queue's row is a reference table, written on every node).  A queue of
-- one partition on one server keeps its bucket in its row, as before; a
-- bucket here is made, full, when its partition first retries.
--
CREATE TABLE durable.retry_buckets (
    partition_key int NOT NULL,
    queue_name    text NOT NULL,
    tokens        float8 NOT NULL,
    tokens_at     timestamptz NOT NULL,
    PRIMARY KEY (partition_key, queue_name)
);
COMMENT ON TABLE durable.retry_buckets IS 'each queue partition''s share of its queue''s retry-token bucket';
SELECT pg_catalog.pg_extension_config_dump('durable.retry_buckets', '');
REVOKE ALL ON durable.retry_buckets FROM PUBLIC;

--
-- On Citus, a statement of one partition called on a node that does not
-- hold the partition's shards runs on the node that does, as one call of
-- this function that Citus delegates there by its first argument
-- (src/store/delegate.c).  Not part of the API: only the owner calls it,
-- from within durable's functions.
--
CREATE FUNCTION durable.execute_in_partition(partition int, statement text,
                                             args bytea[], expected int)
RETURNS SETOF record
LANGUAGE C STRICT VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_execute_in_partition';
REVOKE ALL ON FUNCTION durable.execute_in_partition(int, text, bytea[], int) FROM PUBLIC;

--
-- The workers each queue has seen, and the versions they run, on a
-- cluster: durable.workers_seen is distributed by queue, so that a claim
-- records its worker on the node of its queue's row there (at most once a
-- second per backend), and the coordinator's review of the tasks no
-- worker runs (a queue's version_timeout) reads one node per queue.  An
-- emit there locks its queue's row through a foreign key, as an enqueue
-- does, so that an emit and a drop of its queue that race answer as on one
-- server, and no event outlives its queue.
--
-- durable_enable_citus() distributes both tables and the function above
-- from now on (its settings pinned as 0.5.0 pinned every function's); a
-- cluster already distributed gets them below.
--
CREATE OR REPLACE FUNCTION @extschema@.durable_enable_citus(shard_count int DEFAULT 32)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
SET TimeZone = 'UTC' SET extra_float_digits = 1
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
                               'durable.emitted_events', 'durable.event_waits',
                               'durable.retry_buckets'] LOOP
        EXECUTE 'SELECT pg_catalog.create_distributed_table($1, ''partition_key'', colocate_with => ''durable.live_tasks'')'
            USING rel;
    END LOOP;
    EXECUTE 'SELECT pg_catalog.create_distributed_table($1, ''queue_name'', colocate_with => ''none'', shard_count => $2)'
        USING 'durable.workers_seen', shard_count;
    -- Enqueues and emits lock their queue's row through these keys, on
    -- the node of the row's shard only (DurableQueueGetShared locks it
    -- everywhere else).
    ALTER TABLE durable.live_tasks ADD CONSTRAINT live_tasks_queue_name_fkey
        FOREIGN KEY (queue_name) REFERENCES durable.queues (queue_name);
    ALTER TABLE durable.emitted_events ADD CONSTRAINT emitted_events_queue_name_fkey
        FOREIGN KEY (queue_name) REFERENCES durable.queues (queue_name);
    PERFORM pg_catalog.create_distributed_function(
        'durable.execute_in_partition(int, text, bytea[], int)', '$1',
        colocate_with => 'durable.live_tasks', force_delegation => true);
END
$$;
COMMENT ON FUNCTION @extschema@.durable_enable_citus(int) IS 'distribute durable''s tables by partition_key on a Citus cluster (once, on the coordinator)';
REVOKE ALL ON FUNCTION @extschema@.durable_enable_citus(int) FROM PUBLIC;

-- and an installation distributed before 0.8.0 distributes them now (on
-- the coordinator; Citus runs this script on the workers too)
DO $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
               WHERE logicalrelid = 'durable.live_tasks'::pg_catalog.regclass)
       AND pg_catalog.citus_is_coordinator() THEN
        PERFORM pg_catalog.create_distributed_table('durable.retry_buckets', 'partition_key',
                                                    colocate_with => 'durable.live_tasks');
        PERFORM pg_catalog.create_distributed_table('durable.workers_seen', 'queue_name',
                                                    colocate_with => 'none');
        ALTER TABLE durable.emitted_events ADD CONSTRAINT emitted_events_queue_name_fkey
            FOREIGN KEY (queue_name) REFERENCES durable.queues (queue_name);
        PERFORM pg_catalog.create_distributed_function(
            'durable.execute_in_partition(int, text, bytea[], int)', '$1',
            colocate_with => 'durable.live_tasks', force_delegation => true);
    END IF;
END
$$;

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
CREATE OR REPLACE FUNCTION durable.maintain_history(now timestamptz, retention interval, batch int)
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
    distributed bool := false;
    is_coordinator bool;
    shard record;
    stray record;
    removed bool := false;
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
END
$$;
COMMENT ON FUNCTION durable.maintain_history(timestamptz, interval, int) IS
  'make the coming days of history and remove those older than retention, each day a part of its own: returns what was removed, ''failed'' rows for the parts that could not be done (part, error_code, error_message), or ''busy'' when another maintainer is at work; on Citus, on the coordinator only';

--
-- Metrics aggregated where the rows are.  Each queue's figures are summed
-- per queue first and only then joined to its row in durable.queues: on
-- Citus a reference table outer-joined to a distributed one pulls every
-- row of the distributed side to the coordinator, while an aggregate per
-- queue runs on each shard and sends a row per queue.  On one server the
-- answers are the same.
--
CREATE OR REPLACE VIEW durable.queue_gauges AS
SELECT q.queue_name, q.paused, q.paused_partitions,
       coalesce(g.ready, 0) AS ready,
       coalesce(g.running, 0) AS running,
       coalesce(g.waiting, 0) AS waiting,
       coalesce(g.needs_review, 0) AS needs_review,
       coalesce(g.scheduled, 0) AS scheduled,
       coalesce(EXTRACT(EPOCH FROM now() - g.oldest_ready), 0)::float8 AS oldest_ready_age_seconds,
       coalesce(EXTRACT(EPOCH FROM now() - g.oldest_heartbeat), 0)::float8 AS oldest_heartbeat_age_seconds
FROM durable.queues q
LEFT JOIN (
    SELECT t.queue_name,
           count(*) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now()) AS ready,
           count(*) FILTER (WHERE t.state = 'running') AS running,
           count(*) FILTER (WHERE t.state = 'waiting' AND t.run_at > now()) AS waiting,
           count(*) FILTER (WHERE t.state = 'needs_review') AS needs_review,
           count(*) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at > now()
                              AND t.run_at < 'infinity') AS scheduled,
           min(t.run_at) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now())
               AS oldest_ready,
           min(t.heartbeat_at) FILTER (WHERE t.state = 'running') AS oldest_heartbeat
    FROM durable.live_tasks t
    GROUP BY t.queue_name) g ON g.queue_name = q.queue_name;

CREATE OR REPLACE VIEW durable.metrics AS
WITH per_task AS (
    SELECT t.queue_name, t.partition_key, t.task_id, t.state,
           count(*) FILTER (WHERE e.kind IN ('claimed', 'pinned')) AS claims,
           min(e.at) FILTER (WHERE e.kind = 'lease_expired') AS first_expiry,
           min(e.at) FILTER (WHERE e.kind = 'completed') AS completed_at,
           bool_or(e.state = 'needs_review') AS escalated
    FROM durable.tasks t
    JOIN durable.events e ON e.partition_key = t.partition_key AND e.task_id = t.task_id
    GROUP BY t.queue_name, t.partition_key, t.task_id, t.state
), per_queue AS MATERIALIZED (
    SELECT p.queue_name,
           count(*) AS tasks,
           count(*) FILTER (WHERE p.first_expiry IS NOT NULL) AS recoveries,
           avg((p.state = 'completed')::int) FILTER (WHERE p.first_expiry IS NOT NULL) AS recovered,
           avg(p.completed_at - p.first_expiry)
               FILTER (WHERE p.first_expiry IS NOT NULL AND p.completed_at IS NOT NULL) AS recovery_time,
           avg(p.escalated::int) AS escalated,
           avg(p.claims) AS claims
    FROM per_task p
    GROUP BY p.queue_name
), effects AS MATERIALIZED (
    SELECT t.queue_name, count(*) AS duplicate_side_effects
    FROM (SELECT e.partition_key, e.task_id, e.step
          FROM durable.events e
          WHERE e.kind = 'receipt_recorded' AND e.detail->>'effect_id' IS NOT NULL
          GROUP BY e.partition_key, e.task_id, e.step
          HAVING count(DISTINCT e.detail->>'effect_id') > 1) d
    JOIN durable.tasks t USING (partition_key, task_id)
    GROUP BY t.queue_name
), outcomes AS MATERIALIZED (
    SELECT t.queue_name,
           count(*) FILTER (WHERE s.state = 'unknown'
                              OR (s.state = 'started' AND t.state <> 'running')) AS ambiguous,
           count(*) AS steps
    FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id)
    GROUP BY t.queue_name
), lag AS MATERIALIZED (
    SELECT t.queue_name, min(t.lease_until) AS oldest_expired
    FROM durable.live_tasks t WHERE t.state = 'running' AND t.lease_until < now()
    GROUP BY t.queue_name
)
SELECT q.queue_name,
       coalesce(p.tasks, 0) AS tasks,
       coalesce(f.duplicate_side_effects, 0) AS duplicate_side_effects,
       coalesce(p.recoveries, 0) AS recoveries,
       round(p.recovered, 3) AS recovery_success_rate,
       p.recovery_time AS mean_recovery_time,
       round(o.ambiguous::numeric / nullif(o.steps, 0), 3) AS ambiguous_outcome_rate,
       round(p.escalated, 3) AS human_escalation_rate,
       round(p.claims, 3) AS claims_per_task,
       coalesce(now() - l.oldest_expired, '0') AS reconciliation_lag
FROM durable.queues q
LEFT JOIN per_queue p ON p.queue_name = q.queue_name
LEFT JOIN effects f ON f.queue_name = q.queue_name
LEFT JOIN outcomes o ON o.queue_name = q.queue_name
LEFT JOIN lag l ON l.queue_name = q.queue_name;
