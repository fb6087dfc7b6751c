--
-- 8. Counters in shared memory, and metrics for Prometheus from SQL.
--
CREATE OR REPLACE FUNCTION durable.queue_counters(
    OUT queue_name text, OUT enqueued bigint, OUT claimed bigint, OUT completed bigint,
    OUT failed bigint, OUT cancelled bigint, OUT retried bigint, OUT leases_expired bigint,
    OUT sent_to_review bigint, OUT resolved_mark_committed bigint,
    OUT resolved_mark_not_executed bigint, OUT resolved_mark_failed bigint,
    OUT resolved_retry bigint, OUT resolved_cancel bigint, OUT dead_lettered bigint,
    OUT quarantined bigint, OUT replayed bigint, OUT migrated bigint, OUT stale_writes bigint,
    OUT version_conflicts bigint, OUT idempotent_replays bigint, OUT events_emitted bigint,
    OUT wakeups bigint, OUT rate_limited bigint, OUT steps_started bigint,
    OUT steps_left_in_doubt bigint, OUT duplicate_effects bigint,
    OUT finished_after_expiry bigint, OUT recovered bigint, OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'durable_queue_counters'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION durable.queue_counters() IS
  'what durable did in each queue since the server started or durable_reset_counters(): monotonic counters in shared memory (preloaded only)';
REVOKE ALL ON FUNCTION durable.queue_counters() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION durable.queue_counters() TO durable_operator, pg_monitor;
