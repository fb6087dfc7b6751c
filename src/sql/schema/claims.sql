--
-- Retry tokens per (queue, partition) (budget.c).  A queue's retry-token
-- bucket is split evenly over its partitions: each holds retry_capacity /
-- partitions tokens and refills retry_refill_rate / partitions a second,
-- so that on Citus a retry takes its token on its task's node only (the
-- queue's row is a reference table, written on every node).  A queue of
-- one partition on one server keeps its bucket in its row; a bucket here
-- is made, full, when its partition first retries.
--
CREATE TABLE durable.retry_buckets (
    partition_key int NOT NULL,
    queue_name    text NOT NULL,
    tokens        float8 NOT NULL,
    tokens_at     timestamptz NOT NULL,
    PRIMARY KEY (partition_key, queue_name)
);
COMMENT ON TABLE durable.retry_buckets IS 'each queue partition''s share of its queue''s retry-token bucket';
SELECT pg_catalog.pg_extension_config_dump('durable.retry_buckets', '');
REVOKE ALL ON durable.retry_buckets FROM PUBLIC;

--
-- A concurrency limit serialised per key: the claims of a key in a queue
-- with a concurrency limit take and write its row here before they count
-- its running tasks (src/core/claim.c), so that two claims never both take
-- a task of the key when one is behind the other in claim order, at any
-- isolation level (under REPEATABLE READ and SERIALIZABLE one of them is
-- refused with 40001).  A row is made by the first claim of its key; on one
-- server a key's row is in its queue's first partition, on Citus in the
-- partition claimed, which is its key's.  Queues without a concurrency
-- limit never read it.
--
CREATE TABLE durable.concurrency_keys (
    partition_key   int NOT NULL,
    queue_name      text NOT NULL,
    concurrency_key text COLLATE "C" NOT NULL,
    claimed_at      timestamptz NOT NULL,
    PRIMARY KEY (partition_key, queue_name, concurrency_key)
);
COMMENT ON TABLE durable.concurrency_keys IS 'a row per concurrency key of a queue with a concurrency limit, which the claims of the key take in turn';
SELECT pg_catalog.pg_extension_config_dump('durable.concurrency_keys', '');
REVOKE ALL ON durable.concurrency_keys FROM PUBLIC;
