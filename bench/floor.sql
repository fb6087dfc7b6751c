-- The bare-SQL floor: the same claim (SKIP LOCKED) and fenced complete on a
-- plain table, with one partial index on ready work and a bigint fence.
SET client_min_messages = warning;
DROP TABLE IF EXISTS floor_tasks;
CREATE TABLE floor_tasks (
    id          bigserial PRIMARY KEY,
    queue       text NOT NULL,
    state       text NOT NULL DEFAULT 'ready',
    priority    int NOT NULL DEFAULT 0,
    run_at      timestamptz NOT NULL DEFAULT now(),
    fence       bigint NOT NULL DEFAULT 0,
    owner       text,
    lease_until timestamptz,
    payload     jsonb NOT NULL,
    result      jsonb
);
CREATE INDEX floor_tasks_ready ON floor_tasks (queue, priority DESC, run_at, id)
    WHERE state = 'ready';
