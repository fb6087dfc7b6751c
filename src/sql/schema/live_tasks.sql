--
-- Tables.  Every key leads with partition_key, the routing column of a
-- distributed deployment (docs/design.md section 11): a task id carries its
-- partition in its low 15 bits, so a fenced write finds its row, its shard and
-- its events from the task id alone.  Ids come from the transaction that
-- inserts them, never from a column default.
--
-- Live work apart from history (docs/design.md section 13).  Claims, heartbeats,
-- commits and the reconciler touch durable.live_tasks and
-- durable.live_steps, which hold unfinished tasks only.  A task that
-- finishes moves, in the statement that finishes it, to
-- durable.task_history and its steps to durable.step_history; both are
-- partitioned by the day the task finished, and durable.event_log by the
-- day of the event, so that retention drops whole days.  durable.tasks,
-- durable.steps and durable.events are views over both halves.
--
-- The indexes of the live tables carry live tasks only, and none of them
-- holds a column that a heartbeat changes: a heartbeat is a HOT update.
-- The reconciler finds running tasks by tasks_running and reads their
-- lease times from the rows, of which there are as many as workers hold.
--
-- The columns a claim and a heartbeat change come together: an update
-- that stays on its page logs only the bytes from the first changed
-- column to the last, so the payload and the other columns that never
-- change before them are not written again.  The columns added since
-- (waits, versions, ...) come after them: nothing a claim changes is
-- among them, and a NULL costs a bit of the null bitmap.
--
-- A running lease is its own open event (docs/design.md section 13): the claim
-- writes no event row but claimed_at, claim_seq, claim_kind and
-- claim_role, and the event that ends the lease (a commit, a failure, an
-- expiry, a release) records the claim with it.  A finished task's last
-- event is its row in history (final_*, with claim_fence the fence its
-- lease ran under).
--
-- A task's waits are named like its steps and kept with the task: in its
-- row (waits, an object from each wait's name to what it asked and how it
-- ended), so that they move to history with it, come back with a replay
-- and go with retention.  A child records its parent (parent_id); a task
-- may name a concurrency key.  The versions a task is pinned to: names to
-- one version each, from its enqueue (workflow_version) or its first claim
-- that says what it runs; changed only by durable_migrate().
-- workflow_version stays what versions says of "workflow", for those who
-- read it.
CREATE TABLE durable.live_tasks (
    partition_key      int NOT NULL,
    task_id            bigint NOT NULL,
    priority           int NOT NULL,
    max_attempts       int NOT NULL,
    checkpoint_version int NOT NULL DEFAULT 0,
    steps_in_doubt     int NOT NULL DEFAULT 0,
    class              durable.activity_class NOT NULL,
    created_at         timestamptz NOT NULL,
    deadline           interval,
    queue_name         text COLLATE "C" NOT NULL,
    idempotency_key    text COLLATE "C",
    request_hash       bytea,
    workflow_version   text,
    payload            jsonb NOT NULL,
    metadata           jsonb,
    checkpoint         jsonb,
    result             jsonb,
    last_error         jsonb,
    stop_code          text,
    stuck_alarm_at     timestamptz,
    finished_at        timestamptz,
    claim_fence        bigint,
    final_kind         text,
    final_actor        text,
    final_role         text,
    final_detail       jsonb,
    run_at             timestamptz NOT NULL,
    state              durable.task_state NOT NULL,
    attempt            int NOT NULL DEFAULT 0,
    version            int NOT NULL DEFAULT 1,
    fence              bigint NOT NULL DEFAULT 0,
    lease_until        timestamptz,
    heartbeat_at       timestamptz,
    progress_at        timestamptz,
    lease              interval,
    owner              text,
    progress           text,
    claimed_at         timestamptz,
    claim_seq          int,
    claim_kind         text,
    claim_role         text,
    parent_id          bigint,
    concurrency_key    text COLLATE "C",
    waits              jsonb,
    versions           jsonb,
    fairness_key       text COLLATE "C",
    fair_pass          float8,
    rate_limits        jsonb,
    rate_limited_by    text COLLATE "C",
    budgets            text[] COLLATE "C",
    began_at           timestamptz,
    unbegun_expiries   int NOT NULL DEFAULT 0,
    CONSTRAINT live_tasks_pkey PRIMARY KEY (partition_key, task_id)
) WITH (fillfactor = 80);
COMMENT ON TABLE durable.live_tasks IS 'unfinished tasks, one row each; version counts its events, fence its leases, owner is the worker that holds or last held it';
COMMENT ON COLUMN durable.live_tasks.claim_seq IS 'the seq of the claim event of the lease the task runs under, or last ran under; its time, kind and role are beside it';
COMMENT ON COLUMN durable.live_tasks.final_kind IS 'in history: the kind of the event that finished the task (seq = version, at = finished_at), with its actor, role and detail';
COMMENT ON COLUMN durable.live_tasks.parent_id IS 'the task that spawned this one (durable_spawn), if any';
COMMENT ON COLUMN durable.live_tasks.concurrency_key IS 'tasks of one key run at most concurrency_limit of their queue at a time';
COMMENT ON COLUMN durable.live_tasks.waits IS 'the task''s named waits and spawns: name -> {kind, args, status, ...}';
COMMENT ON COLUMN durable.live_tasks.fairness_key IS 'the key among whose tasks claims share a fair queue (NULL: the tasks without a key, which share one)';
COMMENT ON COLUMN durable.live_tasks.fair_pass IS 'in a fair queue, the task''s place among the ready tasks of its priority (its key''s virtual time); Infinity until the task is due and admitted; NULL in a queue without fairness';
COMMENT ON COLUMN durable.live_tasks.rate_limits IS 'the units of each rate limit a claim of the task takes (limit name or prefix:key -> units)';
COMMENT ON COLUMN durable.live_tasks.rate_limited_by IS 'the limit whose lack of room deferred the task last, until its next claim';
COMMENT ON COLUMN durable.live_tasks.budgets IS 'the spend budgets the task''s steps reserve from and settle to (durable_step_start(reserve => ...))';
COMMENT ON COLUMN durable.live_tasks.began_at IS 'when the worker last said it began the task (durable_begin); a lease that runs out before its task began gives its attempt back';
COMMENT ON COLUMN durable.live_tasks.unbegun_expiries IS 'how many times the task''s lease ran out before it began (its attempt given back each time, at most 10 times)';
COMMENT ON COLUMN durable.live_tasks.versions IS 'the versions the task is pinned to (names to one version each); changed only by durable_migrate()';
-- ready and waiting work, in claim order: in a fair queue by each task's
-- pass within a priority (src/core/fairness.c), elsewhere (pass NULL) by
-- due time
CREATE INDEX tasks_claimable ON durable.live_tasks
    (partition_key, queue_name, priority DESC, fair_pass, run_at, task_id)
    WHERE state IN ('ready', 'waiting');
