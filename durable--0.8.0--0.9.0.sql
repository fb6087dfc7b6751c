/* durable--0.8.0--0.9.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.9.0'" to load this file. \quit

--
-- Edges nobody else controls: what a database owner, a role or one tenant
-- can do no longer stops recovery, leaks across applications or runs as
-- someone else.
--

--
-- Outbox messages, inbox entries and request keys belong to a queue, as
-- events do since 0.5.0: their names are the queue's, unique within it, and
-- a restricted queue's grants say who may use them (docs/security.md).
-- Each name in use becomes a queue of its own name (created unrestricted,
-- with durable_create_queue's defaults, where it does not exist), so that
-- an application that passes its old topic, consumer or scope as the queue
-- finds every row where it left it: unpublished messages, the message ids
-- it has seen, its keys with their fences and responses.
--
INSERT INTO durable.queues (queue_name, partition_base, partitions, lease,
                            max_attempts, retry_base, retry_cap, retry_refill_rate,
                            retry_tokens, retry_tokens_at, notify, created_at)
SELECT n.name,
       ((pg_catalog.get_byte(h.digest, 0) OPERATOR(pg_catalog.<<) 8)
        OPERATOR(pg_catalog.|) pg_catalog.get_byte(h.digest, 1))
       OPERATOR(pg_catalog.%) 32768,
       1, '30 seconds', 3, 2, 60, 10, 0, pg_catalog.now(), false, pg_catalog.now()
FROM (SELECT topic FROM durable.outbox
      UNION SELECT consumer FROM durable.inbox
      UNION SELECT scope FROM durable.idempotency_keys) n(name),
LATERAL (SELECT pg_catalog.sha256(pg_catalog.convert_to(n.name, pg_catalog.getdatabaseencoding()))
         AS digest) h
ON CONFLICT (queue_name) DO NOTHING;

-- a message keeps its partition: its id carries it, and an id a consumer
-- has seen must stay the message's
ALTER TABLE durable.outbox ADD COLUMN queue_name text COLLATE "C";
UPDATE durable.outbox SET queue_name = topic;
ALTER TABLE durable.outbox ALTER COLUMN queue_name SET NOT NULL;
DROP INDEX durable.outbox_unpublished;
CREATE INDEX outbox_unpublished ON durable.outbox (queue_name, message_id) WHERE published_at IS NULL;
COMMENT ON COLUMN durable.outbox.queue_name IS 'the queue the message was emitted into; only its publishers claim and acknowledge it';
COMMENT ON TABLE durable.outbox IS 'messages emitted into a queue in business transactions, published at least once by the queue''s fenced publishers';

-- inbox entries and request keys move into their queue's partitions, to
-- the one a hash of their two names picks (as an event's name does); the
-- helper computes it as the library does (DurableQueuePairPartition) and
-- goes at the end of the update
CREATE FUNCTION durable.pair_partition(base int, partitions int, a text, b text)
RETURNS int
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
SELECT ((base OPERATOR(pg_catalog.+)
         (((pg_catalog.get_byte(h.digest, 0)::bigint OPERATOR(pg_catalog.<<) 24)
           OPERATOR(pg_catalog.|) (pg_catalog.get_byte(h.digest, 1)::bigint OPERATOR(pg_catalog.<<) 16)
           OPERATOR(pg_catalog.|) (pg_catalog.get_byte(h.digest, 2)::bigint OPERATOR(pg_catalog.<<) 8)
           OPERATOR(pg_catalog.|) pg_catalog.get_byte(h.digest, 3)::bigint)
          OPERATOR(pg_catalog.%) partitions))
        OPERATOR(pg_catalog.%) 32768)::int
FROM (SELECT pg_catalog.sha256(pg_catalog.convert_to(
          pg_catalog.octet_length(a) OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) a
          OPERATOR(pg_catalog.||) pg_catalog.octet_length(b) OPERATOR(pg_catalog.||) ':'
          OPERATOR(pg_catalog.||) b,
          pg_catalog.getdatabaseencoding())) AS digest) h
$$;
ALTER TABLE durable.inbox ADD COLUMN queue_name text COLLATE "C";
ALTER TABLE durable.inbox DROP CONSTRAINT inbox_pkey;
INSERT INTO durable.inbox (partition_key, queue_name, consumer, message_id, payload_hash, received_at)
SELECT durable.pair_partition(q.partition_base, q.partitions, i.consumer, i.message_id),
       q.queue_name, i.consumer, i.message_id, i.payload_hash, i.received_at
FROM durable.inbox i
JOIN durable.queues q ON q.queue_name OPERATOR(pg_catalog.=) i.consumer
WHERE i.queue_name IS NULL;
DELETE FROM durable.inbox WHERE queue_name IS NULL;
ALTER TABLE durable.inbox ALTER COLUMN queue_name SET NOT NULL;
ALTER TABLE durable.inbox ADD PRIMARY KEY (partition_key, queue_name, consumer, message_id);
COMMENT ON COLUMN durable.inbox.queue_name IS 'the queue of the consumer; partition_key is one of the queue''s partitions';
COMMENT ON TABLE durable.inbox IS 'messages a consumer of a queue has received, for deduplication; the partition is the queue''s that a hash of consumer and message id picks';

ALTER TABLE durable.idempotency_keys ADD COLUMN queue_name text COLLATE "C";
ALTER TABLE durable.idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
INSERT INTO durable.idempotency_keys (partition_key, queue_name, scope, key, request_hash, completed,
                                      created_at, locked_until, expires_at, recovery_point,
                                      response, fence)
SELECT durable.pair_partition(q.partition_base, q.partitions, k.scope, k.key),
       q.queue_name, k.scope, k.key, k.request_hash, k.completed, k.created_at, k.locked_until,
       k.expires_at, k.recovery_point, k.response, k.fence
FROM durable.idempotency_keys k
JOIN durable.queues q ON q.queue_name OPERATOR(pg_catalog.=) k.scope
WHERE k.queue_name IS NULL;
DELETE FROM durable.idempotency_keys WHERE queue_name IS NULL;
ALTER TABLE durable.idempotency_keys ALTER COLUMN queue_name SET NOT NULL;
ALTER TABLE durable.idempotency_keys ADD PRIMARY KEY (partition_key, queue_name, scope, key);
COMMENT ON COLUMN durable.idempotency_keys.queue_name IS 'the queue of the key''s scope; partition_key is one of the queue''s partitions';
COMMENT ON TABLE durable.idempotency_keys IS 'request-level idempotency keys of a queue (begin/advance/finish), bound to the hash of their request until they expire';
DROP FUNCTION durable.pair_partition(int, int, text, text);

-- the forms without a queue go: the library refuses them until now
DROP FUNCTION @extschema@.durable_outbox_emit(text, jsonb, text);
DROP FUNCTION @extschema@.durable_outbox_claim(text, int, interval);
DROP FUNCTION @extschema@.durable_outbox_ack(bigint[], bigint);
DROP FUNCTION @extschema@.durable_inbox_receive(text, text, jsonb);
DROP FUNCTION @extschema@.durable_idempotent_begin(text, text, jsonb, interval);
DROP FUNCTION @extschema@.durable_idempotent_advance(text, text, bigint, text, interval);
DROP FUNCTION @extschema@.durable_idempotent_finish(text, text, bigint, jsonb, interval);

CREATE FUNCTION @extschema@.durable_outbox_emit(queue text, topic text, payload jsonb,
                                                key text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'durable_outbox_emit'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_outbox_emit(text, text, jsonb, text) IS
  'emit a message into a queue in the caller''s transaction; NOTIFY durable_outbox ''<queue>'' at commit; needs the queue''s enqueue grant where it is restricted';

CREATE FUNCTION @extschema@.durable_outbox_claim(queue text, publisher text, batch int DEFAULT 100,
                                                 lease interval DEFAULT '30 seconds')
RETURNS TABLE (message_id bigint, fence bigint, topic text, key text, payload jsonb, attempt int)
AS 'MODULE_PATHNAME', 'durable_outbox_claim'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_outbox_claim(text, text, int, interval) IS
  'lease a batch of a queue''s unpublished messages under one new fence; needs the queue''s work grant where it is restricted';

CREATE FUNCTION @extschema@.durable_outbox_ack(queue text, message_ids bigint[], fence bigint)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_outbox_ack'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_outbox_ack(text, bigint[], bigint) IS
  'mark messages of a queue published while they are still held under the fence; needs the queue''s work grant where it is restricted';

CREATE FUNCTION @extschema@.durable_inbox_receive(queue text, consumer text, message_id text,
                                                  payload jsonb DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'durable_inbox_receive'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_inbox_receive(text, text, text, jsonb) IS
  'true the first time a consumer of a queue receives a message, false for a duplicate; 55U03 for the same id with another payload; needs the queue''s work grant where it is restricted';

CREATE FUNCTION @extschema@.durable_idempotent_begin(queue text, scope text, key text, request jsonb,
                                                     lock interval DEFAULT '1 minute')
RETURNS TABLE (status text, recovery_point text, fence bigint, response jsonb)
AS 'MODULE_PATHNAME', 'durable_idempotent_begin'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_idempotent_begin(text, text, text, jsonb, interval) IS
  'begin a request under an idempotency key of a queue: started (with the fence that owns it), in_progress or completed (with the stored response); needs the queue''s enqueue grant where it is restricted';

CREATE FUNCTION @extschema@.durable_idempotent_advance(queue text, scope text, key text, fence bigint,
                                                       recovery_point text,
                                                       lock interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_idempotent_advance'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_idempotent_advance(text, text, text, bigint, text, interval) IS
  'record the recovery point a request of a queue has reached, under the fence that owns it';

CREATE FUNCTION @extschema@.durable_idempotent_finish(queue text, scope text, key text, fence bigint,
                                                      response jsonb,
                                                      retention interval DEFAULT '24 hours')
RETURNS void
AS 'MODULE_PATHNAME', 'durable_idempotent_finish'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_idempotent_finish(text, text, text, bigint, jsonb, interval) IS
  'store the response of a request of a queue under the fence that owns it; later begins get it back until the retention has passed';

REVOKE EXECUTE ON FUNCTION
    @extschema@.durable_outbox_emit(text, text, jsonb, text),
    @extschema@.durable_outbox_claim(text, text, int, interval),
    @extschema@.durable_outbox_ack(text, bigint[], bigint),
    @extschema@.durable_inbox_receive(text, text, text, jsonb),
    @extschema@.durable_idempotent_begin(text, text, text, jsonb, interval),
    @extschema@.durable_idempotent_advance(text, text, text, bigint, text, interval),
    @extschema@.durable_idempotent_finish(text, text, text, bigint, jsonb, interval)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_outbox_emit(text, text, jsonb, text),
    @extschema@.durable_idempotent_begin(text, text, text, jsonb, interval),
    @extschema@.durable_idempotent_advance(text, text, text, bigint, text, interval),
    @extschema@.durable_idempotent_finish(text, text, text, bigint, jsonb, interval)
TO durable_producer, durable_worker;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_outbox_claim(text, text, int, interval),
    @extschema@.durable_outbox_ack(text, bigint[], bigint),
    @extschema@.durable_inbox_receive(text, text, text, jsonb)
TO durable_worker;

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

--
-- durable_enable_citus() as 0.8.0 wrote it, with durable.concurrency_keys
-- distributed with durable.live_tasks (a cluster already distributed gets
-- it below), and without the table of grants, which is gone (a grants
-- sequence lives on the node whose grant made it).
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

    -- Citus adds the foreign keys to a reference table below only where
    -- the transaction used one connection per node so far: the tables are
    -- distributed that way (until 0.9.0 the key of durable.queue_grants,
    -- made first, switched the transaction to it as a side effect).  SET
    -- LOCAL: the caller's transaction keeps it.
    PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
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

-- The days of history are made where durable's tables are.  A day was
-- made by CREATE TABLE under the caller's default_tablespace and
-- default_table_access_method, which a database owner or a role sets: with
-- default_tablespace = pg_global no day could be made (finished tasks then
-- went to the default partitions, which retention empties only row by
-- row), with another table access method the days were made in it.  Each
-- day and its indexes now go where its parent's default partition is
-- (made with the extension), in that partition's access method.  The same
-- function as in 0.8.0 otherwise.
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
END
$$;
COMMENT ON FUNCTION durable.maintain_history(timestamptz, interval, int) IS
  'make the coming days of history and remove those older than retention, each day a part of its own: returns what was removed, ''failed'' rows for the parts that could not be done (part, error_code, error_message), or ''busy'' when another maintainer is at work; on Citus, on the coordinator only';
