/* durable--0.1.0--0.2.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.2.0'" to load this file. \quit

-- CREATE EXTENSION durable runs durable--0.1.0.sql and then this script, so
-- a new installation and an updated one are the same by construction.

--
-- edges: request-level idempotency is fenced (DESIGN section 6).  Every
-- 'started' hands out a new fence; advance and finish carry it, and a
-- stale one is 55U01 with nothing written.  The signatures change, so the
-- three functions are dropped and created again with their grants.
--
ALTER TABLE durable.idempotency_keys ADD COLUMN fence bigint NOT NULL DEFAULT 1;
ALTER TABLE durable.idempotency_keys ALTER COLUMN fence DROP DEFAULT;
COMMENT ON COLUMN durable.idempotency_keys.fence IS 'the fence of the handler that owns the request; each takeover increments it';

DROP FUNCTION @extschema@.durable_idempotent_begin(text, text, jsonb, interval);
DROP FUNCTION @extschema@.durable_idempotent_advance(text, text, text, interval);
DROP FUNCTION @extschema@.durable_idempotent_finish(text, text, jsonb, interval);

CREATE FUNCTION @extschema@.durable_idempotent_begin(scope text, key text, request jsonb,
                                                     lock interval DEFAULT '1 minute')
RETURNS TABLE (status text, recovery_point text, fence bigint, response jsonb)
AS 'MODULE_PATHNAME', 'durable_idempotent_begin'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_idempotent_begin(text, text, jsonb, interval) IS
  'begin a request under an idempotency key: started (with the fence that owns it), in_progress or completed (with the stored response)';

CREATE FUNCTION @extschema@.durable_idempotent_advance(scope text, key text, fence bigint,
                                                       recovery_point text,
                                                       lock interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_idempotent_advance'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_idempotent_advance(text, text, bigint, text, interval) IS
  'record the recovery point a request has reached, under the fence that owns it';

CREATE FUNCTION @extschema@.durable_idempotent_finish(scope text, key text, fence bigint,
                                                      response jsonb,
                                                      retention interval DEFAULT '24 hours')
RETURNS void
AS 'MODULE_PATHNAME', 'durable_idempotent_finish'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_idempotent_finish(text, text, bigint, jsonb, interval) IS
  'store the response of a request under the fence that owns it; later begins get it back until the retention has passed';

REVOKE EXECUTE ON FUNCTION
    @extschema@.durable_idempotent_begin(text, text, jsonb, interval),
    @extschema@.durable_idempotent_advance(text, text, bigint, text, interval),
    @extschema@.durable_idempotent_finish(text, text, bigint, jsonb, interval)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_idempotent_begin(text, text, jsonb, interval),
    @extschema@.durable_idempotent_advance(text, text, bigint, text, interval),
    @extschema@.durable_idempotent_finish(text, text, bigint, jsonb, interval)
TO durable_worker, durable_producer;
