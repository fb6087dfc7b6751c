/* durable--0.1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION durable" to load this file. \quit

CREATE SCHEMA durable;
COMMENT ON SCHEMA durable IS 'durable''s tables, views and internal functions; change state only through the durable_* API';
REVOKE ALL ON SCHEMA durable FROM PUBLIC;

--
-- Pure decision functions (DESIGN section 3).  Same evidence, same decision:
-- the reconciler and durable_fail call the same C code.
--
CREATE FUNCTION @extschema@.durable_retry_delay(activity_id text, attempt int,
                                                base int DEFAULT 2, cap int DEFAULT 60)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_retry_delay'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.durable_retry_delay(text, int, int, int) IS
  'seconds before the given attempt: min(cap, base * 2^(attempt-1)) with stable SHA-256 jitter in [50%, 100%]';

CREATE FUNCTION @extschema@.durable_next_action(attempts int, max_attempts int,
                                                elapsed interval, deadline interval,
                                                error_class text,
                                                next_delay interval DEFAULT '0')
RETURNS text
AS 'MODULE_PATHNAME', 'durable_next_action'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.durable_next_action(int, int, interval, interval, text, interval) IS
  'retry budget after a failed attempt: schedule_retry, fail_permanent, manual_review, deadline_exceeded or attempts_exhausted';

CREATE FUNCTION @extschema@.durable_recovery_action(lease_expired bool, receipt text,
                                                    retry_safe bool, attempts int,
                                                    max_attempts int,
                                                    queryable bool DEFAULT false)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_recovery_action'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.durable_recovery_action(bool, text, bool, int, int, bool) IS
  'recovery of an expired or questioned activity: wait, record_completion, record_failure, reconcile, manual_review, exhausted or retry_same_activity';

CREATE FUNCTION @extschema@.durable_request_hash(request jsonb)
RETURNS bytea
AS 'MODULE_PATHNAME', 'durable_request_hash'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.durable_request_hash(jsonb) IS
  'SHA-256 of the canonical text of a request; key order and white space never change it';

CREATE FUNCTION @extschema@.durable_idempotency_key(VARIADIC parts text[])
RETURNS text
AS 'MODULE_PATHNAME', 'durable_idempotency_key'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.durable_idempotency_key(text[]) IS
  'stable idempotency key of a logical operation: hex SHA-256 over its length-prefixed parts';

--
-- Roles (DESIGN section 9).  Roles are cluster-wide, so a second database
-- installing durable finds them already there.
--
DO $roles$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['durable_producer', 'durable_worker', 'durable_operator'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) r) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END
$roles$;

--
-- Tables.  Every key leads with partition_key, the routing column of a
-- distributed deployment (DESIGN section 11): a task id carries its
-- partition in its low 15 bits, so a fenced write finds its row, its shard and
-- its events from the task id alone.  Ids come from the transaction that
-- inserts them, never from a column default.
--
CREATE TYPE durable.task_state AS ENUM
    ('created', 'ready', 'running', 'waiting', 'completed', 'failed', 'cancelled', 'needs_review');
COMMENT ON TYPE durable.task_state IS 'task states; completed, failed and cancelled are terminal';

CREATE TYPE durable.activity_class AS ENUM ('pure', 'idempotent', 'queryable', 'unsafe');
COMMENT ON TYPE durable.activity_class IS 'how an activity may be recovered: pure and idempotent ones are retry safe, queryable ones are looked up first, unsafe ones go to manual review';

CREATE TABLE durable.queues (
    queue_name        text PRIMARY KEY,
    partition_base    int NOT NULL,
    partitions        int NOT NULL,
    lease             interval NOT NULL,
    max_attempts      int NOT NULL,
    retry_base        int NOT NULL,
    retry_cap         int NOT NULL,
    deadline          interval,
    retry_capacity    int,
    retry_refill_rate float8 NOT NULL,
    retry_tokens      float8 NOT NULL,
    retry_tokens_at   timestamptz NOT NULL,
    progress_timeout  interval,
    notify            bool NOT NULL,
    paused            bool NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL
);
COMMENT ON TABLE durable.queues IS 'queue settings; change them with durable_create_queue, durable_alter_queue, durable_pause and durable_resume';

-- the node-local part of task ids; durable.node_id keeps nodes apart
CREATE SEQUENCE durable.task_seq AS bigint MAXVALUE 1099511627775 NO CYCLE;  -- 2^40 - 1

CREATE TABLE durable.tasks (
    partition_key      int NOT NULL,
    task_id            bigint NOT NULL,
    state              durable.task_state NOT NULL,
    class              durable.activity_class NOT NULL,
    priority           int NOT NULL,
    attempt            int NOT NULL DEFAULT 0,
    max_attempts       int NOT NULL,
    version            int NOT NULL DEFAULT 1,
    fence              bigint NOT NULL DEFAULT 0,
    run_at             timestamptz NOT NULL,
    created_at         timestamptz NOT NULL,
    lease_until        timestamptz,
    heartbeat_at       timestamptz,
    progress_at        timestamptz,
    stuck_alarm_at     timestamptz,
    finished_at        timestamptz,
    lease              interval,
    deadline           interval,
    queue_name         text NOT NULL,
    owner              text,
    progress           text,
    stop_code          text,
    idempotency_key    text,
    request_hash       bytea,
    workflow_version   text,
    payload            jsonb NOT NULL,
    result             jsonb,
    last_error         jsonb,
    checkpoint         jsonb,
    checkpoint_version int NOT NULL DEFAULT 0,
    steps_in_doubt     int NOT NULL DEFAULT 0,
    metadata           jsonb,
    PRIMARY KEY (partition_key, task_id)
) WITH (fillfactor = 80);
COMMENT ON TABLE durable.tasks IS 'one row per task; version counts its events, fence its leases, owner is the worker that holds or last held it';

-- ready and waiting work, in claim order
CREATE INDEX tasks_claimable ON durable.tasks
    (partition_key, queue_name, priority DESC, run_at, task_id)
    WHERE state IN ('ready', 'waiting');
-- leases in expiry order, for the reconciler
CREATE INDEX tasks_leased ON durable.tasks (partition_key, lease_until)
    WHERE state = 'running';
-- enqueue idempotency: the key's partition comes from its hash, so
-- uniqueness per partition is uniqueness per queue
CREATE UNIQUE INDEX tasks_idempotency ON durable.tasks (partition_key, queue_name, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE durable.events (
    partition_key int NOT NULL,
    task_id       bigint NOT NULL,
    seq           int NOT NULL,
    state         durable.task_state NOT NULL,
    fence         bigint NOT NULL,
    at            timestamptz NOT NULL,
    kind          text NOT NULL,
    actor         text,
    detail        jsonb,
    step          text,
    PRIMARY KEY (partition_key, task_id, seq)
);
COMMENT ON TABLE durable.events IS 'append-only history: one row per change of a task, with the state and fence it left; seq is the task''s version after the change';

-- finished tasks in the order retention removes them
CREATE INDEX tasks_finished ON durable.tasks (partition_key, finished_at)
    WHERE finished_at IS NOT NULL;
-- tasks whose queryable step waits for a reconcile handler
CREATE INDEX tasks_reconcile ON durable.tasks (partition_key, queue_name)
    WHERE state = 'waiting' AND run_at = 'infinity';

CREATE TYPE durable.step_state AS ENUM
    ('planned', 'started', 'committed', 'failed', 'unknown', 'compensated');
COMMENT ON TYPE durable.step_state IS 'step states; see durable.step_transitions for the allowed moves';

CREATE TABLE durable.steps (
    partition_key   int NOT NULL,
    task_id         bigint NOT NULL,
    step            text NOT NULL,
    state           durable.step_state NOT NULL,
    class           durable.activity_class NOT NULL,
    version         int NOT NULL DEFAULT 1,
    attempt         int NOT NULL DEFAULT 0,
    ordinal         int NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    idempotency_key text NOT NULL,
    request_hash    bytea NOT NULL,
    compensates     text,
    receipt         text,
    effect_id       text,
    error_class     text,
    request         jsonb,
    result          jsonb,
    evidence        jsonb,
    error           jsonb,
    PRIMARY KEY (partition_key, task_id, step)
);
COMMENT ON TABLE durable.steps IS 'the side-effecting steps of tasks: one row per step, moved by compare-and-swap on version; ordinal orders them (the task version that planned them)';

-- the state machine of steps, for reading; the C code holds the same table
CREATE VIEW durable.step_transitions (from_state, to_state) AS
VALUES ('planned'::durable.step_state, 'started'::durable.step_state),
       ('started', 'committed'), ('started', 'failed'), ('started', 'unknown'),
       ('started', 'planned'),
       ('unknown', 'committed'), ('unknown', 'planned'), ('unknown', 'failed'),
       ('committed', 'compensated');
COMMENT ON VIEW durable.step_transitions IS 'every allowed step transition; any other raises 55U04';

CREATE TABLE durable.inbox (
    partition_key int NOT NULL,
    consumer      text NOT NULL,
    message_id    text NOT NULL,
    payload_hash  bytea,
    received_at   timestamptz NOT NULL,
    PRIMARY KEY (partition_key, consumer, message_id)
);
CREATE INDEX inbox_received ON durable.inbox (received_at);
COMMENT ON TABLE durable.inbox IS 'messages a consumer has received, for deduplication; the partition comes from a hash of consumer and message id';

CREATE SEQUENCE durable.outbox_seq AS bigint MAXVALUE 1099511627775 NO CYCLE;
CREATE SEQUENCE durable.outbox_fence_seq AS bigint;

CREATE TABLE durable.outbox (
    partition_key int NOT NULL,
    message_id    bigint NOT NULL,
    fence         bigint NOT NULL DEFAULT 0,
    attempt       int NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL,
    lease_until   timestamptz,
    published_at  timestamptz,
    topic         text NOT NULL,
    key           text,
    publisher     text,
    payload       jsonb NOT NULL,
    PRIMARY KEY (partition_key, message_id)
);
COMMENT ON TABLE durable.outbox IS 'messages emitted in business transactions, published at least once by fenced publishers';
CREATE INDEX outbox_unpublished ON durable.outbox (message_id) WHERE published_at IS NULL;
CREATE INDEX outbox_published ON durable.outbox (published_at) WHERE published_at IS NOT NULL;

CREATE TABLE durable.idempotency_keys (
    partition_key  int NOT NULL,
    scope          text NOT NULL,
    key            text NOT NULL,
    request_hash   bytea NOT NULL,
    completed      bool NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL,
    locked_until   timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    recovery_point text NOT NULL,
    response       jsonb,
    PRIMARY KEY (partition_key, scope, key)
);
CREATE INDEX idempotency_keys_expiry ON durable.idempotency_keys (expires_at);
COMMENT ON TABLE durable.idempotency_keys IS 'request-level idempotency keys (begin/finish), bound to the hash of their request until they expire';

SELECT pg_catalog.pg_extension_config_dump('durable.queues', '');
SELECT pg_catalog.pg_extension_config_dump('durable.tasks', '');
SELECT pg_catalog.pg_extension_config_dump('durable.events', '');
SELECT pg_catalog.pg_extension_config_dump('durable.task_seq', '');
SELECT pg_catalog.pg_extension_config_dump('durable.steps', '');
SELECT pg_catalog.pg_extension_config_dump('durable.inbox', '');
SELECT pg_catalog.pg_extension_config_dump('durable.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('durable.outbox_seq', '');
SELECT pg_catalog.pg_extension_config_dump('durable.outbox_fence_seq', '');
SELECT pg_catalog.pg_extension_config_dump('durable.idempotency_keys', '');

REVOKE ALL ON ALL TABLES IN SCHEMA durable FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA durable FROM PUBLIC;
GRANT USAGE ON SCHEMA durable TO durable_operator;
GRANT SELECT ON durable.queues, durable.tasks, durable.events, durable.steps,
    durable.step_transitions, durable.inbox, durable.outbox, durable.idempotency_keys
    TO durable_operator;

--
-- The API.  Every function that changes state runs with definer rights and
-- a pinned search_path; the C code schema-qualifies every name it uses.
--
CREATE FUNCTION @extschema@.durable_create_queue(
    queue text,
    lease interval DEFAULT '30 seconds',
    max_attempts int DEFAULT 3,
    retry_base int DEFAULT 2,
    retry_cap int DEFAULT 60,
    deadline interval DEFAULT NULL,
    retry_capacity int DEFAULT NULL,
    retry_refill_rate float8 DEFAULT 10,
    progress_timeout interval DEFAULT NULL,
    partitions int DEFAULT 1,
    notify bool DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_create_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_create_queue(text, interval, int, int, int, interval, int, float8, interval, int, bool) IS
  'create a queue: default lease, retry budget, retry-token bucket (NULL capacity = unlimited), stuck-alarm timeout, partitions, and whether enqueues NOTIFY durable_ready';

CREATE FUNCTION @extschema@.durable_alter_queue(
    queue text,
    lease interval DEFAULT NULL,
    max_attempts int DEFAULT NULL,
    retry_base int DEFAULT NULL,
    retry_cap int DEFAULT NULL,
    deadline interval DEFAULT NULL,
    retry_capacity int DEFAULT NULL,
    retry_refill_rate float8 DEFAULT NULL,
    progress_timeout interval DEFAULT NULL,
    notify bool DEFAULT NULL,
    clear text[] DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_alter_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_alter_queue(text, interval, int, int, int, interval, int, float8, interval, bool, text[]) IS
  'change queue settings; NULL keeps a setting, clear => ARRAY[''deadline'', ''retry_capacity'', ''progress_timeout''] removes optional ones';

CREATE FUNCTION @extschema@.durable_drop_queue(queue text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_drop_queue'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_drop_queue(text) IS
  'drop a queue with its finished tasks and their events; refused while any task is unfinished';

CREATE FUNCTION @extschema@.durable_pause(queue text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_pause'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_pause(text) IS
  'stop claims from a queue; enqueues, running tasks and the reconciler go on';

CREATE FUNCTION @extschema@.durable_resume(queue text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_resume'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_resume(text) IS 'let claims take from a paused queue again';

CREATE FUNCTION @extschema@.durable_enqueue(
    queue text,
    payload jsonb DEFAULT '{}',
    idempotency_key text DEFAULT NULL,
    run_at timestamptz DEFAULT NULL,
    priority int DEFAULT 0,
    class text DEFAULT 'idempotent',
    max_attempts int DEFAULT NULL,
    deadline interval DEFAULT NULL,
    workflow_version text DEFAULT NULL,
    metadata jsonb DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'durable_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_enqueue(text, jsonb, text, timestamptz, int, text, int, interval, text, jsonb) IS
  'add a task; the same idempotency key with the same payload returns the first task id, with another payload raises 55U03';

CREATE FUNCTION @extschema@.durable_claim(
    queue text,
    worker text,
    lease interval DEFAULT NULL,
    batch int DEFAULT 1)
RETURNS TABLE (task_id bigint, fence bigint, lease_until timestamptz, attempt int,
               payload jsonb, checkpoint jsonb)
AS 'MODULE_PATHNAME', 'durable_claim'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_claim(text, text, interval, int) IS
  'lease up to batch ready tasks whose time has come, highest priority first, skipping locked ones; each claim increments the fence';

CREATE FUNCTION @extschema@.durable_heartbeat(
    task_id bigint,
    fence bigint,
    progress text DEFAULT NULL,
    lease interval DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'durable_heartbeat'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_heartbeat(bigint, bigint, text, interval) IS
  'extend the lease of a running task and record its progress; returns the new lease end';

CREATE FUNCTION @extschema@.durable_commit(
    task_id bigint,
    fence bigint,
    result jsonb DEFAULT NULL,
    step text DEFAULT NULL,
    expected_version int DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_commit'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_commit(bigint, bigint, jsonb, text, int) IS
  'with a step: commit that step (compare-and-swap on its version); without: complete the task, refused while a step is started or unknown';

CREATE FUNCTION @extschema@.durable_commit_and_claim(
    task_id bigint,
    fence bigint,
    result jsonb DEFAULT NULL,
    worker text DEFAULT NULL,
    lease interval DEFAULT NULL,
    batch int DEFAULT 1)
RETURNS TABLE (task_id bigint, fence bigint, lease_until timestamptz, attempt int,
               payload jsonb, checkpoint jsonb)
AS 'MODULE_PATHNAME', 'durable_commit_and_claim'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_commit_and_claim(bigint, bigint, jsonb, text, interval, int) IS
  'complete a task and claim the next ones of its queue in the same transaction: one commit per task';

CREATE FUNCTION @extschema@.durable_commit_batch(task_ids bigint[], fences bigint[],
                                                 results jsonb[] DEFAULT NULL)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_commit_batch'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_commit_batch(bigint[], bigint[], jsonb[]) IS
  'complete many running tasks, each under its own fence, in one statement; all or none';

CREATE FUNCTION @extschema@.durable_fail(
    task_id bigint,
    fence bigint,
    error_class text,
    error jsonb DEFAULT NULL,
    retry_after interval DEFAULT NULL,
    step text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_fail'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_fail(bigint, bigint, text, jsonb, interval, text) IS
  'report a failed attempt of the task or of one of its started steps; applies and returns the decision of durable_next_action';

CREATE FUNCTION @extschema@.durable_cancel(task_id bigint, reason text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_cancel'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_cancel(bigint, text) IS
  'cancel an unfinished task; a running one loses its lease (its fence is incremented)';

CREATE FUNCTION @extschema@.durable_reconcile(batch int DEFAULT 1000)
RETURNS TABLE (task_id bigint, action text)
AS 'MODULE_PATHNAME', 'durable_reconcile'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_reconcile(int) IS
  'settle up to batch expired leases through durable_recovery_action; what the reconciler runs every tick';

--
-- Steps (see step.c for the state machine)
--
CREATE FUNCTION @extschema@.durable_step(
    task_id bigint,
    fence bigint,
    step text,
    class text,
    request jsonb DEFAULT NULL,
    target text DEFAULT NULL)
RETURNS TABLE (state text, version int, attempt int, idempotency_key text,
               result jsonb, receipt text)
AS 'MODULE_PATHNAME', 'durable_step'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_step(bigint, bigint, text, text, jsonb, text) IS
  'plan a step with its class and stable idempotency key, or return it as it is (a committed step returns its result)';

CREATE FUNCTION @extschema@.durable_step_start(task_id bigint, fence bigint, step text,
                                               expected_version int)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_step_start'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_step_start(bigint, bigint, text, int) IS
  'move a planned step to started (a new attempt) before its external call; returns its new version';

CREATE FUNCTION @extschema@.durable_step_unknown(task_id bigint, fence bigint, step text,
                                                 expected_version int, reason text DEFAULT NULL)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_step_unknown'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_step_unknown(bigint, bigint, text, int, text) IS
  'the external call timed out: the step''s outcome is unknown (never failed)';

CREATE FUNCTION @extschema@.durable_record_receipt(
    task_id bigint,
    fence bigint,
    step text,
    receipt text,
    effect_id text DEFAULT NULL,
    evidence jsonb DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_record_receipt'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_record_receipt(bigint, bigint, text, text, text, jsonb) IS
  'record external evidence (succeeded, failed_permanent, not_executed) for a started or unknown step; settles an unknown one';

CREATE FUNCTION @extschema@.durable_claim_reconcile(
    queue text,
    worker text,
    lease interval DEFAULT NULL,
    batch int DEFAULT 1)
RETURNS TABLE (task_id bigint, fence bigint, lease_until timestamptz, step text,
               idempotency_key text, request jsonb)
AS 'MODULE_PATHNAME', 'durable_claim_reconcile'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_claim_reconcile(text, text, interval, int) IS
  'lease tasks whose queryable step''s outcome is unknown to a reconcile handler, which looks it up and records a receipt';

CREATE FUNCTION @extschema@.durable_checkpoint(task_id bigint, fence bigint,
                                               checkpoint jsonb, expected_version int)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_checkpoint'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_checkpoint(bigint, bigint, jsonb, int) IS
  'save the task''s checkpoint by compare-and-swap on its checkpoint version; returns the new version';

CREATE FUNCTION @extschema@.durable_compensate(task_id bigint, fence bigint)
RETURNS TABLE (step text, compensates text, state text, version int, idempotency_key text)
AS 'MODULE_PATHNAME', 'durable_compensate'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_compensate(bigint, bigint) IS
  'plan an idempotent compensation step for each committed step, newest first; calling it again plans nothing new';

--
-- Inbox, outbox and request-level idempotency
--
CREATE FUNCTION @extschema@.durable_inbox_receive(consumer text, message_id text,
                                                  payload jsonb DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'durable_inbox_receive'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_inbox_receive(text, text, jsonb) IS
  'true the first time a consumer receives a message, false for a duplicate; 55U03 for the same id with another payload';

CREATE FUNCTION @extschema@.durable_outbox_emit(topic text, payload jsonb, key text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'durable_outbox_emit'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_outbox_emit(text, jsonb, text) IS
  'emit a message in the caller''s transaction; NOTIFY durable_outbox at commit';

CREATE FUNCTION @extschema@.durable_outbox_claim(publisher text, batch int DEFAULT 100,
                                                 lease interval DEFAULT '30 seconds')
RETURNS TABLE (message_id bigint, fence bigint, topic text, key text, payload jsonb, attempt int)
AS 'MODULE_PATHNAME', 'durable_outbox_claim'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_outbox_claim(text, int, interval) IS
  'lease a batch of unpublished messages under one new fence';

CREATE FUNCTION @extschema@.durable_outbox_ack(message_ids bigint[], fence bigint)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_outbox_ack'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_outbox_ack(bigint[], bigint) IS
  'mark messages published while they are still held under the fence';

CREATE FUNCTION @extschema@.durable_idempotent_begin(scope text, key text, request jsonb,
                                                     lock interval DEFAULT '1 minute')
RETURNS TABLE (status text, recovery_point text, response jsonb)
AS 'MODULE_PATHNAME', 'durable_idempotent_begin'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_idempotent_begin(text, text, jsonb, interval) IS
  'begin a request under an idempotency key: started, in_progress or completed (with the stored response)';

CREATE FUNCTION @extschema@.durable_idempotent_advance(scope text, key text, recovery_point text,
                                                       lock interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_idempotent_advance'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_idempotent_advance(text, text, text, interval) IS
  'record the recovery point a request has reached';

CREATE FUNCTION @extschema@.durable_idempotent_finish(scope text, key text, response jsonb,
                                                      retention interval DEFAULT '24 hours')
RETURNS void
AS 'MODULE_PATHNAME', 'durable_idempotent_finish'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_idempotent_finish(text, text, jsonb, interval) IS
  'store the response of a request; later begins get it back until the retention has passed';

--
-- Operations
--
CREATE FUNCTION @extschema@.durable_resolve(task_id bigint, decision text, operator text,
                                            evidence jsonb)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_resolve'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_resolve(bigint, text, text, jsonb) IS
  'settle a task in review: mark_committed, mark_not_executed, mark_failed, retry or cancel; records operator and evidence first';

CREATE FUNCTION @extschema@.durable_replay_dead_letters(queue text, batch int DEFAULT 10)
RETURNS TABLE (task_id bigint, action text)
AS 'MODULE_PATHNAME', 'durable_replay_dead_letters'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_replay_dead_letters(text, int) IS
  'give up to batch failed tasks of a queue (none of whose steps failed) a new run, resuming after their committed steps';

CREATE FUNCTION @extschema@.durable_recovery_package(task_id bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t durable.tasks;
    doubt durable.steps;
    package jsonb;
    recommended jsonb;
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION 'task_id must not be null' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO t FROM durable.tasks x
    WHERE x.partition_key = ($1 & 32767)::int AND x.task_id = $1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task % does not exist', $1 USING ERRCODE = '42704';
    END IF;
    SELECT * INTO doubt FROM durable.steps s
    WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
      AND s.state IN ('started', 'unknown')
    ORDER BY s.ordinal DESC LIMIT 1;

    recommended := CASE
        WHEN t.state = 'needs_review' AND doubt.step IS NOT NULL THEN jsonb_build_object(
            'action', 'resolve',
            'reason', format('the outcome of %s step %s is unknown: ask the external system about idempotency key %s, then durable_resolve(%s, ''mark_committed'' or ''mark_not_executed'', ...)',
                             doubt.class, doubt.step, doubt.idempotency_key, t.task_id))
        WHEN t.state = 'needs_review' THEN jsonb_build_object(
            'action', 'resolve',
            'reason', format('the %s task cannot be recovered automatically: durable_resolve(%s, ''retry'', ''cancel'' or a mark, ...)',
                             t.class, t.task_id))
        WHEN t.state = 'running' THEN jsonb_build_object(
            'action', @extschema@.durable_recovery_action(
                t.lease_until < now(), doubt.receipt,
                coalesce(doubt.class, t.class) IN ('pure', 'idempotent'),
                coalesce(doubt.attempt, t.attempt), t.max_attempts,
                coalesce(doubt.class, t.class) = 'queryable'),
            'reason', CASE WHEN t.lease_until < now() THEN 'the lease has expired' ELSE 'the lease is live' END)
        WHEN t.state = 'failed' THEN jsonb_build_object(
            'action', 'replay or leave',
            'reason', format('the task failed (%s); durable_replay_dead_letters() gives it a new run', t.stop_code))
        WHEN t.state = 'waiting' AND t.run_at = 'infinity' THEN jsonb_build_object(
            'action', 'reconcile',
            'reason', 'a reconcile handler is to look up the step''s outcome (durable_claim_reconcile)')
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
COMMENT ON FUNCTION @extschema@.durable_recovery_package(bigint) IS
  'everything an operator needs to decide about a task: the task, its checkpoint, event history, operation ids, idempotency keys, confirmed and unknown side effects, and the recommended next action';

CREATE FUNCTION @extschema@.durable_verify()
RETURNS TABLE (task_id bigint, problem text)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    -- a task's row against the history its events tell
    WITH history AS (
        SELECT e.partition_key, e.task_id, count(*) AS events, max(e.seq) AS last_seq,
               (array_agg(e.state ORDER BY e.seq DESC))[1] AS state,
               (array_agg(e.fence ORDER BY e.seq DESC))[1] AS fence
        FROM durable.events e GROUP BY e.partition_key, e.task_id
    ), step_history AS (
        SELECT e.partition_key, e.task_id, e.step,
               (array_agg(coalesce(e.detail->>'to', 'planned') ORDER BY e.seq DESC))[1] AS state
        FROM durable.events e WHERE e.step IS NOT NULL
        GROUP BY e.partition_key, e.task_id, e.step
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
    SELECT h.task_id, 'events of a task that does not exist'
    FROM history h LEFT JOIN durable.tasks t USING (partition_key, task_id)
    WHERE t.task_id IS NULL
    ORDER BY 1, 2
$$;
COMMENT ON FUNCTION @extschema@.durable_verify() IS
  'rebuild every task''s state, fence and version, and every step''s state, from the event log, and report each row that disagrees';

--
-- Metrics views (DESIGN section 7)
--
CREATE VIEW durable.queue_stats AS
SELECT q.queue_name, q.paused,
       count(t.task_id) FILTER (WHERE t.state = 'ready') AS ready,
       count(t.task_id) FILTER (WHERE t.state = 'waiting') AS waiting,
       count(t.task_id) FILTER (WHERE t.state = 'running') AS running,
       count(t.task_id) FILTER (WHERE t.state = 'needs_review') AS needs_review,
       count(t.task_id) FILTER (WHERE t.state = 'completed') AS completed,
       count(t.task_id) FILTER (WHERE t.state = 'failed') AS failed,
       count(t.task_id) FILTER (WHERE t.state = 'cancelled') AS cancelled,
       now() - min(t.run_at) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now()) AS oldest_due_age,
       now() - min(t.heartbeat_at) FILTER (WHERE t.state = 'running') AS oldest_heartbeat_age,
       count(t.task_id) FILTER (WHERE t.state = 'running' AND t.lease_until < now()) AS expired_leases,
       count(t.task_id) FILTER (WHERE t.state = 'running' AND q.progress_timeout IS NOT NULL
                                  AND t.progress_at < now() - q.progress_timeout) AS stuck
FROM durable.queues q
LEFT JOIN durable.tasks t ON t.queue_name = q.queue_name
GROUP BY q.queue_name, q.paused;
COMMENT ON VIEW durable.queue_stats IS 'per queue: tasks by state, the oldest due and running work, expired leases and stuck tasks';

CREATE VIEW durable.stuck_tasks AS
SELECT t.task_id, t.queue_name, t.owner, t.progress, t.progress_at,
       now() - t.progress_at AS without_progress_for, q.progress_timeout,
       t.stuck_alarm_at IS NOT NULL AND t.stuck_alarm_at >= t.progress_at AS alarmed
FROM durable.tasks t JOIN durable.queues q ON q.queue_name = t.queue_name
WHERE t.state = 'running' AND q.progress_timeout IS NOT NULL
  AND t.progress_at < now() - q.progress_timeout;
COMMENT ON VIEW durable.stuck_tasks IS 'running tasks whose lease is renewed while their progress has not moved for longer than the queue''s progress_timeout';

CREATE VIEW durable.review_queue AS
SELECT t.task_id, t.queue_name, t.class, t.attempt, t.owner AS last_owner,
       s.step, s.class AS step_class, s.state AS step_state, s.idempotency_key, s.receipt,
       e.at AS since, e.kind AS reason, e.detail->>'action' AS decided
FROM durable.tasks t
LEFT JOIN LATERAL (SELECT * FROM durable.steps s
                   WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
                     AND s.state IN ('started', 'unknown')
                   ORDER BY s.ordinal DESC LIMIT 1) s ON true
LEFT JOIN LATERAL (SELECT * FROM durable.events e
                   WHERE e.partition_key = t.partition_key AND e.task_id = t.task_id
                     AND e.state = 'needs_review'
                   ORDER BY e.seq DESC LIMIT 1) e ON true
WHERE t.state = 'needs_review';
COMMENT ON VIEW durable.review_queue IS 'tasks waiting for a person, with the step in doubt and why they are here; settle them with durable_resolve()';

CREATE VIEW durable.metrics AS
WITH per_task AS (
    SELECT t.queue_name, t.partition_key, t.task_id, t.state,
           count(*) FILTER (WHERE e.kind = 'claimed') AS claims,
           min(e.at) FILTER (WHERE e.kind = 'lease_expired') AS first_expiry,
           min(e.at) FILTER (WHERE e.kind = 'completed') AS completed_at,
           bool_or(e.state = 'needs_review') AS escalated
    FROM durable.tasks t
    JOIN durable.events e ON e.partition_key = t.partition_key AND e.task_id = t.task_id
    GROUP BY t.queue_name, t.partition_key, t.task_id, t.state
), effects AS (
    SELECT t.queue_name, count(*) AS duplicate_side_effects
    FROM (SELECT e.partition_key, e.task_id, e.step
          FROM durable.events e
          WHERE e.kind = 'receipt_recorded' AND e.detail->>'effect_id' IS NOT NULL
          GROUP BY e.partition_key, e.task_id, e.step
          HAVING count(DISTINCT e.detail->>'effect_id') > 1) d
    JOIN durable.tasks t USING (partition_key, task_id)
    GROUP BY t.queue_name
), outcomes AS (
    SELECT t.queue_name,
           count(*) FILTER (WHERE s.state = 'unknown'
                              OR (s.state = 'started' AND t.state <> 'running')) AS ambiguous,
           count(*) AS steps
    FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id)
    GROUP BY t.queue_name
), lag AS (
    SELECT t.queue_name, now() - min(t.lease_until) AS reconciliation_lag
    FROM durable.tasks t WHERE t.state = 'running' AND t.lease_until < now()
    GROUP BY t.queue_name
)
SELECT q.queue_name,
       count(p.task_id) AS tasks,
       coalesce(max(f.duplicate_side_effects), 0) AS duplicate_side_effects,
       count(p.task_id) FILTER (WHERE p.first_expiry IS NOT NULL) AS recoveries,
       round(avg((p.state = 'completed')::int) FILTER (WHERE p.first_expiry IS NOT NULL), 3) AS recovery_success_rate,
       avg(p.completed_at - p.first_expiry) FILTER (WHERE p.first_expiry IS NOT NULL AND p.completed_at IS NOT NULL) AS mean_recovery_time,
       round(max(o.ambiguous)::numeric / nullif(max(o.steps), 0), 3) AS ambiguous_outcome_rate,
       round(avg(p.escalated::int), 3) AS human_escalation_rate,
       round(avg(p.claims), 3) AS claims_per_task,
       coalesce(max(l.reconciliation_lag), '0') AS reconciliation_lag
FROM durable.queues q
LEFT JOIN per_task p ON p.queue_name = q.queue_name
LEFT JOIN effects f ON f.queue_name = q.queue_name
LEFT JOIN outcomes o ON o.queue_name = q.queue_name
LEFT JOIN lag l ON l.queue_name = q.queue_name
GROUP BY q.queue_name;
COMMENT ON VIEW durable.metrics IS 'per queue, over the tasks retained: duplicate side effects, recovery success rate and mean time, ambiguous outcome rate, human escalation rate, claims per task, reconciliation lag';

GRANT SELECT ON durable.queue_stats, durable.stuck_tasks, durable.review_queue, durable.metrics
    TO durable_operator, pg_monitor;

REVOKE EXECUTE ON FUNCTION
    @extschema@.durable_create_queue(text, interval, int, int, int, interval, int, float8, interval, int, bool),
    @extschema@.durable_alter_queue(text, interval, int, int, int, interval, int, float8, interval, bool, text[]),
    @extschema@.durable_drop_queue(text),
    @extschema@.durable_pause(text),
    @extschema@.durable_resume(text),
    @extschema@.durable_enqueue(text, jsonb, text, timestamptz, int, text, int, interval, text, jsonb),
    @extschema@.durable_claim(text, text, interval, int),
    @extschema@.durable_heartbeat(bigint, bigint, text, interval),
    @extschema@.durable_commit(bigint, bigint, jsonb, text, int),
    @extschema@.durable_commit_and_claim(bigint, bigint, jsonb, text, interval, int),
    @extschema@.durable_commit_batch(bigint[], bigint[], jsonb[]),
    @extschema@.durable_fail(bigint, bigint, text, jsonb, interval, text),
    @extschema@.durable_cancel(bigint, text),
    @extschema@.durable_step(bigint, bigint, text, text, jsonb, text),
    @extschema@.durable_step_start(bigint, bigint, text, int),
    @extschema@.durable_step_unknown(bigint, bigint, text, int, text),
    @extschema@.durable_record_receipt(bigint, bigint, text, text, text, jsonb),
    @extschema@.durable_claim_reconcile(text, text, interval, int),
    @extschema@.durable_checkpoint(bigint, bigint, jsonb, int),
    @extschema@.durable_compensate(bigint, bigint),
    @extschema@.durable_inbox_receive(text, text, jsonb),
    @extschema@.durable_outbox_emit(text, jsonb, text),
    @extschema@.durable_outbox_claim(text, int, interval),
    @extschema@.durable_outbox_ack(bigint[], bigint),
    @extschema@.durable_idempotent_begin(text, text, jsonb, interval),
    @extschema@.durable_idempotent_advance(text, text, text, interval),
    @extschema@.durable_idempotent_finish(text, text, jsonb, interval),
    @extschema@.durable_resolve(bigint, text, text, jsonb),
    @extschema@.durable_replay_dead_letters(text, int),
    @extschema@.durable_recovery_package(bigint),
    @extschema@.durable_verify(),
    @extschema@.durable_reconcile(int)
FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
    @extschema@.durable_enqueue(text, jsonb, text, timestamptz, int, text, int, interval, text, jsonb)
TO durable_producer;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_claim(text, text, interval, int),
    @extschema@.durable_heartbeat(bigint, bigint, text, interval),
    @extschema@.durable_commit(bigint, bigint, jsonb, text, int),
    @extschema@.durable_commit_and_claim(bigint, bigint, jsonb, text, interval, int),
    @extschema@.durable_commit_batch(bigint[], bigint[], jsonb[]),
    @extschema@.durable_fail(bigint, bigint, text, jsonb, interval, text),
    @extschema@.durable_step(bigint, bigint, text, text, jsonb, text),
    @extschema@.durable_step_start(bigint, bigint, text, int),
    @extschema@.durable_step_unknown(bigint, bigint, text, int, text),
    @extschema@.durable_record_receipt(bigint, bigint, text, text, text, jsonb),
    @extschema@.durable_claim_reconcile(text, text, interval, int),
    @extschema@.durable_checkpoint(bigint, bigint, jsonb, int),
    @extschema@.durable_compensate(bigint, bigint),
    @extschema@.durable_inbox_receive(text, text, jsonb),
    @extschema@.durable_outbox_emit(text, jsonb, text),
    @extschema@.durable_outbox_claim(text, int, interval),
    @extschema@.durable_outbox_ack(bigint[], bigint),
    @extschema@.durable_idempotent_begin(text, text, jsonb, interval),
    @extschema@.durable_idempotent_advance(text, text, text, interval),
    @extschema@.durable_idempotent_finish(text, text, jsonb, interval)
TO durable_worker;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_outbox_emit(text, jsonb, text),
    @extschema@.durable_idempotent_begin(text, text, jsonb, interval),
    @extschema@.durable_idempotent_advance(text, text, text, interval),
    @extschema@.durable_idempotent_finish(text, text, jsonb, interval)
TO durable_producer;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_create_queue(text, interval, int, int, int, interval, int, float8, interval, int, bool),
    @extschema@.durable_alter_queue(text, interval, int, int, int, interval, int, float8, interval, bool, text[]),
    @extschema@.durable_drop_queue(text),
    @extschema@.durable_pause(text),
    @extschema@.durable_resume(text),
    @extschema@.durable_cancel(bigint, text),
    @extschema@.durable_resolve(bigint, text, text, jsonb),
    @extschema@.durable_replay_dead_letters(text, int),
    @extschema@.durable_recovery_package(bigint),
    @extschema@.durable_verify(),
    @extschema@.durable_reconcile(int)
TO durable_operator;
