-- the node-local part of task ids; durable.node_id keeps nodes apart
CREATE SEQUENCE durable.task_seq AS bigint MAXVALUE 1099511627775 NO CYCLE;  -- 2^40 - 1
CREATE SEQUENCE durable.outbox_seq AS bigint MAXVALUE 1099511627775 NO CYCLE;
CREATE SEQUENCE durable.outbox_fence_seq AS bigint;

-- Request-key fences never restart (docs/design.md section 6): like the outbox's,
-- they come from a sequence that every installation starts from the clock
-- (microseconds since 2025-01-01 UTC), so that after DROP and CREATE
-- EXTENSION a key begun again never hands out a fence that a handler of
-- the earlier installation still holds.
CREATE SEQUENCE durable.request_fence_seq AS bigint;
COMMENT ON SEQUENCE durable.request_fence_seq IS 'the fences durable_idempotent_begin hands out; starts from the clock at every installation';

SELECT pg_catalog.pg_extension_config_dump('durable.task_seq', '');
SELECT pg_catalog.pg_extension_config_dump('durable.outbox_seq', '');
SELECT pg_catalog.pg_extension_config_dump('durable.outbox_fence_seq', '');
SELECT pg_catalog.pg_extension_config_dump('durable.request_fence_seq', '');
REVOKE ALL ON SEQUENCE durable.task_seq, durable.outbox_seq, durable.outbox_fence_seq,
    durable.request_fence_seq FROM PUBLIC;

-- The id counters start from the clock: task and outbox ids (40-bit
-- counters) at the milliseconds since 2025-01-01 UTC, outbox and request
-- fences (64-bit) at the microseconds.  A new installation's first id is
-- past every id of an earlier one as long as that one handed out fewer ids
-- than milliseconds (fences: microseconds) went by between the two
-- installations, i.e. at most 1000 ids a second on average.  The 40-bit
-- counter lasts until 2^40 ms after the epoch (November 2059) for an
-- installation that keeps to that rate.
--
-- A restore runs CREATE EXTENSION (a new row in durable.installation, the
-- clock seeds) and then copies the dumped rows and sequence values in: the
-- restored tasks keep their ids, and the sequences continue after them.
SELECT pg_catalog.setval('durable.task_seq', c.us OPERATOR(pg_catalog./) 1000),
       pg_catalog.setval('durable.outbox_seq', c.us OPERATOR(pg_catalog./) 1000),
       pg_catalog.setval('durable.outbox_fence_seq',
           c.us OPERATOR(pg_catalog./) 1000 OPERATOR(pg_catalog.*) 1000),
       pg_catalog.setval('durable.request_fence_seq', c.us)
FROM (SELECT pg_catalog.floor(pg_catalog.date_part('epoch',
                 pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-)
                 '2025-01-01 00:00:00+00'::pg_catalog.timestamptz)
             OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8 AS us) c;
