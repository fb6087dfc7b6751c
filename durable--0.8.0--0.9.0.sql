/* durable--0.8.0--0.9.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.9.0'" to load this file. \quit

--
-- Edges nobody else controls: what a database owner, a role or one tenant
-- can do no longer stops recovery, leaks across applications or runs as
-- someone else.
--

--
-- A concurrency limit serialised per key: the claims of a key in a queue
-- with a concurrency limit take and write its row here before they count
-- its running tasks (src/core/claim.c), so that two claims never both take
-- a task of the key when one is behind the other in claim order, at any
-- isolation level (under REPEATABLE READ and SERIALIZABLE one of them is
-- refused with 40001).  A row is made by the first claim of its key; on one
-- server a key's row is in its queue's first partition, on Citus in the
-- partition claimed, which is its key's.  Queues without a concurrency
-- limit never read it.
--
CREATE TABLE durable.concurrency_keys (
    partition_key   int NOT NULL,
    queue_name      text NOT NULL,
    concurrency_key text NOT NULL,
    claimed_at      timestamptz NOT NULL,
    PRIMARY KEY (partition_key, queue_name, concurrency_key)
);
COMMENT ON TABLE durable.concurrency_keys IS 'a row per concurrency key of a queue with a concurrency limit, which the claims of the key take in turn';
SELECT pg_catalog.pg_extension_config_dump('durable.concurrency_keys', '');
REVOKE ALL ON durable.concurrency_keys FROM PUBLIC;

-- durable_enable_citus() distributes it with durable.live_tasks from now
-- on (the function as 0.8.0 made it, with one table more), and a cluster
-- already distributed gets it below.
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
                               'durable.retry_buckets', 'durable.concurrency_keys'] LOOP
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

DO $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
               WHERE logicalrelid = 'durable.live_tasks'::pg_catalog.regclass)
       AND pg_catalog.citus_is_coordinator() THEN
        PERFORM pg_catalog.create_distributed_table('durable.concurrency_keys', 'partition_key',
                                                    colocate_with => 'durable.live_tasks');
    END IF;
END
$$;

--
-- A compensation takes a class as any step does (issue 37): by default its
-- forward step's, so that an unsafe step's compensation in doubt goes to
-- review instead of running again; classes names another by step.  The
-- library serves the call of 0.8.0 (without classes) until this update.
--
DROP FUNCTION @extschema@.durable_compensate(bigint, bigint);
CREATE FUNCTION @extschema@.durable_compensate(task_id bigint, fence bigint,
                                               classes jsonb DEFAULT NULL)
RETURNS TABLE (step text, compensates text, state text, version int, idempotency_key text)
AS 'MODULE_PATHNAME', 'durable_compensate'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_compensate(bigint, bigint, jsonb) IS
  'plan a compensation step for each committed step, newest first, of its step''s class or the one classes gives; calling it again plans nothing new';
REVOKE EXECUTE ON FUNCTION @extschema@.durable_compensate(bigint, bigint, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_compensate(bigint, bigint, jsonb) TO durable_worker;
