-- The hand part of the update from 0.8.0 to 0.9.0: the schema changes
-- only (tables, data moves, functions and views that go or change their
-- signature).  tools/sql-scripts (make sql-scripts) builds
-- durable--0.8.0--0.9.0.sql from it and, after it, every function and view
-- of src/sql, which create or replace each one as 0.9.0 has it.

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
    concurrency_key text COLLATE "C" NOT NULL,
    claimed_at      timestamptz NOT NULL,
    PRIMARY KEY (partition_key, queue_name, concurrency_key)
);
COMMENT ON TABLE durable.concurrency_keys IS 'a row per concurrency key of a queue with a concurrency limit, which the claims of the key take in turn';
SELECT pg_catalog.pg_extension_config_dump('durable.concurrency_keys', '');
REVOKE ALL ON durable.concurrency_keys FROM PUBLIC;

--
-- Debounce and throttle (issue 40): a key's calls coalesced into one task,
-- the key's row in its partition of the queue (src/sql/schema/flow.sql).
--
CREATE TABLE durable.flow_keys (
    partition_key int NOT NULL,
    queue_name    text COLLATE "C" NOT NULL,
    kind          text COLLATE "C" NOT NULL CHECK (kind IN ('debounce', 'throttle')),
    flow_key      text COLLATE "C" NOT NULL,
    task_id       bigint,
    first_at      timestamptz NOT NULL,
    last_at       timestamptz NOT NULL,
    calls         bigint NOT NULL,
    expires_at    timestamptz NOT NULL,
    PRIMARY KEY (partition_key, queue_name, kind, flow_key)
);
CREATE INDEX flow_keys_expiry ON durable.flow_keys (expires_at);
COMMENT ON TABLE durable.flow_keys IS 'debounce and throttle keys of a queue: the task the key''s calls made, when its first call came and how many calls it took';
COMMENT ON COLUMN durable.flow_keys.calls IS 'the calls coalesced into task_id, the call that made it included';
SELECT pg_catalog.pg_extension_config_dump('durable.flow_keys', '');
REVOKE ALL ON durable.flow_keys FROM PUBLIC;
GRANT SELECT ON durable.flow_keys TO durable_operator;

