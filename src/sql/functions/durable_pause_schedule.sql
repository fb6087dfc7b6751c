CREATE OR REPLACE FUNCTION @extschema@.durable_pause_schedule(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_pause_schedule'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_pause_schedule(text) IS
  'pause a schedule: it enqueues nothing until durable_resume_schedule (pausing a paused one changes nothing)';
REVOKE ALL ON FUNCTION @extschema@.durable_pause_schedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_pause_schedule(text) TO durable_operator;
