--
-- Samples of the queues (src/core/samples.c): a row per queue a minute,
-- kept for two days, for charts over hours.  Read through the view
-- durable.queue_samples, which shows a queue operator its own queues.
--
CREATE TABLE durable.samples (
    at                       timestamptz NOT NULL,
    queue_name               text COLLATE "C" NOT NULL,
    ready                    bigint NOT NULL,
    running                  bigint NOT NULL,
    waiting                  bigint NOT NULL,
    needs_review             bigint NOT NULL,
    oldest_ready_age_seconds float8 NOT NULL,
    enqueued                 bigint,
    completed                bigint,
    failed                   bigint,
    dead_lettered            bigint,
    leases_expired           bigint,
    sent_to_review           bigint,
    counters_since           timestamptz,
    PRIMARY KEY (at, queue_name)
);
COMMENT ON TABLE durable.samples IS 'the queues'' counts and counters, sampled once a minute by the reconciler and kept for 48 hours (read durable.queue_samples)';
REVOKE ALL ON durable.samples FROM PUBLIC;
