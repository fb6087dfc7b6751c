-- Step names compare bytewise (COLLATE "C"), as every unique text key does.
CREATE TABLE durable.live_steps (
    partition_key   int NOT NULL,
    task_id         bigint NOT NULL,
    step            text COLLATE "C" NOT NULL,
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
    CONSTRAINT live_steps_pkey PRIMARY KEY (partition_key, task_id, step)
);
COMMENT ON TABLE durable.live_steps IS 'the side-effecting steps of unfinished tasks: one row per step, moved by compare-and-swap on version; ordinal orders them (the task version that planned them)';
SELECT pg_catalog.pg_extension_config_dump('durable.live_steps', '');
REVOKE ALL ON durable.live_steps FROM PUBLIC;
GRANT SELECT ON durable.live_steps TO durable_operator;
