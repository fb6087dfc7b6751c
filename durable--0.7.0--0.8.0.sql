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
-- The workers each queue has seen, and the versions they run, on a
-- cluster: durable.workers_seen is distributed by queue, so that a claim
-- records its worker on the node of its queue's row there (at most once a
-- second per backend), and the coordinator's review of the tasks no
-- worker runs (a queue's version_timeout) reads one node per queue.  An
-- emit there locks its queue's row through a foreign key, as an enqueue
-- does, so that an emit and a drop of its queue that race answer as on one
-- server, and no event outlives its queue.
--
-- durable_enable_citus() distributes both tables from now on (its
-- settings pinned as 0.5.0 pinned every function's); a cluster already
-- distributed gets them below.
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
    END IF;
END
$$;
