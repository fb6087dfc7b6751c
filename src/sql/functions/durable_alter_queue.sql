CREATE OR REPLACE FUNCTION @extschema@.durable_alter_queue(
    queue text,
    lease interval DEFAULT NULL,
    max_attempts int DEFAULT NULL,
    retry_base int DEFAULT NULL,
    retry_cap int DEFAULT NULL,
    deadline interval DEFAULT NULL,
    retry_capacity int DEFAULT NULL,
    retry_refill_rate float8 DEFAULT NULL,
    progress_timeout interval DEFAULT NULL,
    notify bool DEFAULT NULL,
    clear text[] DEFAULT NULL,
    concurrency_limit int DEFAULT NULL,
    version_timeout interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_alter_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_alter_queue(text, interval, int, int, int, interval, int, float8, interval, bool, text[], int, interval) IS
  'change queue settings; NULL keeps a setting, clear names the optional ones to remove (deadline, retry_capacity, progress_timeout, concurrency_limit, version_timeout)';
REVOKE ALL ON FUNCTION @extschema@.durable_alter_queue(text, interval, integer, integer, integer, interval, integer, double precision, interval, boolean, text[], integer, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_alter_queue(text, interval, integer, integer, integer, interval, integer, double precision, interval, boolean, text[], integer, interval) TO durable_operator;
