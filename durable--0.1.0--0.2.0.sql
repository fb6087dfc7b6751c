/* durable--0.1.0--0.2.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.2.0'" to load this file. \quit

-- CREATE EXTENSION durable runs durable--0.1.0.sql and then this script, so
-- a new installation and an updated one are the same by construction.
