-- A queue's schedules go with it (docs/design.md section 12): durable_drop_queue
-- refuses while schedules target the queue (2BP01), cascade => true drops
-- them too.
CREATE OR REPLACE FUNCTION @extschema@.durable_drop_queue(queue text, cascade boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_drop_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_drop_queue(text, boolean) IS
  'drop a queue with its finished tasks and their events; refused while any task is unfinished, and while schedules target it unless cascade drops them too';
REVOKE ALL ON FUNCTION @extschema@.durable_drop_queue(text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_drop_queue(text, boolean) TO durable_operator;
