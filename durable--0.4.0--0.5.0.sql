/* durable--0.4.0--0.5.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.5.0'" to load this file. \quit

--
-- Nothing stops the reconciler, and no application reaches another's work
-- (DESIGN sections 7, 9 and 12).
--

--
-- 1. Tick isolation: each part of a tick in its own subtransaction, its
--    failures kept (and shown) until it recovers.
--

--
-- 2. Pinned settings: nothing a session, a role or a database owner sets
--    changes what durable's SQL functions compute.
--
-- Every function written in SQL or PL/pgSQL runs with the settings whose
-- value changes a text form it reads or writes: to_jsonb of a time or an
-- interval (the recovery package), format() of one, a literal it parses.
-- The C functions read and write no such text (their statements build
-- times in jsonb in UTC), so the hot path takes no SET clause.
-- durable.maintain_history is pinned where section 1 replaces it.  A
-- function created or replaced after this section (CREATE OR REPLACE drops
-- the settings of the one it replaces) must carry the same SET clauses:
-- test/t/015_hostile_settings.pl checks every one.
ALTER FUNCTION @extschema@.durable_recovery_package(bigint)
    SET search_path = pg_catalog, pg_temp SET DateStyle = 'ISO, MDY'
    SET IntervalStyle = 'postgres' SET TimeZone = 'UTC' SET extra_float_digits = 1;
ALTER FUNCTION @extschema@.durable_verify()
    SET search_path = pg_catalog, pg_temp SET DateStyle = 'ISO, MDY'
    SET IntervalStyle = 'postgres' SET TimeZone = 'UTC' SET extra_float_digits = 1;
ALTER FUNCTION @extschema@.durable_enable_citus(int)
    SET search_path = pg_catalog, pg_temp SET DateStyle = 'ISO, MDY'
    SET IntervalStyle = 'postgres' SET TimeZone = 'UTC' SET extra_float_digits = 1;
ALTER FUNCTION durable.reconciler_pid()
    SET search_path = pg_catalog, pg_temp SET DateStyle = 'ISO, MDY'
    SET IntervalStyle = 'postgres' SET TimeZone = 'UTC' SET extra_float_digits = 1;
ALTER FUNCTION durable.index_history(text, text)
    SET search_path = pg_catalog, pg_temp SET DateStyle = 'ISO, MDY'
    SET IntervalStyle = 'postgres' SET TimeZone = 'UTC' SET extra_float_digits = 1;

-- A view has no SET clause: the two that count stuck tasks subtract the
-- queue's progress_timeout on the UTC calendar, as the reconciler's stuck
-- alarm does, not in the reader's TimeZone (a timeout of days would move
-- by an hour across a change to summer time).
CREATE OR REPLACE VIEW durable.stuck_tasks AS
SELECT t.task_id, t.queue_name, t.owner, t.progress, t.progress_at,
       now() - t.progress_at AS without_progress_for, q.progress_timeout,
       t.stuck_alarm_at IS NOT NULL AND t.stuck_alarm_at >= t.progress_at AS alarmed
FROM durable.live_tasks t JOIN durable.queues q ON q.queue_name = t.queue_name
WHERE t.state = 'running' AND q.progress_timeout IS NOT NULL
  AND t.progress_at < pg_catalog.timezone('UTC', pg_catalog.timezone('UTC', now()) - q.progress_timeout);

CREATE OR REPLACE VIEW durable.queue_stats AS
SELECT q.queue_name, q.paused,
       coalesce(l.ready, 0) AS ready, coalesce(l.waiting, 0) AS waiting,
       coalesce(l.running, 0) AS running, coalesce(l.needs_review, 0) AS needs_review,
       coalesce(h.completed, 0) AS completed, coalesce(h.failed, 0) AS failed,
       coalesce(h.cancelled, 0) AS cancelled,
       l.oldest_due_age, l.oldest_heartbeat_age,
       coalesce(l.expired_leases, 0) AS expired_leases, coalesce(l.stuck, 0) AS stuck
FROM durable.queues q
LEFT JOIN (
    SELECT t.queue_name,
           count(*) FILTER (WHERE t.state = 'ready') AS ready,
           count(*) FILTER (WHERE t.state = 'waiting') AS waiting,
           count(*) FILTER (WHERE t.state = 'running') AS running,
           count(*) FILTER (WHERE t.state = 'needs_review') AS needs_review,
           now() - min(t.run_at) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now()) AS oldest_due_age,
           now() - min(t.heartbeat_at) FILTER (WHERE t.state = 'running') AS oldest_heartbeat_age,
           count(*) FILTER (WHERE t.state = 'running' AND t.lease_until < now()) AS expired_leases,
           count(*) FILTER (WHERE t.state = 'running' AND p.progress_timeout IS NOT NULL
                              AND t.progress_at < pg_catalog.timezone('UTC',
                                  pg_catalog.timezone('UTC', now()) - p.progress_timeout)) AS stuck
    FROM durable.live_tasks t JOIN durable.queues p ON p.queue_name = t.queue_name
    GROUP BY t.queue_name) l ON l.queue_name = q.queue_name
LEFT JOIN (
    SELECT t.queue_name,
           count(*) FILTER (WHERE t.state = 'completed') AS completed,
           count(*) FILTER (WHERE t.state = 'failed') AS failed,
           count(*) FILTER (WHERE t.state = 'cancelled') AS cancelled
    FROM durable.task_history t
    GROUP BY t.queue_name) h ON h.queue_name = q.queue_name;


--
-- 3. Events belong to a queue.
--

--
-- 4. pg_monitor reads aggregates only; a queue's schedules go with it;
--    a cascading cancel leaves doubt to a person; spawn replays compare
--    every option; request-key fences never restart.
--