--
-- Fairness between keys (issue 40): a task's fairness key and its pass in
-- its queue's claim order, which tasks_claimable now orders by within a
-- priority (NULL, the last, in a queue without fairness, where the order
-- stays the due time's); a queue's flag; the weights of its keys.
--
ALTER TABLE durable.live_tasks ADD COLUMN fairness_key text COLLATE "C",
    ADD COLUMN fair_pass float8;
ALTER TABLE durable.task_history ADD COLUMN fairness_key text COLLATE "C",
    ADD COLUMN fair_pass float8;
COMMENT ON COLUMN durable.live_tasks.fairness_key IS 'the key among whose tasks claims share a fair queue (NULL: the tasks without a key, which share one)';
COMMENT ON COLUMN durable.live_tasks.fair_pass IS 'in a fair queue, the task''s place among the ready tasks of its priority (its key''s virtual time); Infinity until the task is due and admitted; NULL in a queue without fairness';
DROP INDEX durable.tasks_claimable;
CREATE INDEX tasks_claimable ON durable.live_tasks
    (partition_key, queue_name, priority DESC, fair_pass, run_at, task_id)
    WHERE state IN ('ready', 'waiting');
CREATE INDEX tasks_fair ON durable.live_tasks
    (partition_key, queue_name, priority, (COALESCE(fairness_key, '')), fair_pass)
    WHERE state IN ('ready', 'waiting') AND fair_pass < 'Infinity';
CREATE INDEX tasks_unadmitted ON durable.live_tasks (partition_key, run_at)
    WHERE state IN ('ready', 'waiting') AND fair_pass = 'Infinity';
ALTER TABLE durable.queues ADD COLUMN fair bool NOT NULL DEFAULT false;
COMMENT ON COLUMN durable.queues.fair IS 'claims share the queue between fairness keys by their weights (src/core/fairness.c); set by the first task with a fairness key or durable_set_fairness()';
CREATE TABLE durable.fairness_weights (
    queue_name   text COLLATE "C" NOT NULL,
    fairness_key text COLLATE "C" NOT NULL,
    weight       float8 NOT NULL CHECK (weight > 0 AND weight <= 1000000),
    PRIMARY KEY (queue_name, fairness_key)
);
COMMENT ON TABLE durable.fairness_weights IS 'the weights of the fairness keys of a queue (durable_set_fairness); a key without a row weighs 1';
SELECT pg_catalog.pg_extension_config_dump('durable.fairness_weights', '');
REVOKE ALL ON durable.fairness_weights FROM PUBLIC;
GRANT SELECT ON durable.fairness_weights TO durable_operator;

--
-- Rate limits (issue 40): their definitions, one bucket per limit and key,
-- the units a task takes of each, the limit that deferred it last, and a
-- queue's flag.  durable.queue_counters() counts the tasks deferred.
--
ALTER TABLE durable.live_tasks ADD COLUMN rate_limits jsonb,
    ADD COLUMN rate_limited_by text COLLATE "C";
ALTER TABLE durable.task_history ADD COLUMN rate_limits jsonb,
    ADD COLUMN rate_limited_by text COLLATE "C";
COMMENT ON COLUMN durable.live_tasks.rate_limits IS 'the units of each rate limit a claim of the task takes (limit name or prefix:key -> units)';
COMMENT ON COLUMN durable.live_tasks.rate_limited_by IS 'the limit whose lack of room deferred the task last, until its next claim';
ALTER TABLE durable.queues ADD COLUMN rate_limited bool NOT NULL DEFAULT false;
COMMENT ON COLUMN durable.queues.rate_limited IS 'claims check the rate limits of the tasks they take (src/core/rate_limits.c); set by the first task with rate limits';
CREATE TABLE durable.rate_limit_definitions (
    limit_name text COLLATE "C" PRIMARY KEY,
    rate       int NOT NULL CHECK (rate > 0),
    per        interval NOT NULL,
    per_us     bigint NOT NULL CHECK (per_us > 0),
    burst      int NOT NULL CHECK (burst > 0),
    updated_at timestamptz NOT NULL
);
COMMENT ON TABLE durable.rate_limit_definitions IS 'rate limits (durable_set_rate_limit): at most burst units at once, rate units per per after that; a limit name prefix:key uses the definition of prefix for each key';
SELECT pg_catalog.pg_extension_config_dump('durable.rate_limit_definitions', '');
REVOKE ALL ON durable.rate_limit_definitions FROM PUBLIC;
GRANT SELECT ON durable.rate_limit_definitions TO durable_operator;
CREATE TABLE durable.rate_limit_buckets (
    partition_key int NOT NULL,
    limit_name    text COLLATE "C" NOT NULL,
    limit_key     text COLLATE "C" NOT NULL,
    tat           timestamptz NOT NULL,
    booked        timestamptz NOT NULL,
    PRIMARY KEY (partition_key, limit_name, limit_key)
);
COMMENT ON TABLE durable.rate_limit_buckets IS 'per rate limit and key: the time by which the units taken so far are paid back at the limit''s rate (GCRA); room is what that leaves of the burst';
COMMENT ON COLUMN durable.rate_limit_buckets.booked IS 'the time by which the units of the tasks deferred so far would be paid back, after tat: each task deferred is due when its units will fit after those before it';
SELECT pg_catalog.pg_extension_config_dump('durable.rate_limit_buckets', '');
REVOKE ALL ON durable.rate_limit_buckets FROM PUBLIC;
GRANT SELECT ON durable.rate_limit_buckets TO durable_operator;
DROP VIEW durable.queue_counters;
DROP FUNCTION durable.queue_counters();

--
-- durable.metrics is counted (issue 42): it read every task and event
-- retained, seconds with a million kept.  Its columns are now those of the
-- counters (finished and since, for tasks); durable.history_metrics
-- computes the old view's from the history.
--
DROP VIEW durable.metrics;


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

-- out of the extension first, as any table that goes: DROP TABLE alone
-- left its OID among the extension's configuration tables (extconfig)
ALTER EXTENSION durable DROP TABLE durable.queue_grants;
DROP TABLE durable.queue_grants;

--
-- durable_enable_citus() distributes durable.concurrency_keys and
-- durable.flow_keys with durable.live_tasks, makes durable.fairness_weights
-- a reference table, and no longer distributes the table of
-- grants, which is gone (a grants sequence lives on the node whose grant
-- made it); a cluster already distributed gets the new tables here.
--
DO $$
DECLARE
    rel text;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
               WHERE logicalrelid = 'durable.live_tasks'::pg_catalog.regclass)
       AND pg_catalog.citus_is_coordinator() THEN
        FOREACH rel IN ARRAY ARRAY['durable.concurrency_keys', 'durable.flow_keys',
                                   'durable.rate_limit_buckets'] LOOP
            PERFORM pg_catalog.create_distributed_table(rel, 'partition_key',
                                                        colocate_with => 'durable.live_tasks');
        END LOOP;
        PERFORM pg_catalog.create_reference_table('durable.fairness_weights');
        PERFORM pg_catalog.create_reference_table('durable.rate_limit_definitions');
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

