CREATE OR REPLACE FUNCTION @extschema@.durable_replay_dead_letters(
    queue text,
    batch int DEFAULT 10,
    partition int DEFAULT NULL,
    reason text DEFAULT NULL)
RETURNS TABLE (task_id bigint, action text)
AS 'MODULE_PATHNAME', 'durable_replay_dead_letters'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_replay_dead_letters(text, int, int, text) IS
  'give up to batch failed tasks of a queue (of one partition, of one reason: a stop code or a quarantine''s reason) a new run, oldest first';
REVOKE ALL ON FUNCTION @extschema@.durable_replay_dead_letters(text, integer, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_replay_dead_letters(text, integer, integer, text) TO durable_operator, durable_queue_operator;

-- the same for chosen tasks, by their ids (an operator's selection)
CREATE OR REPLACE FUNCTION @extschema@.durable_replay_dead_letters(task_ids bigint[])
RETURNS TABLE (task_id bigint, action text)
AS 'MODULE_PATHNAME', 'durable_replay_dead_letters_by_id'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_replay_dead_letters(bigint[]) IS
  'give the failed tasks named a new run, each as the queue''s replay would; a row for each: replayed, or why not (not_found, not_failed, step_failed)';
REVOKE ALL ON FUNCTION @extschema@.durable_replay_dead_letters(bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_replay_dead_letters(bigint[]) TO durable_operator, durable_queue_operator;
