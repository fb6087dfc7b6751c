/* durable--0.5.0--0.6.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.6.0'" to load this file. \quit

--
-- Versions as a contract, and the stop-loss runbook as calls (DESIGN
-- section 15).
--

--
-- 1. Pinned versions: a task runs under the versions it started with.
--

-- The versions a task is pinned to: names to one version each, from its
-- enqueue (workflow_version) or its first claim that says what it runs;
-- changed only by durable_migrate().  workflow_version stays what
-- versions says of "workflow", for those who read it.
ALTER TABLE durable.live_tasks ADD COLUMN versions jsonb;
ALTER TABLE durable.task_history ADD COLUMN versions jsonb;
COMMENT ON COLUMN durable.live_tasks.versions IS 'the versions the task is pinned to (names to one version each); changed only by durable_migrate()';
UPDATE durable.live_tasks SET versions = pg_catalog.jsonb_build_object('workflow', workflow_version)
WHERE workflow_version IS NOT NULL;

CREATE OR REPLACE VIEW durable.tasks AS
SELECT partition_key, task_id, state, class, priority, attempt, max_attempts, version, fence,
       run_at, created_at, lease_until, heartbeat_at, progress_at, stuck_alarm_at, finished_at,
       lease, deadline, queue_name, owner, progress, stop_code, idempotency_key, request_hash,
       workflow_version, payload, result, last_error, checkpoint, checkpoint_version,
       steps_in_doubt, metadata, parent_id, concurrency_key, waits, versions
FROM durable.live_tasks
UNION ALL
SELECT partition_key, task_id, state, class, priority, attempt, max_attempts, version, fence,
       run_at, created_at, lease_until, heartbeat_at, progress_at, stuck_alarm_at, finished_at,
       lease, deadline, queue_name, owner, progress, stop_code, idempotency_key, request_hash,
       workflow_version, payload, result, last_error, checkpoint, checkpoint_version,
       steps_in_doubt, metadata, parent_id, concurrency_key, waits, versions
FROM durable.task_history;

-- whether a worker that runs runs (names to a version or a list of them)
-- runs a task pinned to pinned; the claims' filter (pure/versions.c)
CREATE FUNCTION durable.versions_run(pinned jsonb, runs jsonb)
RETURNS boolean
AS 'MODULE_PATHNAME', 'durable_versions_run'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION durable.versions_run(jsonb, jsonb) IS
  'whether a worker that runs these versions (names to a version or a list of versions) runs a task pinned to those';
REVOKE EXECUTE ON FUNCTION durable.versions_run(jsonb, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION durable.versions_run(jsonb, jsonb) TO durable_operator;

--
-- 2. Queues: a version_timeout, and partitions paused one at a time.
--
ALTER TABLE durable.queues
    ADD COLUMN version_timeout interval CHECK (version_timeout > '0'::interval),
    ADD COLUMN paused_partitions int4[] NOT NULL DEFAULT '{}';
COMMENT ON COLUMN durable.queues.version_timeout IS 'after how long without a worker that runs its versions a ready task goes to review (NULL: never)';
COMMENT ON COLUMN durable.queues.paused_partitions IS 'the partitions of the queue that hand out no task (durable_pause(queue, partition => n))';

-- Who paused and resumed a queue or one of its partitions, and when: a
-- pause changes no task, so it is no task's event.  A dropped queue takes
-- its rows.  On a Citus cluster each node keeps the calls made on it.
CREATE TABLE durable.queue_log (
    queue_name text COLLATE "C" NOT NULL,
    at timestamptz NOT NULL,
    kind text NOT NULL CHECK (kind IN ('paused', 'resumed')),
    partition_key int,
    role text NOT NULL
);
CREATE INDEX queue_log_queue ON durable.queue_log (queue_name, at);
COMMENT ON TABLE durable.queue_log IS 'who paused and resumed a queue (partition_key NULL) or one of its partitions, and when';
SELECT pg_catalog.pg_extension_config_dump('durable.queue_log', '');
REVOKE ALL ON durable.queue_log FROM PUBLIC;
GRANT SELECT ON durable.queue_log TO durable_operator;

--
-- 3. Workers say what they run; claims record it.
--

-- Each worker's last claim in a queue and the versions it said it runs
-- (NULL: it did not say, and claims as before 0.6.0, whatever a task is
-- pinned to).  A claim writes its row at most once a second a backend;
-- a dropped queue takes its rows.  Not dumped: a restored database has
-- seen no worker yet.
CREATE TABLE durable.workers_seen (
    queue_name text COLLATE "C" NOT NULL,
    worker text NOT NULL,
    versions jsonb,
    role text NOT NULL,
    first_claim_at timestamptz NOT NULL,
    last_claim_at timestamptz NOT NULL,
    PRIMARY KEY (queue_name, worker)
);
COMMENT ON TABLE durable.workers_seen IS 'each worker''s last claim in each queue and the versions it said it runs';
REVOKE ALL ON durable.workers_seen FROM PUBLIC;

CREATE VIEW durable.workers AS
SELECT w.queue_name, w.worker, w.versions, w.role, w.first_claim_at, w.last_claim_at,
       q.version_timeout,
       q.version_timeout IS NULL
       OR w.last_claim_at > pg_catalog.timezone('UTC', pg_catalog.timezone('UTC', now()) - q.version_timeout)
                            - interval '1 second'
           AS alive
FROM durable.workers_seen w JOIN durable.queues q USING (queue_name);
COMMENT ON VIEW durable.workers IS 'every worker that claimed in a queue: the versions it runs (NULL: it did not say), its first and last claim, and whether it counts as alive for the queue''s version_timeout';
GRANT SELECT ON durable.workers TO durable_operator;

--
-- 4. Queue functions: a version_timeout, partitions paused.
--
DROP FUNCTION @extschema@.durable_create_queue(text, interval, int, int, int, interval, int, float8, interval, int, bool, int);
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
    concurrency_limit int DEFAULT NULL,
    version_timeout interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_create_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_create_queue(text, interval, int, int, int, interval, int, float8, interval, int, bool, int, interval) IS
  'create a queue: default lease, retry budget, retry-token bucket (NULL capacity = unlimited), stuck-alarm timeout, partitions, whether enqueues NOTIFY durable_ready, the most running tasks per concurrency key, and after how long a task no worker runs the versions of goes to review';

DROP FUNCTION @extschema@.durable_alter_queue(text, interval, int, int, int, interval, int, float8, interval, bool, text[], int);
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
    concurrency_limit int DEFAULT NULL,
    version_timeout interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_alter_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_alter_queue(text, interval, int, int, int, interval, int, float8, interval, bool, text[], int, interval) IS
  'change queue settings; NULL keeps a setting, clear names the optional ones to remove (deadline, retry_capacity, progress_timeout, concurrency_limit, version_timeout)';

DROP FUNCTION @extschema@.durable_pause(text);
CREATE FUNCTION @extschema@.durable_pause(queue text, partition int DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_pause'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_pause(text, int) IS
  'stop claims from a queue, or from one of its partitions (its partition_key); nothing is lost, leases still expire and are recovered';

DROP FUNCTION @extschema@.durable_resume(text);
CREATE FUNCTION @extschema@.durable_resume(queue text, partition int DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_resume'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_resume(text, int) IS
  'let claims take from a paused queue, or from a paused partition of it, again';

CREATE OR REPLACE VIEW durable.queue_stats AS
SELECT q.queue_name, q.paused,
       coalesce(l.ready, 0) AS ready, coalesce(l.waiting, 0) AS waiting,
       coalesce(l.running, 0) AS running, coalesce(l.needs_review, 0) AS needs_review,
       coalesce(h.completed, 0) AS completed, coalesce(h.failed, 0) AS failed,
       coalesce(h.cancelled, 0) AS cancelled,
       l.oldest_due_age, l.oldest_heartbeat_age,
       coalesce(l.expired_leases, 0) AS expired_leases, coalesce(l.stuck, 0) AS stuck,
       q.paused_partitions
FROM durable.queues q
LEFT JOIN (
    SELECT t.queue_name,
           count(*) FILTER (WHERE t.state = 'ready') AS ready,
           count(*) FILTER (WHERE t.state = 'waiting') AS waiting,
           count(*) FILTER (WHERE t.state = 'running') AS running,
           count(*) FILTER (WHERE t.state = 'needs_review') AS needs_review,
           now() - min(t.run_at) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now()) AS oldest_due_age,
           now() - min(t.heartbeat_at) FILTER (WHERE t.state = 'running') AS oldest_heartbeat_age,
           count(*) FILTER (WHERE t.state = 'running' AND t.lease_until < now()) AS expired_leases,
           count(*) FILTER (WHERE t.state = 'running' AND p.progress_timeout IS NOT NULL
                              AND t.progress_at < pg_catalog.timezone('UTC',
                                  pg_catalog.timezone('UTC', now()) - p.progress_timeout)) AS stuck
    FROM durable.live_tasks t JOIN durable.queues p ON p.queue_name = t.queue_name
    GROUP BY t.queue_name) l ON l.queue_name = q.queue_name
LEFT JOIN (
    SELECT t.queue_name,
           count(*) FILTER (WHERE t.state = 'completed') AS completed,
           count(*) FILTER (WHERE t.state = 'failed') AS failed,
           count(*) FILTER (WHERE t.state = 'cancelled') AS cancelled
    FROM durable.task_history t
    GROUP BY t.queue_name) h ON h.queue_name = q.queue_name;

-- A claim that pins a task's versions is recorded as kind 'pinned': it is
-- a claim all the same
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
    FROM durable.live_tasks t WHERE t.state = 'running' AND t.lease_until < now()
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

--
-- 5. Claims that say what the worker runs, and return what a task is
--    pinned to.  The library still serves the 0.5.0 signatures until the
--    update (it reads the arguments it is given and fills the columns the
--    caller's signature has).
--
DROP FUNCTION @extschema@.durable_claim(text, text, interval, int);
CREATE FUNCTION @extschema@.durable_claim(
    queue text,
    worker text,
    lease interval DEFAULT NULL,
    batch int DEFAULT 1,
    versions jsonb DEFAULT NULL)
RETURNS TABLE (task_id bigint, fence bigint, lease_until timestamptz, attempt int,
               payload jsonb, checkpoint jsonb, versions jsonb)
AS 'MODULE_PATHNAME', 'durable_claim'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_claim(text, text, interval, int, jsonb) IS
  'lease up to batch ready tasks whose time has come, highest priority first, skipping locked ones; with versions, only tasks pinned to versions the worker runs (and unpinned ones, which it pins); each claim increments the fence';

DROP FUNCTION @extschema@.durable_commit_and_claim(bigint, bigint, jsonb, text, interval, int);
CREATE FUNCTION @extschema@.durable_commit_and_claim(
    task_id bigint,
    fence bigint,
    result jsonb DEFAULT NULL,
    worker text DEFAULT NULL,
    lease interval DEFAULT NULL,
    batch int DEFAULT 1,
    versions jsonb DEFAULT NULL)
RETURNS TABLE (task_id bigint, fence bigint, lease_until timestamptz, attempt int,
               payload jsonb, checkpoint jsonb, versions jsonb)
AS 'MODULE_PATHNAME', 'durable_commit_and_claim'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_commit_and_claim(bigint, bigint, jsonb, text, interval, int, jsonb) IS
  'complete a task and claim the next ones of its queue in the same transaction: one commit per task';

REVOKE EXECUTE ON FUNCTION
    @extschema@.durable_claim(text, text, interval, int, jsonb),
    @extschema@.durable_commit_and_claim(bigint, bigint, jsonb, text, interval, int, jsonb)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_claim(text, text, interval, int, jsonb),
    @extschema@.durable_commit_and_claim(bigint, bigint, jsonb, text, interval, int, jsonb)
TO durable_worker;

--
-- 6. Explicit migration, quarantine, and dead letters replayed by
--    partition or reason.
--
CREATE FUNCTION @extschema@.durable_migrate(
    task_id bigint,
    from_versions jsonb,
    to_versions jsonb,
    operator text,
    evidence jsonb,
    dry_run boolean DEFAULT false)
RETURNS TABLE (task_id bigint, state text, from_versions jsonb, to_versions jsonb, action text)
AS 'MODULE_PATHNAME', 'durable_migrate_task'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_migrate(bigint, jsonb, jsonb, text, jsonb, boolean) IS
  'move a task pinned to from_versions to to_versions, with an event naming the operator and the evidence; refused (55U04) while a step is in doubt';

CREATE FUNCTION @extschema@.durable_migrate(
    queue text,
    from_versions jsonb,
    to_versions jsonb,
    operator text,
    evidence jsonb,
    dry_run boolean DEFAULT false,
    batch int DEFAULT 1000)
RETURNS TABLE (task_id bigint, state text, from_versions jsonb, to_versions jsonb, action text)
AS 'MODULE_PATHNAME', 'durable_migrate_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_migrate(text, jsonb, jsonb, text, jsonb, boolean, int) IS
  'move up to batch unfinished tasks of a queue pinned to from_versions to to_versions; a task with a step in doubt is reported, not moved';

CREATE FUNCTION @extschema@.durable_quarantine(task_id bigint, reason text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_quarantine'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_quarantine(bigint, text) IS
  'put an unfinished task among the dead letters (failed, quarantined) with a reason, its lease revoked; refused (55U04) while a step is in doubt';

DROP FUNCTION @extschema@.durable_replay_dead_letters(text, int);
CREATE FUNCTION @extschema@.durable_replay_dead_letters(
    queue text,
    batch int DEFAULT 10,
    partition int DEFAULT NULL,
    reason text DEFAULT NULL)
RETURNS TABLE (task_id bigint, action text)
AS 'MODULE_PATHNAME', 'durable_replay_dead_letters'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_replay_dead_letters(text, int, int, text) IS
  'give up to batch failed tasks of a queue (of one partition, of one reason: a stop code or a quarantine''s reason) a new run, oldest first';

REVOKE EXECUTE ON FUNCTION
    @extschema@.durable_create_queue(text, interval, int, int, int, interval, int, float8, interval, int, bool, int, interval),
    @extschema@.durable_alter_queue(text, interval, int, int, int, interval, int, float8, interval, bool, text[], int, interval),
    @extschema@.durable_pause(text, int),
    @extschema@.durable_resume(text, int),
    @extschema@.durable_migrate(bigint, jsonb, jsonb, text, jsonb, boolean),
    @extschema@.durable_migrate(text, jsonb, jsonb, text, jsonb, boolean, int),
    @extschema@.durable_quarantine(bigint, text),
    @extschema@.durable_replay_dead_letters(text, int, int, text)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_create_queue(text, interval, int, int, int, interval, int, float8, interval, int, bool, int, interval),
    @extschema@.durable_alter_queue(text, interval, int, int, int, interval, int, float8, interval, bool, text[], int, interval),
    @extschema@.durable_pause(text, int),
    @extschema@.durable_resume(text, int),
    @extschema@.durable_migrate(bigint, jsonb, jsonb, text, jsonb, boolean),
    @extschema@.durable_migrate(text, jsonb, jsonb, text, jsonb, boolean, int),
    @extschema@.durable_quarantine(bigint, text),
    @extschema@.durable_replay_dead_letters(text, int, int, text)
TO durable_operator;

-- the dead letters of every queue: failed tasks, why, and whether a replay
-- would take them (a task with a failed step is final)
CREATE VIEW durable.dead_letters AS
SELECT t.task_id, t.queue_name, t.partition_key, t.stop_code,
       CASE WHEN t.stop_code = 'quarantined' THEN t.last_error ->> 'reason' ELSE t.stop_code END AS reason,
       t.finished_at AS failed_at, t.attempt, t.last_error, t.versions,
       t.steps_in_doubt = 0
       AND NOT EXISTS (SELECT FROM durable.step_history s
                       WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
                         AND s.state = 'failed') AS replayable
FROM durable.task_history t
WHERE t.state = 'failed';
COMMENT ON VIEW durable.dead_letters IS 'failed tasks: why (a stop code, or the reason a quarantine gave), when, and whether durable_replay_dead_letters() would take them';
GRANT SELECT ON durable.dead_letters TO durable_operator;

--
-- 7. The recovery package says which versions a task needs and which are
--    alive, and what to do about a task no worker runs.
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
    alive jsonb;
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
           w.value -> 'args' ->> 'event' AS event,
           coalesce(w.value -> 'args' ->> 'queue', t.queue_name) AS event_queue
    INTO pending
    FROM jsonb_each(coalesce(t.waits, '{}')) w
    WHERE w.value ->> 'status' IN ('sleeping', 'waiting');

    -- the versions the queue's live workers run (NULL: claims as before)
    SELECT coalesce(jsonb_agg(DISTINCT coalesce(w.versions, '"any"')), '[]')
    INTO alive
    FROM durable.workers w
    WHERE w.queue_name = t.queue_name AND w.alive;

    recommended := CASE
        WHEN t.state = 'needs_review' AND t.stop_code = 'version_unavailable' AND in_doubt = 0 THEN jsonb_build_object(
            'action', 'migrate',
            'reason', format('no worker runs the versions %s the task is pinned to (alive: %s): deploy a worker that runs them, durable_migrate(%s, %L, ...) to versions a worker runs, or durable_resolve(%s, ''cancel'', ...)',
                             t.versions, alive, t.task_id, t.versions, t.task_id))
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
                                 WHEN 'event' THEN format('durable_emit(%L, %L, ...) wakes it',
                                                          pending.event_queue, pending.event)
                                 ELSE 'the last of its children to finish wakes it' END))
        WHEN t.state = 'waiting' AND t.run_at = 'infinity' AND in_doubt > 0 THEN jsonb_build_object(
            'action', 'reconcile',
            'reason', format('a reconcile handler is to look up the outcome of %s (durable_claim_reconcile)', doubt))
        ELSE jsonb_build_object('action', 'none', 'reason', format('the task is %s', t.state))
    END;

    SELECT jsonb_build_object(
        'task', to_jsonb(t) - 'checkpoint',
        'checkpoint', jsonb_build_object('version', t.checkpoint_version, 'value', t.checkpoint),
        'versions', jsonb_build_object('pinned', t.versions, 'alive', alive),
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
-- 8. Counters in shared memory, and metrics for Prometheus from SQL.
--
CREATE FUNCTION durable.queue_counters(
    OUT queue_name text, OUT enqueued bigint, OUT claimed bigint, OUT completed bigint,
    OUT failed bigint, OUT cancelled bigint, OUT retried bigint, OUT leases_expired bigint,
    OUT sent_to_review bigint, OUT resolved_mark_committed bigint,
    OUT resolved_mark_not_executed bigint, OUT resolved_mark_failed bigint,
    OUT resolved_retry bigint, OUT resolved_cancel bigint, OUT dead_lettered bigint,
    OUT quarantined bigint, OUT replayed bigint, OUT migrated bigint, OUT stale_writes bigint,
    OUT version_conflicts bigint, OUT idempotent_replays bigint, OUT events_emitted bigint,
    OUT wakeups bigint, OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'durable_queue_counters'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION durable.queue_counters() IS
  'what durable did in each queue since the server started or durable_reset_counters(): monotonic counters in shared memory (preloaded only)';
REVOKE EXECUTE ON FUNCTION durable.queue_counters() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION durable.queue_counters() TO durable_operator, pg_monitor;

CREATE VIEW durable.queue_counters AS SELECT * FROM durable.queue_counters();
COMMENT ON VIEW durable.queue_counters IS 'per queue: what durable did since the server started or durable_reset_counters() (enqueued, claimed, completed, failed attempts, ...); empty unless durable is preloaded; queue "" counts the queues past durable.counters_queues';
GRANT SELECT ON durable.queue_counters TO durable_operator, pg_monitor;

-- the gauges of each queue, from the live tasks only (never history): what
-- a scrape reads, whatever history is kept
CREATE VIEW durable.queue_gauges AS
SELECT q.queue_name, q.paused, q.paused_partitions,
       count(t.task_id) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now()) AS ready,
       count(t.task_id) FILTER (WHERE t.state = 'running') AS running,
       count(t.task_id) FILTER (WHERE t.state = 'waiting' AND t.run_at > now()) AS waiting,
       count(t.task_id) FILTER (WHERE t.state = 'needs_review') AS needs_review,
       count(t.task_id) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at > now()
                                  AND t.run_at < 'infinity') AS scheduled,
       coalesce(EXTRACT(EPOCH FROM now() - min(t.run_at)
                FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now())), 0)::float8
           AS oldest_ready_age_seconds,
       coalesce(EXTRACT(EPOCH FROM now() - min(t.heartbeat_at)
                FILTER (WHERE t.state = 'running')), 0)::float8 AS oldest_heartbeat_age_seconds
FROM durable.queues q LEFT JOIN durable.live_tasks t ON t.queue_name = q.queue_name
GROUP BY q.queue_name, q.paused, q.paused_partitions;
COMMENT ON VIEW durable.queue_gauges IS 'per queue, from the unfinished tasks only: ready (due), running, waiting (not due), in review, scheduled (due later), the ages of the oldest due task and of the oldest heartbeat; cheap whatever history is kept';
GRANT SELECT ON durable.queue_gauges TO durable_operator, pg_monitor;

CREATE FUNCTION @extschema@.durable_metrics_prometheus()
RETURNS text
AS 'MODULE_PATHNAME', 'durable_metrics_prometheus'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_metrics_prometheus() IS
  'every counter, histogram and gauge of durable, per queue, in the Prometheus text exposition format; reads no history';
REVOKE EXECUTE ON FUNCTION @extschema@.durable_metrics_prometheus() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_metrics_prometheus() TO durable_operator, pg_monitor;

CREATE FUNCTION @extschema@.durable_reset_counters()
RETURNS void
AS 'MODULE_PATHNAME', 'durable_reset_counters'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_reset_counters() IS
  'zero every counter and histogram of durable (a reset, for Prometheus'' rate())';
REVOKE EXECUTE ON FUNCTION @extschema@.durable_reset_counters() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_reset_counters() TO durable_operator;

--
-- Last: every function of the extension written in SQL or PL/pgSQL pins
-- the settings its text forms follow, as in 0.5.0 (CREATE OR REPLACE
-- above dropped them for the function it replaced).
--
DO $$
DECLARE
    f pg_catalog.regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::pg_catalog.regprocedure
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_language l ON l.oid OPERATOR(pg_catalog.=) p.prolang
        JOIN pg_catalog.pg_depend d
          ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
         AND d.objid OPERATOR(pg_catalog.=) p.oid
         AND d.deptype OPERATOR(pg_catalog.=) 'e'
         AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
        JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
        WHERE e.extname OPERATOR(pg_catalog.=) 'durable'
          AND l.lanname OPERATOR(pg_catalog.=) ANY (ARRAY['sql', 'plpgsql'])
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp'
            ' SET DateStyle = ''ISO, MDY'' SET IntervalStyle = ''postgres'''
            ' SET TimeZone = ''UTC'' SET extra_float_digits = 1', f);
    END LOOP;
END
$$;