--
-- durable_reconcile takes a queue (issue 38): one function with an optional
-- second argument rather than an overload, so that a call with an untyped
-- argument (durable_reconcile($1), as drivers send it) still means the
-- batch.  The library serves the call of 0.8.0 until this update.
--
DROP FUNCTION @extschema@.durable_reconcile(integer);

--
-- durable_enqueue, durable_enqueue_batch and durable_spawn take a fairness
-- key, durable_enqueue also rate limits (issue 40) and spend budgets (issue
-- 41).  The library serves the calls of 0.8.0 until this update.
--
DROP FUNCTION @extschema@.durable_enqueue(text, jsonb, text, timestamptz, int, text, int,
                                          interval, text, jsonb, text);
DROP FUNCTION @extschema@.durable_enqueue_batch(text, jsonb[], text[], timestamptz, int, text,
                                                int, interval, text, jsonb, text[]);
DROP FUNCTION @extschema@.durable_spawn(bigint, bigint, text, text, jsonb, timestamptz, int,
                                        text, int, interval, text, jsonb, text);

--
-- Spend budgets (issue 41): the budgets, their settlements not yet folded
-- in, a started step's reservation, and the budgets a task names.  A
-- step's start takes a reserve, its commit what was spent.  The library
-- serves the calls of 0.8.0 until this update.
--
ALTER TABLE durable.live_tasks ADD COLUMN budgets text[] COLLATE "C";
ALTER TABLE durable.task_history ADD COLUMN budgets text[] COLLATE "C";
COMMENT ON COLUMN durable.live_tasks.budgets IS 'the spend budgets the task''s steps reserve from and settle to (durable_step_start(reserve => ...))';
DROP FUNCTION @extschema@.durable_step_start(bigint, bigint, text, int);
DROP FUNCTION @extschema@.durable_commit(bigint, bigint, jsonb, text, int);
DROP FUNCTION @extschema@.durable_resolve(bigint, text, text, jsonb, text);
--
-- Spend budgets (src/core/spend.c): an amount that the steps of the tasks
-- naming the budget reserve before their calls and settle after; with a
-- period it starts again each period on the UTC calendar.  Reserving
-- locks the budget's row, so that concurrent reserves never overshoot;
-- settling never does (the reconciler settles too, and must not wait on a
-- worker's open transaction): it appends to durable.spend_settlements,
-- which the next reserve folds into the row.  On Citus a reference table.
--
CREATE TABLE durable.spend_budgets (
    budget_name  text COLLATE "C" PRIMARY KEY,
    amount       numeric NOT NULL CHECK (amount >= 0),
    period       interval,
    period_start timestamptz,
    reserved     numeric NOT NULL DEFAULT 0,
    spent        numeric NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
COMMENT ON TABLE durable.spend_budgets IS 'spend budgets (durable_create_budget); reserved and spent as of the last reserve, before the settlements not yet folded in (durable.budgets adds them)';
COMMENT ON COLUMN durable.spend_budgets.period_start IS 'the start of the period spent counts in (NULL without a period)';
SELECT pg_catalog.pg_extension_config_dump('durable.spend_budgets', '');
REVOKE ALL ON durable.spend_budgets FROM PUBLIC;
GRANT SELECT ON durable.spend_budgets TO durable_operator;

--
-- What settling a step changed of a budget, until a reserve folds it into
-- the budget's row: the reservation returned (negative) and the amount
-- spent, in the period it was spent in.
--
CREATE TABLE durable.spend_settlements (
    budget_name  text COLLATE "C" NOT NULL,
    reserved     numeric NOT NULL,
    spent        numeric NOT NULL,
    period_start timestamptz,
    settled_at   timestamptz NOT NULL
);
CREATE INDEX spend_settlements_budget ON durable.spend_settlements (budget_name);
COMMENT ON TABLE durable.spend_settlements IS 'settlements of steps not yet folded into their budget''s row by a reserve';
SELECT pg_catalog.pg_extension_config_dump('durable.spend_settlements', '');
REVOKE ALL ON durable.spend_settlements FROM PUBLIC;
GRANT SELECT ON durable.spend_settlements TO durable_operator;

--
-- A started step's reservation, from its start until it is settled: the
-- amount and the budgets it was taken from.  A row only for a step that
-- reserved; on Citus with its task.
--
CREATE TABLE durable.step_reservations (
    partition_key int NOT NULL,
    task_id       bigint NOT NULL,
    step          text COLLATE "C" NOT NULL,
    amount        numeric NOT NULL CHECK (amount >= 0),
    budgets       text[] COLLATE "C" NOT NULL,
    reserved_at   timestamptz NOT NULL,
    PRIMARY KEY (partition_key, task_id, step)
);
COMMENT ON TABLE durable.step_reservations IS 'what a started or unknown step reserved (durable_step_start(reserve => ...)), until its commit, failure or replanning settles it';
SELECT pg_catalog.pg_extension_config_dump('durable.step_reservations', '');
REVOKE ALL ON durable.step_reservations FROM PUBLIC;
GRANT SELECT ON durable.step_reservations TO durable_operator;
-- a cluster already distributed gets them here (durable_enable_citus makes
-- them so on a new one)
DO $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
               WHERE logicalrelid = 'durable.live_tasks'::pg_catalog.regclass)
       AND pg_catalog.citus_is_coordinator() THEN
        PERFORM pg_catalog.create_reference_table('durable.spend_budgets');
        PERFORM pg_catalog.create_reference_table('durable.spend_settlements');
        PERFORM pg_catalog.create_distributed_table('durable.step_reservations', 'partition_key',
                                                    colocate_with => 'durable.live_tasks');
    END IF;
END
$$;

--
-- Streams (issue 41): the streams of tasks and their chunks.
--
--
-- Streams (src/core/stream.c): what a running task tells its readers as it
-- goes (a model's tokens, a tool's progress), a chunk at a time, each at
-- the next position of its stream.  A stream belongs to its task: only
-- the holder of the task's fence appends to it or closes it, readers need
-- a grant on the task's queue, and the stream goes when the task's
-- history does.  The head holds the last position and says whether the
-- stream is closed; a close is also a chunk, a NULL one at the end, so
-- that a reader learns of it in order.  On Citus both are distributed
-- with their task.
--
CREATE TABLE durable.streams (
    partition_key int NOT NULL,
    task_id       bigint NOT NULL,
    stream        text COLLATE "C" NOT NULL,
    queue_name    text COLLATE "C" NOT NULL,
    last_seq      bigint NOT NULL,
    created_at    timestamptz NOT NULL,
    appended_at   timestamptz NOT NULL,
    closed_at     timestamptz,
    PRIMARY KEY (partition_key, task_id, stream)
);
CREATE INDEX streams_appended ON durable.streams (appended_at);
COMMENT ON TABLE durable.streams IS 'the streams of tasks (durable_stream_append): the last position of each, and when it was closed';
COMMENT ON COLUMN durable.streams.queue_name IS 'the queue of the stream''s task, whose grants say who may read it';
SELECT pg_catalog.pg_extension_config_dump('durable.streams', '');
REVOKE ALL ON durable.streams FROM PUBLIC;
GRANT SELECT ON durable.streams TO durable_operator;

CREATE TABLE durable.stream_chunks (
    partition_key int NOT NULL,
    task_id       bigint NOT NULL,
    stream        text COLLATE "C" NOT NULL,
    seq           bigint NOT NULL,
    chunk         jsonb,
    at            timestamptz NOT NULL,
    PRIMARY KEY (partition_key, task_id, stream, seq)
);
COMMENT ON TABLE durable.stream_chunks IS 'the chunks of the streams of tasks, by position; a NULL chunk ends a closed stream';
SELECT pg_catalog.pg_extension_config_dump('durable.stream_chunks', '');
REVOKE ALL ON durable.stream_chunks FROM PUBLIC;
GRANT SELECT ON durable.stream_chunks TO durable_operator;
-- a cluster already distributed gets them here (durable_enable_citus makes
-- them so on a new one)
DO $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
               WHERE logicalrelid = 'durable.live_tasks'::pg_catalog.regclass)
       AND pg_catalog.citus_is_coordinator() THEN
        PERFORM pg_catalog.create_distributed_table('durable.streams', 'partition_key',
                                                    colocate_with => 'durable.live_tasks');
        PERFORM pg_catalog.create_distributed_table('durable.stream_chunks', 'partition_key',
                                                    colocate_with => 'durable.live_tasks');
    END IF;
