--
-- durable_enable_citus() distributes durable's tables, durable.concurrency_keys
-- with durable.live_tasks; the grants of restricted queues are no table (a
-- grants sequence lives on the node whose grant made it).
--
CREATE OR REPLACE FUNCTION @extschema@.durable_enable_citus(shard_count int DEFAULT 32)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
SET TimeZone = 'UTC' SET extra_float_digits = 1
-- Citus tells of each table whose rows it copies into shards (and that the
-- rows stay on disk, until removed below): the caller asked for none of it
SET client_min_messages = warning
AS $$
DECLARE
    rel text;
    is_coordinator bool;
    failure record;
    release_defaults text;
    failed_nodes text;
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
    -- A tick reads durable.queues before any other table: holding it
    -- first, distribution waits for a tick under way to end and the next
    -- one waits for distribution, instead of each locking tables the other
    -- waits for, in another order (a deadlock).
    LOCK TABLE durable.queues IN ACCESS EXCLUSIVE MODE;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
               WHERE logicalrelid = 'durable.live_tasks'::pg_catalog.regclass) THEN
        RAISE EXCEPTION 'durable is already distributed by Citus'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;

    -- Each worker ran CREATE EXTENSION durable itself (Citus propagates
    -- it), and its reconciler may have made days of history there before
    -- the node joined: those local tables would clash with the
    -- coordinator's partitions that distribution creates on it.
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
        END
        $do$
    $cmd$);

    -- Citus cannot drop an extension's partition of an extension's
    -- distributed table: a node removes the partition's metadata with its
    -- parent's, keeps the table for DROP EXTENSION, and then fails to
    -- remove the metadata again ("relation ... is not distributed").  So on
    -- Citus the default partitions of history belong to their parents
    -- only, as the days do, and go with them, on every node: on the
    -- workers before distribution, which would wait for this transaction's
    -- locks there (run_command_on_workers runs apart from it), and on the
    -- coordinator after it, where Citus would otherwise create them on
    -- the workers as tables of their own.
    release_defaults := $release$
        DO $do$
        DECLARE r pg_catalog.regclass;
        BEGIN
            FOR r IN SELECT c.oid::pg_catalog.regclass
                     FROM pg_catalog.pg_inherits i
                     JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
                     WHERE i.inhparent IN ('durable.task_history'::pg_catalog.regclass,
                                           'durable.step_history'::pg_catalog.regclass,
                                           'durable.event_log'::pg_catalog.regclass)
                       AND pg_catalog.pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT'
                       AND EXISTS (SELECT FROM pg_catalog.pg_depend d
                                   WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
                                     AND d.objid = c.oid AND d.deptype = 'e')
            LOOP
                EXECUTE pg_catalog.format('ALTER EXTENSION durable DROP TABLE %s', r);
            END LOOP;
        END
        $do$
    $release$;
    SELECT pg_catalog.string_agg(pg_catalog.format('%s:%s: %s', w.nodename, w.nodeport, w.result), '; ')
    INTO failed_nodes
    FROM pg_catalog.run_command_on_workers(release_defaults) w
    WHERE NOT w.success;
    IF failed_nodes IS NOT NULL THEN
        RAISE EXCEPTION 'could not release the default partitions of history on every node'
            USING ERRCODE = 'object_not_in_prerequisite_state', DETAIL = failed_nodes;
    END IF;

    -- Citus adds the foreign keys to a reference table below only where
    -- the transaction used one connection per node so far: the tables are
    -- distributed that way (until 0.9.0 the key of durable.queue_grants,
    -- made first, switched the transaction to it as a side effect).  SET
    -- LOCAL: the caller's transaction keeps it.
    PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    FOREACH rel IN ARRAY ARRAY['durable.queues', 'durable.schedules',
                               'durable.installation', 'durable.history_horizon',
                               'durable.fairness_weights', 'durable.rate_limit_definitions',
                               'durable.spend_budgets', 'durable.spend_settlements'] LOOP
        EXECUTE 'SELECT pg_catalog.create_reference_table($1)' USING rel;
    END LOOP;

    EXECUTE 'SELECT pg_catalog.create_distributed_table($1, ''partition_key'', shard_count => $2)'
        USING 'durable.live_tasks', shard_count;
    FOREACH rel IN ARRAY ARRAY['durable.live_steps', 'durable.task_keys', 'durable.task_history',
                               'durable.step_history', 'durable.event_log', 'durable.inbox',
                               'durable.outbox', 'durable.idempotency_keys',
                               'durable.emitted_events', 'durable.event_waits',
                               'durable.retry_buckets', 'durable.concurrency_keys',
                               'durable.flow_keys', 'durable.rate_limit_buckets',
                               'durable.step_reservations', 'durable.streams',
                               'durable.stream_chunks'] LOOP
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
    -- the rows Citus copied into the shards stay in the coordinator's own
    -- tables, out of sight, until removed
    FOR rel IN SELECT logicalrelid::pg_catalog.text FROM pg_catalog.pg_dist_partition
               WHERE logicalrelid::pg_catalog.text LIKE 'durable.%' LOOP
        EXECUTE 'SELECT pg_catalog.truncate_local_data_after_distributing_table($1)' USING rel;
    END LOOP;
    EXECUTE release_defaults;
    PERFORM pg_catalog.create_distributed_function(
        'durable.execute_in_partition(int, text, bytea[], int)', '$1',
        colocate_with => 'durable.live_tasks', force_delegation => true);

    -- The days of history exist on every shard before the first call can
    -- write there.  Writers on the workers never make days: made later,
    -- while their calls write today's history, a day would leave that
    -- history in the default partitions, or fail the calls that had routed
    -- a row there with 23514 as it is attached.  Here every table is ours
    -- until commit.
    SELECT h.action, h.part, h.error_code, h.error_message INTO failure
    FROM durable.maintain_history(pg_catalog.now(), NULL, 0) h
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'could not make the days of history'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN failure.action = 'busy'
                                THEN 'Another session was making them.'
                                ELSE pg_catalog.format('%s: %s (SQLSTATE %s).', failure.part,
                                                       failure.error_message, failure.error_code)
                           END,
                  HINT = 'Call durable_enable_citus() again.';
    END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.durable_enable_citus(int) IS 'distribute durable''s tables by partition_key on a Citus cluster (once, on the coordinator)';
REVOKE ALL ON FUNCTION @extschema@.durable_enable_citus(integer) FROM PUBLIC;
