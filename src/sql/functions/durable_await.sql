CREATE OR REPLACE FUNCTION @extschema@.durable_await(task_id bigint, fence bigint, name text, event text,
                                          timeout interval DEFAULT NULL, queue text DEFAULT NULL)
RETURNS TABLE (status text, payload jsonb)
AS 'MODULE_PATHNAME', 'durable_await'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_await(bigint, bigint, text, text, interval, text) IS
  'a named wait for an event of the task''s queue (or of queue, with its work grant): (''received'', payload) once emitted, else (''waiting'', NULL) and the task waits; (''timed_out'', NULL) for ever after the timeout';
REVOKE ALL ON FUNCTION @extschema@.durable_await(bigint, bigint, text, text, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_await(bigint, bigint, text, text, interval, text) TO durable_worker;
