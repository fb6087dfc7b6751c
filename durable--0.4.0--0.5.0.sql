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
