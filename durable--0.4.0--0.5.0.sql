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

--
-- 3. Events belong to a queue.
--

--
-- 4. pg_monitor reads aggregates only; a queue's schedules go with it;
--    a cascading cancel leaves doubt to a person; spawn replays compare
--    every option; request-key fences never restart.
--

-- pg_monitor reads aggregates only (DESIGN section 9): counts and ages per
-- queue, never a payload, a result, an error text, an event name or a
-- list of task ids.  The views that list tasks or schedules stay the
-- operator's; queue_stats counts what review_queue and stuck_tasks list,
-- wait_stats what waiting_tasks lists, and schedule_stats what
-- schedule_list lists.  (durable.status is decided with the tick's parts.)
REVOKE SELECT ON durable.review_queue, durable.stuck_tasks, durable.waiting_tasks,
                 durable.schedule_list
    FROM pg_monitor;

CREATE VIEW durable.schedule_stats AS
SELECT queue_name, count(*) AS schedules,
       count(*) FILTER (WHERE next_run <= now()) AS due,
       now() - min(next_run) FILTER (WHERE next_run <= now()) AS oldest_due_age
FROM durable.schedules
GROUP BY queue_name;
COMMENT ON VIEW durable.schedule_stats IS 'per queue: its schedules, how many are due and not yet enqueued, and the oldest due occurrence''s age';
GRANT SELECT ON durable.schedule_stats TO durable_operator, pg_monitor;

-- A queue's schedules go with it (DESIGN section 12): durable_drop_queue
-- refuses while schedules target the queue (2BP01), cascade => true drops
-- them too.  The new signature gets the old one's grants, whoever was
-- given them (the same C symbol serves both until this update).
CREATE FUNCTION @extschema@.durable_drop_queue(queue text, cascade boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_drop_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_drop_queue(text, boolean) IS
  'drop a queue with its finished tasks and their events; refused while any task is unfinished, and while schedules target it unless cascade drops them too';
REVOKE EXECUTE ON FUNCTION @extschema@.durable_drop_queue(text, boolean) FROM PUBLIC;
DO $$
DECLARE
    old regprocedure := pg_catalog.to_regprocedure('@extschema@.durable_drop_queue(text)');
    g record;
BEGIN
    FOR g IN
        SELECT a.grantee, a.is_grantable
        FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
        WHERE p.oid OPERATOR(pg_catalog.=) old
          AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
          AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.durable_drop_queue(text, boolean) TO %s%s',
                                  CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                       ELSE g.grantee::pg_catalog.regrole::text END,
                                  CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;
DROP FUNCTION @extschema@.durable_drop_queue(text);

-- Request-key fences never restart (DESIGN section 6): like the outbox's,
-- they come from a sequence that every installation starts from the clock
-- (microseconds since 2025-01-01 UTC), so that after DROP and CREATE
-- EXTENSION a key begun again never hands out a fence that a handler of
-- the earlier installation still holds.  It starts past every fence stored
-- too (those of 0.4.0 counted from 1 per key).
CREATE SEQUENCE durable.request_fence_seq AS bigint;
COMMENT ON SEQUENCE durable.request_fence_seq IS 'the fences durable_idempotent_begin hands out; starts from the clock at every installation';
SELECT pg_catalog.pg_extension_config_dump('durable.request_fence_seq', '');
REVOKE ALL ON SEQUENCE durable.request_fence_seq FROM PUBLIC;
SELECT pg_catalog.setval('durable.request_fence_seq',
           GREATEST(c.us, (SELECT pg_catalog.max(fence) FROM durable.idempotency_keys)))
FROM (SELECT pg_catalog.floor(pg_catalog.date_part('epoch',
                 pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-)
                 '2025-01-01 00:00:00+00'::pg_catalog.timestamptz)
             OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8 AS us) c;
