/* durable--0.8.0--0.9.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.9.0'" to load this file. \quit

--
-- Edges nobody else controls: what a database owner, a role or one tenant
-- can do no longer stops recovery, leaks across applications or runs as
-- someone else.
--
