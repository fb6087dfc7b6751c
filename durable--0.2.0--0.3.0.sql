/* durable--0.2.0--0.3.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.3.0'" to load this file. \quit

--
-- Workflows that wait (DESIGN section 12).
--
-- A task's waits are named like its steps and kept with the task: in its
-- row (waits, an object from each wait's name to what it asked and how it
-- ended), so that they move to history with it, come back with a replay
-- and go with retention.  A child records its parent (parent_id); a task
-- may name a concurrency key.  Added at the end: nothing a claim changes is
-- among them, and a NULL costs a bit of the null bitmap.
--
ALTER TABLE durable.live_tasks
    ADD COLUMN parent_id bigint,
    ADD COLUMN concurrency_key text COLLATE "C",
    ADD COLUMN waits jsonb;
ALTER TABLE durable.task_history
    ADD COLUMN parent_id bigint,
    ADD COLUMN concurrency_key text COLLATE "C",
    ADD COLUMN waits jsonb;
COMMENT ON COLUMN durable.live_tasks.parent_id IS 'the task that spawned this one (durable_spawn), if any';
COMMENT ON COLUMN durable.live_tasks.concurrency_key IS 'tasks of one key run at most concurrency_limit of their queue at a time';
COMMENT ON COLUMN durable.live_tasks.waits IS 'the task''s named waits and spawns: name -> {kind, args, status, ...}';

-- a claim in a queue with a concurrency limit counts a key's running
-- tasks, and those ahead in claim order that could be claimed now
CREATE INDEX tasks_concurrency ON durable.live_tasks
    (partition_key, queue_name, concurrency_key, priority DESC, run_at, task_id)
    WHERE state IN ('ready', 'waiting', 'running') AND concurrency_key IS NOT NULL;

ALTER TABLE durable.queues ADD COLUMN concurrency_limit int CHECK (concurrency_limit > 0);
COMMENT ON COLUMN durable.queues.concurrency_limit IS 'the most running tasks of one concurrency key; NULL: no limit';

-- Events that tasks await.  A row exists once an event is emitted, or once
-- a task awaits it: await and emit both take its row lock, so an emit that
-- commits while an await is registered sees the await (no lost wake-up).
CREATE TABLE durable.emitted_events (
    partition_key int NOT NULL,
    event         text COLLATE "C" NOT NULL,
    payload       jsonb,
    payload_hash  bytea,
    emitted_at    timestamptz,          -- NULL: awaited, not yet emitted
    role          text,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (partition_key, event)
);
COMMENT ON TABLE durable.emitted_events IS 'events emitted with durable_emit (first emit wins), and those awaited before anybody emitted them (emitted_at NULL)';
CREATE INDEX emitted_events_emitted_at ON durable.emitted_events (emitted_at);

CREATE TABLE durable.event_waits (
    partition_key int NOT NULL,         -- the event's
    event         text COLLATE "C" NOT NULL,
    task_id       bigint NOT NULL,
    name          text COLLATE "C" NOT NULL,
    PRIMARY KEY (partition_key, event, task_id, name)
);
COMMENT ON TABLE durable.event_waits IS 'the awaits registered for an event not yet emitted; its emit wakes them';
-- a task that finishes drops the awaits it registered
CREATE INDEX event_waits_task ON durable.event_waits (task_id);

-- Schedules: the reconciler enqueues each occurrence once, with an
-- idempotency key made of the schedule's name and the occurrence's time.
CREATE TABLE durable.schedules (
    schedule_name text COLLATE "C" PRIMARY KEY,
    cron          text NOT NULL,
    timezone      text NOT NULL,
    queue_name    text COLLATE "C" NOT NULL,
    payload       jsonb NOT NULL,
    backfill      bool NOT NULL,
    next_run      timestamptz NOT NULL,
    last_run      timestamptz,
    last_task_id  bigint,
    created_at    timestamptz NOT NULL,
    role          text
);
COMMENT ON TABLE durable.schedules IS 'cron schedules (durable_schedule); next_run is the next occurrence the reconciler enqueues';
CREATE INDEX schedules_next_run ON durable.schedules (next_run);

SELECT pg_catalog.pg_extension_config_dump('durable.emitted_events', '');
SELECT pg_catalog.pg_extension_config_dump('durable.event_waits', '');
SELECT pg_catalog.pg_extension_config_dump('durable.schedules', '');
REVOKE ALL ON durable.emitted_events, durable.event_waits, durable.schedules FROM PUBLIC;
GRANT SELECT ON durable.emitted_events, durable.event_waits, durable.schedules TO durable_operator;

-- the view of every task shows the new columns too
CREATE OR REPLACE VIEW durable.tasks AS
SELECT partition_key, task_id, state, class, priority, attempt, max_attempts, version, fence,
       run_at, created_at, lease_until, heartbeat_at, progress_at, stuck_alarm_at, finished_at,
       lease, deadline, queue_name, owner, progress, stop_code, idempotency_key, request_hash,
       workflow_version, payload, result, last_error, checkpoint, checkpoint_version,
       steps_in_doubt, metadata, parent_id, concurrency_key, waits
FROM durable.live_tasks
UNION ALL
SELECT partition_key, task_id, state, class, priority, attempt, max_attempts, version, fence,
       run_at, created_at, lease_until, heartbeat_at, progress_at, stuck_alarm_at, finished_at,
       lease, deadline, queue_name, owner, progress, stop_code, idempotency_key, request_hash,
       workflow_version, payload, result, last_error, checkpoint, checkpoint_version,
       steps_in_doubt, metadata, parent_id, concurrency_key, waits
FROM durable.task_history;

-- what every waiting task waits for
CREATE VIEW durable.waiting_tasks AS
SELECT t.task_id, t.queue_name, w.key AS wait_name, w.value ->> 'kind' AS kind,
       (w.value ->> 'at')::timestamptz AS since,
       (w.value ->> 'until')::timestamptz AS until,
       w.value -> 'args' ->> 'event' AS event,
       t.run_at
FROM durable.live_tasks t, LATERAL jsonb_each(t.waits) w
WHERE t.state = 'waiting' AND t.waits IS NOT NULL
  AND w.value ->> 'status' IN ('sleeping', 'waiting');
COMMENT ON VIEW durable.waiting_tasks IS 'every task parked on a wait (a sleep, an event, its children), what it waits for, since when and until when';

CREATE VIEW durable.wait_stats AS
SELECT queue_name, kind, count(*) AS waiting, now() - min(since) AS oldest_wait,
       count(*) FILTER (WHERE until IS NOT NULL) AS with_timeout
FROM durable.waiting_tasks
GROUP BY queue_name, kind;
COMMENT ON VIEW durable.wait_stats IS 'per queue and kind of wait (sleep, event, join): tasks waiting, the oldest wait''s age, how many have a timeout';

CREATE VIEW durable.schedule_list AS
SELECT schedule_name, cron, timezone, queue_name, payload, backfill, next_run, last_run,
       last_task_id, created_at
FROM durable.schedules;
COMMENT ON VIEW durable.schedule_list IS 'every schedule with its next run and its last occurrence enqueued';
GRANT SELECT ON durable.waiting_tasks, durable.wait_stats, durable.schedule_list
    TO durable_operator, pg_monitor;

--
-- The calls (see wait.c, child.c, schedule.c, cron.c and enqueue.c).
--
CREATE FUNCTION @extschema@.durable_sleep(task_id bigint, fence bigint, name text, until timestamptz)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_sleep_until'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_sleep(bigint, bigint, text, timestamptz) IS
  'a named durable timer: ''sleeping'' the first time (the lease ends, the task waits until then), ''elapsed'' when replayed after it';

CREATE FUNCTION @extschema@.durable_sleep(task_id bigint, fence bigint, name text, duration interval)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_sleep_for'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_sleep(bigint, bigint, text, interval) IS
  'a named durable timer for a duration of database time from its first call';

CREATE FUNCTION @extschema@.durable_emit(event text, payload jsonb DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'durable_emit'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_emit(text, jsonb) IS
  'emit an event in the caller''s transaction and wake its awaits: true the first time, false for the same payload again, 55U03 for another';

CREATE FUNCTION @extschema@.durable_await(task_id bigint, fence bigint, name text, event text,
                                          timeout interval DEFAULT NULL)
RETURNS TABLE (status text, payload jsonb)
AS 'MODULE_PATHNAME', 'durable_await'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_await(bigint, bigint, text, text, interval) IS
  'a named wait for an event: (''received'', payload) once emitted, else (''waiting'', NULL) and the task waits; (''timed_out'', NULL) for ever after the timeout';

CREATE FUNCTION @extschema@.durable_spawn(
    task_id bigint,
    fence bigint,
    name text,
    queue text,
    payload jsonb DEFAULT '{}',
    run_at timestamptz DEFAULT NULL,
    priority int DEFAULT 0,
    class text DEFAULT 'idempotent',
    max_attempts int DEFAULT NULL,
    deadline interval DEFAULT NULL,
    workflow_version text DEFAULT NULL,
    metadata jsonb DEFAULT NULL,
    concurrency_key text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'durable_spawn'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_spawn(bigint, bigint, text, text, jsonb, timestamptz, int, text, int, interval, text, jsonb, text) IS
  'enqueue a child task once per (parent, name); a replay returns the same id';

CREATE FUNCTION @extschema@.durable_join(task_id bigint, fence bigint, name text,
                                         children text[] DEFAULT NULL,
                                         timeout interval DEFAULT NULL)
RETURNS TABLE (status text, children jsonb)
AS 'MODULE_PATHNAME', 'durable_join'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_join(bigint, bigint, text, text[], interval) IS
  'a named wait for children (all when NULL) to finish: (''done'', [{name, task_id, state, result, error}]) or (''waiting'', NULL); (''timed_out'', ...) after the timeout';

CREATE FUNCTION @extschema@.durable_cron_next(cron text, after timestamptz, timezone text DEFAULT 'UTC')
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'durable_cron_next'
LANGUAGE C STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_cron_next(text, timestamptz, text) IS
  'the first time after "after" at which a five-field cron expression fires, read in a time zone';

CREATE FUNCTION @extschema@.durable_schedule(name text, cron text, queue text,
                                             payload jsonb DEFAULT '{}',
                                             timezone text DEFAULT 'UTC',
                                             backfill boolean DEFAULT false)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'durable_schedule'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_schedule(text, text, text, jsonb, text, boolean) IS
  'create or replace a cron schedule; the reconciler enqueues each occurrence once; returns the next run';

CREATE FUNCTION @extschema@.durable_unschedule(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'durable_unschedule'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_unschedule(text) IS
  'remove a schedule; false when there was none';

-- a concurrency key on enqueue
DROP FUNCTION @extschema@.durable_enqueue(text, jsonb, text, timestamptz, int, text, int, interval, text, jsonb);
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
    metadata jsonb DEFAULT NULL,
    concurrency_key text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'durable_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_enqueue(text, jsonb, text, timestamptz, int, text, int, interval, text, jsonb, text) IS
  'add a task; the same idempotency key with the same payload returns the first task id, with another payload raises 55U03';

CREATE FUNCTION @extschema@.durable_enqueue_batch(
    queue text,
    payloads jsonb[],
    idempotency_keys text[] DEFAULT NULL,
    run_at timestamptz DEFAULT NULL,
    priority int DEFAULT 0,
    class text DEFAULT 'idempotent',
    max_attempts int DEFAULT NULL,
    deadline interval DEFAULT NULL,
    workflow_version text DEFAULT NULL,
    metadata jsonb DEFAULT NULL,
    concurrency_keys text[] DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'durable_enqueue_batch'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_enqueue_batch(text, jsonb[], text[], timestamptz, int, text, int, interval, text, jsonb, text[]) IS
  'add many tasks to a queue, all or nothing, each with its own idempotency key (or none); returns their ids in order';

-- a concurrency limit on the queue
DROP FUNCTION @extschema@.durable_create_queue(text, interval, int, int, int, interval, int, float8, interval, int, bool);
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
    notify bool DEFAULT false,
    concurrency_limit int DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_create_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_create_queue(text, interval, int, int, int, interval, int, float8, interval, int, bool, int) IS
  'create a queue: default lease, retry budget, retry-token bucket (NULL capacity = unlimited), stuck-alarm timeout, partitions, whether enqueues NOTIFY durable_ready, and the most running tasks per concurrency key';

DROP FUNCTION @extschema@.durable_alter_queue(text, interval, int, int, int, interval, int, float8, interval, bool, text[]);
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
    clear text[] DEFAULT NULL,
    concurrency_limit int DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_alter_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_alter_queue(text, interval, int, int, int, interval, int, float8, interval, bool, text[], int) IS
  'change queue settings; NULL keeps a setting, clear names the optional ones to remove (deadline, retry_capacity, progress_timeout, concurrency_limit)';

REVOKE EXECUTE ON FUNCTION
    @extschema@.durable_sleep(bigint, bigint, text, timestamptz),
    @extschema@.durable_sleep(bigint, bigint, text, interval),
    @extschema@.durable_emit(text, jsonb),
    @extschema@.durable_await(bigint, bigint, text, text, interval),
    @extschema@.durable_spawn(bigint, bigint, text, text, jsonb, timestamptz, int, text, int, interval, text, jsonb, text),
    @extschema@.durable_join(bigint, bigint, text, text[], interval),
    @extschema@.durable_schedule(text, text, text, jsonb, text, boolean),
    @extschema@.durable_unschedule(text),
    @extschema@.durable_enqueue(text, jsonb, text, timestamptz, int, text, int, interval, text, jsonb, text),
    @extschema@.durable_enqueue_batch(text, jsonb[], text[], timestamptz, int, text, int, interval, text, jsonb, text[]),
    @extschema@.durable_create_queue(text, interval, int, int, int, interval, int, float8, interval, int, bool, int),
    @extschema@.durable_alter_queue(text, interval, int, int, int, interval, int, float8, interval, bool, text[], int)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_enqueue(text, jsonb, text, timestamptz, int, text, int, interval, text, jsonb, text),
    @extschema@.durable_enqueue_batch(text, jsonb[], text[], timestamptz, int, text, int, interval, text, jsonb, text[]),
    @extschema@.durable_emit(text, jsonb)
TO durable_producer;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_sleep(bigint, bigint, text, timestamptz),
    @extschema@.durable_sleep(bigint, bigint, text, interval),
    @extschema@.durable_emit(text, jsonb),
    @extschema@.durable_await(bigint, bigint, text, text, interval),
    @extschema@.durable_spawn(bigint, bigint, text, text, jsonb, timestamptz, int, text, int, interval, text, jsonb, text),
    @extschema@.durable_join(bigint, bigint, text, text[], interval)
TO durable_worker;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_schedule(text, text, text, jsonb, text, boolean),
    @extschema@.durable_unschedule(text),
    @extschema@.durable_create_queue(text, interval, int, int, int, interval, int, float8, interval, int, bool, int),
    @extschema@.durable_alter_queue(text, interval, int, int, int, interval, int, float8, interval, bool, text[], int)
TO durable_operator;

--
-- The recovery package says what a waiting task waits for, and a task
-- parked with run_at infinity awaits a reconcile handler only with a step
-- in doubt (an event or a join without a timeout parks there too).
--
CREATE OR REPLACE FUNCTION @extschema@.durable_recovery_package(task_id bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t durable.tasks;
    doubt text;
    in_doubt bigint;
    package jsonb;
    recommended jsonb;
    pending record;
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION 'task_id must not be null' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO t FROM durable.tasks x
    WHERE x.partition_key = ($1 & 32767)::int AND x.task_id = $1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task % does not exist', $1 USING ERRCODE = '42704';
    END IF;
    SELECT string_agg(format('%s step %s (idempotency key %s)', s.class, s.step, s.idempotency_key),
                      ', ' ORDER BY s.ordinal DESC),
           count(*)
    INTO doubt, in_doubt
    FROM durable.steps s
    WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
      AND s.state IN ('started', 'unknown');

    SELECT w.key AS name, w.value ->> 'kind' AS kind, w.value ->> 'until' AS until,
           w.value -> 'args' ->> 'event' AS event
    INTO pending
    FROM jsonb_each(coalesce(t.waits, '{}')) w
    WHERE w.value ->> 'status' IN ('sleeping', 'waiting');

    recommended := CASE
        WHEN t.state = 'needs_review' AND in_doubt = 1 THEN jsonb_build_object(
            'action', 'resolve',
            'reason', format('the outcome of %s is unknown: ask the external system about it, then durable_resolve(%s, ''mark_committed'' or ''mark_not_executed'', ...)',
                             doubt, t.task_id))
        WHEN t.state = 'needs_review' AND in_doubt > 1 THEN jsonb_build_object(
            'action', 'resolve',
            'reason', format('the outcomes of %s are unknown: ask the external systems about each, then durable_resolve(%s, ''mark_committed'' or ''mark_not_executed'', ..., step => ...) for each',
                             doubt, t.task_id))
        WHEN t.state = 'needs_review' THEN jsonb_build_object(
            'action', 'resolve',
            'reason', format('the %s task cannot be recovered automatically: durable_resolve(%s, ''retry'', ''cancel'' or a mark, ...)',
                             t.class, t.task_id))
        WHEN t.state = 'running' THEN jsonb_build_object(
            'action', durable.recovery_action_of(t.task_id),
            'reason', CASE WHEN t.lease_until < now() THEN 'the lease has expired' ELSE 'the lease is live' END)
        WHEN t.state = 'failed' THEN jsonb_build_object(
            'action', 'replay or leave',
            'reason', format('the task failed (%s); durable_replay_dead_letters() gives it a new run', t.stop_code))
        WHEN t.state = 'waiting' AND pending.name IS NOT NULL THEN jsonb_build_object(
            'action', 'wait',
            'reason', format('the task waits (%s %s)%s: %s', pending.kind, pending.name,
                             coalesce(' until ' || pending.until, ''),
                             CASE pending.kind
                                 WHEN 'sleep' THEN 'its timer wakes it'
                                 WHEN 'event' THEN format('durable_emit(%L, ...) wakes it', pending.event)
                                 ELSE 'the last of its children to finish wakes it' END))
        WHEN t.state = 'waiting' AND t.run_at = 'infinity' AND in_doubt > 0 THEN jsonb_build_object(
            'action', 'reconcile',
            'reason', format('a reconcile handler is to look up the outcome of %s (durable_claim_reconcile)', doubt))
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

--
-- durable_verify() also finds waits that nothing would end, and children
-- their parent does not list.
--
CREATE OR REPLACE FUNCTION @extschema@.durable_verify()
RETURNS TABLE (task_id bigint, problem text)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH history AS (
        SELECT e.partition_key, e.task_id, count(*) AS events, max(e.seq) AS last_seq,
               max(e.at) AS last_at,
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
    SELECT l.task_id, format('task is %s but kept among the live tasks', l.state)
    FROM durable.live_tasks l WHERE l.state IN ('completed', 'failed', 'cancelled')
    UNION ALL
    SELECT a.task_id, format('task is %s but kept in history', a.state)
    FROM durable.task_history a WHERE a.state NOT IN ('completed', 'failed', 'cancelled')
    UNION ALL
    SELECT h.task_id, 'events of a task that does not exist'
    FROM history h LEFT JOIN durable.tasks t USING (partition_key, task_id)
    WHERE t.task_id IS NULL
      AND h.last_at >= coalesce((SELECT removed_before FROM durable.history_horizon), '-infinity')
    UNION ALL
    -- a wait that nothing would end
    SELECT t.task_id, format('awaits event %s but no emit of it would wake the task', w.value -> 'args' ->> 'event')
    FROM durable.live_tasks t, LATERAL jsonb_each(t.waits) w
    WHERE t.state = 'waiting' AND w.value ->> 'kind' = 'event' AND w.value ->> 'status' = 'waiting'
      AND NOT EXISTS (SELECT FROM durable.event_waits ew
                      WHERE ew.task_id = t.task_id AND ew.name = w.key)
      AND NOT EXISTS (SELECT FROM durable.emitted_events ee
                      WHERE ee.event = w.value -> 'args' ->> 'event' AND ee.emitted_at IS NOT NULL)
    UNION ALL
    SELECT t.task_id, 'waits with nothing to wake it: no timer, no wait, no step in doubt'
    FROM durable.live_tasks t
    WHERE t.state = 'waiting' AND t.run_at = 'infinity' AND t.steps_in_doubt = 0
      AND NOT EXISTS (SELECT FROM jsonb_each(coalesce(t.waits, '{}')) w
                      WHERE w.value ->> 'status' = 'waiting')
    UNION ALL
    SELECT ew.task_id, format('an await of event %s is registered for a task that is not live', ew.event)
    FROM durable.event_waits ew
    WHERE NOT EXISTS (SELECT FROM durable.live_tasks t
                      WHERE t.partition_key = (ew.task_id & 32767)::int AND t.task_id = ew.task_id)
    UNION ALL
    SELECT c.task_id, format('child of task %s, which does not list it', c.parent_id)
    FROM durable.tasks c JOIN durable.tasks p
      ON p.partition_key = (c.parent_id & 32767)::int AND p.task_id = c.parent_id
    WHERE c.parent_id IS NOT NULL
      AND NOT EXISTS (SELECT FROM jsonb_each(coalesce(p.waits, '{}')) w
                      WHERE w.value ->> 'kind' = 'spawn' AND (w.value ->> 'task_id')::bigint = c.task_id)
    ORDER BY 1, 2
$$;

--
-- History is maintained by one reconciler at a time: two at once could
-- both set out to make today's partitions, and the second failed its tick
-- on a relation that the first had just made.
--
CREATE OR REPLACE FUNCTION durable.maintain_history(now timestamptz, retention interval, batch int)
RETURNS TABLE (task_id bigint, action text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '100ms'
AS $$
DECLARE
    today timestamptz := pg_catalog.date_trunc('day', now, 'UTC');
    cutoff timestamptz := now OPERATOR(pg_catalog.-) retention;
    oldest_live timestamptz;
    day timestamptz;
    parent text;
    name text;
    part record;
    outside bool;
    held_checked timestamptz;
BEGIN
    -- One maintainer at a time: another one at work now (a second
    -- reconciler, durable_reconcile() from pg_cron) does this tick's work,
    -- and would otherwise make the same day or drop the same one.
    BEGIN
        LOCK TABLE durable.history_horizon IN EXCLUSIVE MODE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RETURN;
    END;
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
            EXECUTE pg_catalog.format(
                'SELECT EXISTS (SELECT FROM durable.%I WHERE %I >= $1 AND %I < $2)',
                parent OPERATOR(pg_catalog.||) '_default',
                CASE WHEN parent OPERATOR(pg_catalog.=) 'event_log' THEN 'at' ELSE 'finished_at' END,
                CASE WHEN parent OPERATOR(pg_catalog.=) 'event_log' THEN 'at' ELSE 'finished_at' END)
            INTO outside USING day, day OPERATOR(pg_catalog.+) '1 day'::pg_catalog.interval;
            CONTINUE WHEN outside;
            BEGIN
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
            END;
        END LOOP;
    END LOOP;

    IF retention IS NULL THEN
        RETURN;
    END IF;
    -- whole days, oldest first
    FOR part IN
        SELECT c.oid::pg_catalog.regclass::pg_catalog.text AS rel, p.relname AS parent,
               pg_catalog.substring(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                                    'TO \(''([^'']*)''\)')::pg_catalog.timestamptz AS upper_bound
        FROM pg_catalog.pg_inherits i
        JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
        JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) i.inhparent
        WHERE i.inhparent IN ('durable.task_history'::pg_catalog.regclass,
                              'durable.step_history'::pg_catalog.regclass,
                              'durable.event_log'::pg_catalog.regclass)
          AND NOT c.relpartbound IS NULL
          AND pg_catalog.pg_get_expr(c.relpartbound, c.oid) OPERATOR(pg_catalog.<>) 'DEFAULT'
        ORDER BY 3, 2 DESC
    LOOP
        CONTINUE WHEN part.upper_bound OPERATOR(pg_catalog.>) cutoff;
        IF part.parent OPERATOR(pg_catalog.=) 'event_log' THEN
            -- A day of events held by a task still kept is looked at again
            -- ten minutes later, not at every tick: the oldest live task
            -- is found by reading all of them.
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
            IF part.upper_bound OPERATOR(pg_catalog.>) oldest_live
               OR EXISTS (SELECT FROM durable.task_history h
                          WHERE h.created_at OPERATOR(pg_catalog.<) part.upper_bound) THEN
                INSERT INTO durable.history_horizon AS h (events_checked_at) VALUES (now)
                ON CONFLICT (one) DO UPDATE SET events_checked_at = excluded.events_checked_at;
                held_checked := now;
                CONTINUE;
            END IF;
        END IF;
        BEGIN
            EXECUTE pg_catalog.format('DROP TABLE %s', part.rel);
            IF part.parent OPERATOR(pg_catalog.=) 'task_history' THEN
                INSERT INTO durable.history_horizon AS h (removed_before) VALUES (part.upper_bound)
                ON CONFLICT (one) DO UPDATE
                SET removed_before = GREATEST(h.removed_before, excluded.removed_before);
                task_id := NULL;
                action := pg_catalog.format('removed %s', part.rel);
                RETURN NEXT;
            END IF;
        EXCEPTION
            WHEN lock_not_available THEN NULL;
        END;
    END LOOP;

    -- tasks of the default partitions, a batch at a time
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

    -- keys of tasks that are gone
    DELETE FROM durable.task_keys k
    WHERE k.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
        SELECT x.ctid FROM durable.task_keys x
        WHERE x.created_at OPERATOR(pg_catalog.<) cutoff
          AND NOT EXISTS (SELECT FROM durable.tasks t
                          WHERE t.partition_key OPERATOR(pg_catalog.=) x.partition_key
                            AND t.task_id OPERATOR(pg_catalog.=) x.task_id)
        LIMIT batch));
END
$$;
