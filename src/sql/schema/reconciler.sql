-- What the reconciler could not do in its last ticks: one row per part of
-- a tick (a partition's expired leases, a day of history, retention of a
-- table, a schedule, a queue's retry tokens) from the tick in which it
-- first failed to the one in which it next succeeds.  Each node of a Citus
-- cluster keeps its own (the table is not distributed), and a restore
-- starts without any (not dumped).
CREATE TABLE durable.tick_failures (
    part           text COLLATE "C" PRIMARY KEY,
    sqlstate       text NOT NULL,
    error          text NOT NULL,
    failing_since  timestamptz NOT NULL,
    last_failed_at timestamptz NOT NULL,
    failures       bigint NOT NULL
);
COMMENT ON TABLE durable.tick_failures IS 'the parts of the reconciler''s tick that fail, with their last error and since when; a part that succeeds again leaves';
REVOKE ALL ON durable.tick_failures FROM PUBLIC;
GRANT SELECT ON durable.tick_failures TO durable_operator;

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
