--
-- Calls coalesced by a key into one task (src/core/flow_keys.c):
-- durable_debounce and durable_throttle.  A key's row names the task its
-- calls made and lives in the key's partition of the queue, where that
-- task is enqueued too (on Citus, on one node); every call takes the row
-- first, so that the calls of a key take turns.  expires_at is when the
-- row may go, once its task is no longer waiting for its first claim
-- (src/core/retention.c).
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
-- Fairness between keys (src/core/fairness.c): the weight of a key of a
-- fair queue, where it is not 1.  Read by the admission of each task to
-- its queue's claim order; on Citus a reference table, on every node.
--
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
-- Rate limits (src/core/rate_limits.c): a limit admits at most burst
-- units at once and rate units per per after that (GCRA).  Its definition
-- is read by every claim that takes a task naming it; on Citus a
-- reference table, on every node.  per_us is per in microseconds (a month
-- counts 30 days, as interval comparison does).
--
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

--
-- The state of a rate limit for one key ('' for a limit without keys):
-- its theoretical arrival time, the time by which every unit taken so far
-- would be paid back at the limit's rate.  One narrow row, updated by the
-- claims that take the limit's units, in their transactions.  On one
-- server every bucket is in partition 0; on Citus in the partition of the
-- task that takes the units, which is its limit's key's (enqueue.c), so
-- that a claim stays on one node.
--
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
