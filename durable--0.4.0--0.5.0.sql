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


--
-- 3. Events belong to a queue.
--

--
-- 4. pg_monitor reads aggregates only; a queue's schedules go with it;
--    a cascading cancel leaves doubt to a person; spawn replays compare
--    every option; request-key fences never restart.
--
