--
-- 6. Explicit migration, quarantine, and dead letters replayed by
--    partition or reason.
--
CREATE OR REPLACE FUNCTION @extschema@.durable_migrate(
    task_id bigint,
    from_versions jsonb,
    to_versions jsonb,
    operator text,
    evidence jsonb,
    dry_run boolean DEFAULT false)
RETURNS TABLE (task_id bigint, state text, from_versions jsonb, to_versions jsonb, action text)
AS 'MODULE_PATHNAME', 'durable_migrate_task'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_migrate(bigint, jsonb, jsonb, text, jsonb, boolean) IS
  'move a task pinned to from_versions to to_versions, with an event naming the operator and the evidence; refused (55U04) while a step is in doubt';
REVOKE ALL ON FUNCTION @extschema@.durable_migrate(bigint, jsonb, jsonb, text, jsonb, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_migrate(bigint, jsonb, jsonb, text, jsonb, boolean) TO durable_operator, durable_queue_operator;

CREATE OR REPLACE FUNCTION @extschema@.durable_migrate(
    queue text,
    from_versions jsonb,
    to_versions jsonb,
    operator text,
    evidence jsonb,
    dry_run boolean DEFAULT false,
    batch int DEFAULT 1000)
RETURNS TABLE (task_id bigint, state text, from_versions jsonb, to_versions jsonb, action text)
AS 'MODULE_PATHNAME', 'durable_migrate_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_migrate(text, jsonb, jsonb, text, jsonb, boolean, int) IS
  'move up to batch unfinished tasks of a queue pinned to from_versions to to_versions; a task with a step in doubt is reported, not moved';
REVOKE ALL ON FUNCTION @extschema@.durable_migrate(text, jsonb, jsonb, text, jsonb, boolean, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_migrate(text, jsonb, jsonb, text, jsonb, boolean, integer) TO durable_operator, durable_queue_operator;
