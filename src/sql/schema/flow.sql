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
