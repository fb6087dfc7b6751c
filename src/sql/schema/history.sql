CREATE TABLE durable.task_history (LIKE durable.live_tasks)
    PARTITION BY RANGE (finished_at);
ALTER TABLE durable.task_history ALTER COLUMN finished_at SET NOT NULL;
COMMENT ON TABLE durable.task_history IS 'finished tasks (completed, failed, cancelled), partitioned by the day they finished; retention drops whole days';

CREATE TABLE durable.step_history (LIKE durable.live_steps, finished_at timestamptz NOT NULL)
    PARTITION BY RANGE (finished_at);
COMMENT ON TABLE durable.step_history IS 'the steps of finished tasks, partitioned by the day their task finished';

CREATE TABLE durable.event_log (
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
    role          text,
    lease_seq     int,
    lease_fence   bigint,
    lease_at      timestamptz,
    lease_kind    text,
    lease_actor   text,
    lease_role    text)
    PARTITION BY RANGE (at);
COMMENT ON TABLE durable.event_log IS 'append-only: the changes of tasks as written, partitioned by the day of the change; an event that ends a lease carries its claim (lease_*); read durable.events';

-- Each partitioned table has a default partition for rows outside the
-- days made so far; retention deletes from it row by row.  Days are made
-- ahead by durable.maintain_history, which also drops them.  The
-- partitioned tables have no index of their own: each partition has its
-- own, made with it (durable.index_history).
CREATE TABLE durable.task_history_default PARTITION OF durable.task_history DEFAULT;
CREATE TABLE durable.step_history_default PARTITION OF durable.step_history DEFAULT;
CREATE TABLE durable.event_log_default PARTITION OF durable.event_log DEFAULT;
SELECT durable.index_history(p, p || '_default')
FROM unnest(ARRAY['task_history', 'step_history', 'event_log']) p;
-- the rows of a day, for the days made later and for retention
CREATE INDEX task_history_default_finished ON durable.task_history_default (finished_at);
CREATE INDEX step_history_default_finished ON durable.step_history_default (finished_at);
CREATE INDEX event_log_default_at ON durable.event_log_default (at);

-- what retention has removed: history before this time is gone, so that
-- events left of tasks removed are no orphans (durable_verify)
CREATE TABLE durable.history_horizon (
    one               bool PRIMARY KEY DEFAULT true CHECK (one),
    removed_before    timestamptz NOT NULL DEFAULT '-infinity',
    events_checked_at timestamptz
);
COMMENT ON TABLE durable.history_horizon IS 'the time before which retention has removed finished tasks, and when a day of events old enough was last found held by a task still kept; no row until either happened';

SELECT pg_catalog.pg_extension_config_dump('durable.task_history_default', '');
SELECT pg_catalog.pg_extension_config_dump('durable.step_history_default', '');
SELECT pg_catalog.pg_extension_config_dump('durable.event_log_default', '');
SELECT pg_catalog.pg_extension_config_dump('durable.history_horizon', '');
REVOKE ALL ON durable.task_history, durable.step_history, durable.event_log,
    durable.task_history_default, durable.step_history_default, durable.event_log_default,
    durable.history_horizon
FROM PUBLIC;
GRANT SELECT ON durable.task_history, durable.step_history, durable.event_log,
    durable.history_horizon
TO durable_operator;
