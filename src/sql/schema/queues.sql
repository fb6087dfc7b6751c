-- Queue names compare bytewise (COLLATE "C"), as every unique text key
-- does: under the database's default collation an operating-system
-- upgrade that changes its rules can corrupt the unique indexes on them,
-- so that one key is accepted twice.
CREATE TABLE durable.queues (
    queue_name        text COLLATE "C" PRIMARY KEY,
    partition_base    int NOT NULL,
    partitions        int NOT NULL,
    lease             interval NOT NULL,
    max_attempts      int NOT NULL,
    retry_base        int NOT NULL,
    retry_cap         int NOT NULL,
    deadline          interval,
    retry_capacity    int,
    retry_refill_rate float8 NOT NULL,
    retry_tokens      float8 NOT NULL,
    retry_tokens_at   timestamptz NOT NULL,
    progress_timeout  interval,
    notify            bool NOT NULL,
    paused            bool NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL,
    restricted        bool NOT NULL DEFAULT false,
    concurrency_limit int CHECK (concurrency_limit > 0),
    version_timeout   interval CHECK (version_timeout > '0'::interval),
    paused_partitions int4[] NOT NULL DEFAULT '{}',
    fair              bool NOT NULL DEFAULT false,
    rate_limited      bool NOT NULL DEFAULT false,
    grants_sequence   text COLLATE "C",
    -- edges: no out-of-range time is stored.  Refill rates are checked at
    -- creation and change (from 0.000001 to 1000000 tokens a second); the
    -- constraint keeps a rate that bypassed the API out too, since the
    -- reconciler would otherwise fail on every tick that defers a retry of
    -- its queue.
    CONSTRAINT queues_retry_refill_rate_range
        CHECK (retry_refill_rate >= 0.000001 AND retry_refill_rate <= 1000000)
);
COMMENT ON TABLE durable.queues IS 'queue settings; change them with durable_create_queue, durable_alter_queue, durable_pause and durable_resume';
COMMENT ON COLUMN durable.queues.restricted IS 'only the roles granted (durable.queue_grants) may enqueue into the queue or work on its tasks';
COMMENT ON COLUMN durable.queues.concurrency_limit IS 'the most running tasks of one concurrency key; NULL: no limit';
COMMENT ON COLUMN durable.queues.version_timeout IS 'after how long without a worker that runs its versions a ready task goes to review (NULL: never)';
COMMENT ON COLUMN durable.queues.paused_partitions IS 'the partitions of the queue that hand out no task (durable_pause(queue, partition => n))';
COMMENT ON COLUMN durable.queues.grants_sequence IS 'the sequence of schema durable whose privileges are the queue''s grants (UPDATE: enqueue, USAGE: work), made by its first grant';
COMMENT ON COLUMN durable.queues.fair IS 'claims share the queue between fairness keys by their weights (src/core/fairness.c); set by the first task with a fairness key or durable_set_fairness()';
COMMENT ON COLUMN durable.queues.rate_limited IS 'claims check the rate limits of the tasks they take (src/core/rate_limits.c); set by the first task with rate limits';
SELECT pg_catalog.pg_extension_config_dump('durable.queues', '');
REVOKE ALL ON durable.queues FROM PUBLIC;
GRANT SELECT ON durable.queues TO durable_operator;
