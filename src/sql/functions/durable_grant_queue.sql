CREATE OR REPLACE FUNCTION @extschema@.durable_grant_queue(queue text, role text, privilege text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_grant_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_grant_queue(text, text, text) IS
  'let a role (or public) enqueue into a queue, work on its tasks, or both (''enqueue'', ''work'', ''all''); the queue is restricted to its grants from the first one on';
REVOKE ALL ON FUNCTION @extschema@.durable_grant_queue(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_grant_queue(text, text, text) TO durable_operator;