-- a fair queue's admitted tasks by key, for the pass of the key's next
-- task (the tasks without a key are the key '')
CREATE INDEX tasks_fair ON durable.live_tasks
    (partition_key, queue_name, priority, (COALESCE(fairness_key, '')), fair_pass)
    WHERE state IN ('ready', 'waiting') AND fair_pass < 'Infinity';
-- a fair queue's tasks waiting for their pass, for the reconciler to admit
-- once due
CREATE INDEX tasks_unadmitted ON durable.live_tasks (partition_key, run_at)
    WHERE state IN ('ready', 'waiting') AND fair_pass = 'Infinity';
-- running tasks, for the reconciler (lease_until is read from the rows:
-- an index on it would make every heartbeat write an index entry)
CREATE INDEX tasks_running ON durable.live_tasks (partition_key, task_id)
    WHERE state = 'running';
-- tasks whose queryable step waits for a reconcile handler
CREATE INDEX tasks_reconcile ON durable.live_tasks (partition_key, queue_name)
    WHERE state = 'waiting' AND run_at = 'infinity';
-- a claim in a queue with a concurrency limit counts a key's running
-- tasks, and those ahead in claim order that could be claimed now
CREATE INDEX tasks_concurrency ON durable.live_tasks
    (partition_key, queue_name, concurrency_key, priority DESC, run_at, task_id)
    WHERE state IN ('ready', 'waiting', 'running') AND concurrency_key IS NOT NULL;
SELECT pg_catalog.pg_extension_config_dump('durable.live_tasks', '');
REVOKE ALL ON durable.live_tasks FROM PUBLIC;
GRANT SELECT ON durable.live_tasks TO durable_operator;

-- Enqueue idempotency outlives the task's move to history: the key is
-- bound to its task (and request hash) here until retention removes the
-- task.  Only keyed enqueues write a row.
CREATE TABLE durable.task_keys (
    partition_key   int NOT NULL,
    queue_name      text COLLATE "C" NOT NULL,
    idempotency_key text COLLATE "C" NOT NULL,
    task_id         bigint NOT NULL,
    request_hash    bytea,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (partition_key, queue_name, idempotency_key)
);
CREATE INDEX task_keys_created ON durable.task_keys (created_at);
COMMENT ON TABLE durable.task_keys IS 'enqueue idempotency keys, each bound to the task it created (and its request hash) until retention removes that task';
SELECT pg_catalog.pg_extension_config_dump('durable.task_keys', '');
REVOKE ALL ON durable.task_keys FROM PUBLIC;
GRANT SELECT ON durable.task_keys TO durable_operator;
