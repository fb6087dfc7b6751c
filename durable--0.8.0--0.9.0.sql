/* durable--0.8.0--0.9.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.9.0'" to load this file. \quit

--
-- Edges nobody else controls: what a database owner, a role or one tenant
-- can do no longer stops recovery, leaks across applications or runs as
-- someone else.
--

--
-- Queue grants are PostgreSQL's own privileges (issue 37, finding 8): a
-- role's OID changes across pg_dump and restore, and DROP ROLE left an OID
-- in durable.queue_grants that a later role could come to hold.  A
-- restricted queue's grants are now the privileges on a sequence of schema
-- durable (UPDATE: enqueue, USAGE: work), named in the queue's row, which
-- pg_shdepend ties to the roles granted and pg_dump writes as GRANT ... TO
-- their names.  The sequences are no members of the extension, so that
-- pg_dump dumps them with their privileges; the column that names them
-- owns them, so that DROP EXTENSION takes them along.  Every grant that
-- names a role (or public) moves there; one whose role is gone is dropped
-- with the old table.  durable.queue_grants is now a view of them.
--
ALTER TABLE durable.queues ADD COLUMN grants_sequence text COLLATE "C";
COMMENT ON COLUMN durable.queues.grants_sequence IS 'the sequence of schema durable whose privileges are the queue''s grants (UPDATE: enqueue, USAGE: work), made by its first grant';
COMMENT ON COLUMN durable.queues.restricted IS 'only the roles granted (durable.queue_grants) may enqueue into the queue or work on its tasks';

DO $$
DECLARE
    q record;
    g record;
    seq text;
BEGIN
    FOR q IN SELECT queue_name FROM durable.queues WHERE restricted ORDER BY queue_name LOOP
        seq := 'queue_grants_' OPERATOR(pg_catalog.||) pg_catalog.left(pg_catalog.encode(
            pg_catalog.sha256(pg_catalog.convert_to(q.queue_name, 'UTF8')), 'hex'), 32);
        EXECUTE pg_catalog.format('CREATE SEQUENCE durable.%I OWNED BY durable.queues.grants_sequence', seq);
        -- made by this script, it would be a member, which pg_dump skips
        EXECUTE pg_catalog.format('ALTER EXTENSION durable DROP SEQUENCE durable.%I', seq);
        EXECUTE pg_catalog.format('REVOKE ALL ON SEQUENCE durable.%I FROM CURRENT_USER', seq);
        EXECUTE pg_catalog.format('COMMENT ON SEQUENCE durable.%I IS %L', seq,
            pg_catalog.format('the grants of queue "%s" (durable_grant_queue): UPDATE to enqueue, USAGE to work; nothing else uses it',
                              q.queue_name));
        UPDATE durable.queues SET grants_sequence = seq
        WHERE queue_name OPERATOR(pg_catalog.=) q.queue_name;
        FOR g IN SELECT CASE WHEN o.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                             ELSE pg_catalog.quote_ident(r.rolname) END AS role,
                        CASE o.privilege WHEN 'enqueue' THEN 'UPDATE' ELSE 'USAGE' END AS privilege
                 FROM durable.queue_grants o
                 LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) o.grantee
                 WHERE o.queue_name OPERATOR(pg_catalog.=) q.queue_name
                   AND (o.grantee OPERATOR(pg_catalog.=) 0 OR r.oid IS NOT NULL)
        LOOP
            EXECUTE pg_catalog.format('GRANT %s ON SEQUENCE durable.%I TO %s',
                                      g.privilege, seq, g.role);
        END LOOP;
    END LOOP;
END
$$;

DROP TABLE durable.queue_grants;

CREATE VIEW durable.queue_grants AS
SELECT q.queue_name,
       CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'public'
            ELSE r.rolname::text END AS grantee,
       CASE a.privilege_type WHEN 'UPDATE' THEN 'enqueue' ELSE 'work' END AS privilege
FROM durable.queues q
JOIN pg_catalog.pg_namespace n ON n.nspname OPERATOR(pg_catalog.=) 'durable'
JOIN pg_catalog.pg_class c
  ON c.relnamespace OPERATOR(pg_catalog.=) n.oid
 AND c.relname OPERATOR(pg_catalog.=) q.grants_sequence
CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
WHERE q.restricted AND a.privilege_type IN ('UPDATE', 'USAGE');
COMMENT ON VIEW durable.queue_grants IS 'who may use a restricted queue: enqueue into it, or work on its tasks (the privileges on its grants sequence); grantee ''public'' is everyone';
REVOKE ALL ON durable.queue_grants FROM PUBLIC;
GRANT SELECT ON durable.queue_grants TO durable_operator;

-- durable_enable_citus() as 0.8.0 wrote it, but for the table of grants,
-- which is gone (a grants sequence lives on the node whose grant made it)
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

    FOREACH rel IN ARRAY ARRAY['durable.queues', 'durable.schedules',
                               'durable.installation', 'durable.history_horizon'] LOOP
        EXECUTE 'SELECT pg_catalog.create_reference_table($1)' USING rel;
    END LOOP;

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
