CREATE OR REPLACE FUNCTION @extschema@.durable_resolve(task_id bigint, decision text, operator text,
                                            evidence jsonb, step text DEFAULT NULL,
                                            spent numeric DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_resolve'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_resolve(bigint, text, text, jsonb, text, numeric) IS
  'settle a task in review: mark_committed, mark_not_executed, mark_failed (of the step named, or of the only step in doubt), retry or cancel; records operator and evidence first; spent is what a step marked committed spent';
REVOKE ALL ON FUNCTION @extschema@.durable_resolve(bigint, text, text, jsonb, text, numeric) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_resolve(bigint, text, text, jsonb, text, numeric) TO durable_operator, durable_queue_operator;