END
$$;

--
-- Schedules paused, resumed and run now (issue 42).
--
ALTER TABLE durable.schedules ADD COLUMN paused_at timestamptz;
COMMENT ON COLUMN durable.schedules.paused_at IS 'when the schedule was paused (durable_pause_schedule): it enqueues nothing until resumed; NULL when it runs';

--
-- Queue operators (issue 42): a role that operates some queues, sees their
-- tasks in durable's views and acts on them, and nothing of the others.
--
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles
                   WHERE rolname OPERATOR(pg_catalog.=) 'durable_queue_operator') THEN
        CREATE ROLE durable_queue_operator NOLOGIN;
    END IF;
END
$roles$;
GRANT USAGE ON SCHEMA durable TO durable_queue_operator;

--
-- The queues sampled once a minute, for charts over hours (issue 42).
--
CREATE TABLE durable.samples (
    at                       timestamptz NOT NULL,
    queue_name               text COLLATE "C" NOT NULL,
    ready                    bigint NOT NULL,
    running                  bigint NOT NULL,
    waiting                  bigint NOT NULL,
    needs_review             bigint NOT NULL,
    oldest_ready_age_seconds float8 NOT NULL,
    enqueued                 bigint,
    completed                bigint,
    failed                   bigint,
    dead_lettered            bigint,
    leases_expired           bigint,
    sent_to_review           bigint,
    counters_since           timestamptz,
    PRIMARY KEY (at, queue_name)
);
COMMENT ON TABLE durable.samples IS 'the queues'' counts and counters, sampled once a minute by the reconciler and kept for 48 hours (read durable.queue_samples)';
REVOKE ALL ON durable.samples FROM PUBLIC;

--
-- A crash costs only the tasks it touched (issue 43): a lease that runs out
-- before its task began gives the attempt back (src/core/begin.c).
--
ALTER TABLE durable.live_tasks ADD COLUMN began_at timestamptz;
ALTER TABLE durable.task_history ADD COLUMN began_at timestamptz;
ALTER TABLE durable.live_tasks ADD COLUMN unbegun_expiries int NOT NULL DEFAULT 0;
ALTER TABLE durable.task_history ADD COLUMN unbegun_expiries int NOT NULL DEFAULT 0;
-- history is LIKE live_tasks, which copies no default
ALTER TABLE durable.task_history ALTER COLUMN unbegun_expiries DROP DEFAULT;
COMMENT ON COLUMN durable.live_tasks.began_at IS 'when the worker last said it began the task (durable_begin); a lease that runs out before its task began gives its attempt back';
COMMENT ON COLUMN durable.live_tasks.unbegun_expiries IS 'how many times the task''s lease ran out before it began (its attempt given back each time, at most 10 times)';

--
-- durable.status names the version of the library a session runs: during
-- an upgrade without an outage, the new version's, beside the preloaded
-- library of the version before (docs/design.md section 14).
--
DROP VIEW durable.status;
DROP FUNCTION durable.library_status();
