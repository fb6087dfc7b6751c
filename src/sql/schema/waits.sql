--
-- Workflows that wait (docs/design.md section 12).
--
-- Events that tasks await, each in its queue.  A row exists once an event
-- is emitted, or once a task awaits it: await and emit both take its row
-- lock, so an emit that commits while an await is registered sees the
-- await (no lost wake-up).
CREATE TABLE durable.emitted_events (
    partition_key int NOT NULL,
    event         text COLLATE "C" NOT NULL,
    payload       jsonb,
    payload_hash  bytea,
    emitted_at    timestamptz,          -- NULL: awaited, not yet emitted
    role          text,
    created_at    timestamptz NOT NULL,
    queue_name    text COLLATE "C" NOT NULL,
    PRIMARY KEY (partition_key, queue_name, event)
);
COMMENT ON TABLE durable.emitted_events IS 'events emitted into a queue with durable_emit (first emit wins), and those awaited before anybody emitted them (emitted_at NULL)';
COMMENT ON COLUMN durable.emitted_events.queue_name IS 'the queue the event belongs to; partition_key is one of the queue''s partitions';
CREATE INDEX emitted_events_emitted_at ON durable.emitted_events (emitted_at);

CREATE TABLE durable.event_waits (
    partition_key int NOT NULL,         -- the event's
    event         text COLLATE "C" NOT NULL,
    task_id       bigint NOT NULL,
    name          text COLLATE "C" NOT NULL,
    queue_name    text COLLATE "C" NOT NULL,
    PRIMARY KEY (partition_key, queue_name, event, task_id, name)
);
COMMENT ON TABLE durable.event_waits IS 'the awaits registered for an event of a queue not yet emitted; its emit into that queue wakes them';
COMMENT ON COLUMN durable.event_waits.queue_name IS 'the queue of the awaited event (the awaiting task''s own, or the queue its await named)';
-- a task that finishes drops the awaits it registered
CREATE INDEX event_waits_task ON durable.event_waits (task_id);

-- Schedules: the reconciler enqueues each occurrence once, with an
-- idempotency key made of the schedule's name and the occurrence's time.
-- A schedule whose occurrence cannot be enqueued is skipped, with why.
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
    role          text,
    last_error    text,
    last_error_at timestamptz,
    paused_at     timestamptz
);
COMMENT ON TABLE durable.schedules IS 'cron schedules (durable_schedule); next_run is the next occurrence the reconciler enqueues';
COMMENT ON COLUMN durable.schedules.last_error IS 'why the last occurrence the reconciler tried could not be enqueued (it was skipped); NULL once one is enqueued again';
COMMENT ON COLUMN durable.schedules.last_error_at IS 'since when the schedule''s occurrences fail';
COMMENT ON COLUMN durable.schedules.paused_at IS 'when the schedule was paused (durable_pause_schedule): it enqueues nothing until resumed; NULL when it runs';
CREATE INDEX schedules_next_run ON durable.schedules (next_run);

SELECT pg_catalog.pg_extension_config_dump('durable.emitted_events', '');
SELECT pg_catalog.pg_extension_config_dump('durable.event_waits', '');
SELECT pg_catalog.pg_extension_config_dump('durable.schedules', '');
REVOKE ALL ON durable.emitted_events, durable.event_waits, durable.schedules FROM PUBLIC;
GRANT SELECT ON durable.emitted_events, durable.event_waits, durable.schedules TO durable_operator;
