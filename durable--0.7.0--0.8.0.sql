/* durable--0.7.0--0.8.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.8.0'" to load this file. \quit

--
-- Citus as a first-class home: what the calls that ran on one server only
-- need to run on a cluster.
--
