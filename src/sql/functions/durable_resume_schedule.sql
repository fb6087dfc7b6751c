CREATE OR REPLACE FUNCTION @extschema@.durable_resume_schedule(name text)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'durable_resume_schedule'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_resume_schedule(text) IS
  'resume a paused schedule from its next occurrence after now (those it missed are not enqueued); returns that next run';
REVOKE ALL ON FUNCTION @extschema@.durable_resume_schedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_resume_schedule(text) TO durable_operator;
