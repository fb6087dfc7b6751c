--
-- Producers as well as workers (issue 43): what a producer waits for once
-- it enqueued a task, without a grant to read durable.tasks.
--
CREATE OR REPLACE FUNCTION @extschema@.durable_result(task_id bigint)
RETURNS TABLE (state text, result jsonb, error jsonb, finished_at timestamptz, stop_code text)
AS 'MODULE_PATHNAME', 'durable_result'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_result(bigint) IS
  'a task''s state and, once it finished, its result or last error, when, and why it stopped; needs the enqueue or work grant of the task''s queue where it is restricted';
REVOKE ALL ON FUNCTION @extschema@.durable_result(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_result(bigint) TO durable_producer, durable_worker, durable_operator;
