-- Outbox messages, inbox entries and request keys belong to a queue, as
-- events do: their names are the queue's, unique within it, and a
-- restricted queue's grants say who may use them (docs/security.md).  The
-- unique text keys compare bytewise (COLLATE "C").

-- a message keeps its partition: its id carries it, and an id a consumer
-- has seen must stay the message's
CREATE TABLE durable.outbox (
    partition_key int NOT NULL,
    message_id    bigint NOT NULL,
    fence         bigint NOT NULL DEFAULT 0,
    attempt       int NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL,
    lease_until   timestamptz,
    published_at  timestamptz,
    topic         text NOT NULL,
    key           text,
    publisher     text,
    payload       jsonb NOT NULL,
    queue_name    text COLLATE "C" NOT NULL,
    PRIMARY KEY (partition_key, message_id)
);
COMMENT ON TABLE durable.outbox IS 'messages emitted into a queue in business transactions, published at least once by the queue''s fenced publishers';
COMMENT ON COLUMN durable.outbox.queue_name IS 'the queue the message was emitted into; only its publishers claim and acknowledge it';
CREATE INDEX outbox_unpublished ON durable.outbox (queue_name, message_id) WHERE published_at IS NULL;
CREATE INDEX outbox_published ON durable.outbox (published_at) WHERE published_at IS NOT NULL;
SELECT pg_catalog.pg_extension_config_dump('durable.outbox', '');
REVOKE ALL ON durable.outbox FROM PUBLIC;
GRANT SELECT ON durable.outbox TO durable_operator;

CREATE TABLE durable.inbox (
    partition_key int NOT NULL,
    consumer      text COLLATE "C" NOT NULL,
    message_id    text COLLATE "C" NOT NULL,
    payload_hash  bytea,
    received_at   timestamptz NOT NULL,
    queue_name    text COLLATE "C" NOT NULL,
    PRIMARY KEY (partition_key, queue_name, consumer, message_id)
);
CREATE INDEX inbox_received ON durable.inbox (received_at);
COMMENT ON TABLE durable.inbox IS 'messages a consumer of a queue has received, for deduplication; the partition is the queue''s that a hash of consumer and message id picks';
COMMENT ON COLUMN durable.inbox.queue_name IS 'the queue of the consumer; partition_key is one of the queue''s partitions';
SELECT pg_catalog.pg_extension_config_dump('durable.inbox', '');
REVOKE ALL ON durable.inbox FROM PUBLIC;
GRANT SELECT ON durable.inbox TO durable_operator;

CREATE TABLE durable.idempotency_keys (
    partition_key  int NOT NULL,
    scope          text COLLATE "C" NOT NULL,
    key            text COLLATE "C" NOT NULL,
    request_hash   bytea NOT NULL,
    completed      bool NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL,
    locked_until   timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    recovery_point text NOT NULL,
    response       jsonb,
    fence          bigint NOT NULL,
    queue_name     text COLLATE "C" NOT NULL,
    PRIMARY KEY (partition_key, queue_name, scope, key)
);
CREATE INDEX idempotency_keys_expiry ON durable.idempotency_keys (expires_at);
COMMENT ON TABLE durable.idempotency_keys IS 'request-level idempotency keys of a queue (begin/advance/finish), bound to the hash of their request until they expire';
COMMENT ON COLUMN durable.idempotency_keys.fence IS 'the fence of the handler that owns the request; each takeover increments it';
COMMENT ON COLUMN durable.idempotency_keys.queue_name IS 'the queue of the key''s scope; partition_key is one of the queue''s partitions';
SELECT pg_catalog.pg_extension_config_dump('durable.idempotency_keys', '');
REVOKE ALL ON durable.idempotency_keys FROM PUBLIC;
GRANT SELECT ON durable.idempotency_keys TO durable_operator;
