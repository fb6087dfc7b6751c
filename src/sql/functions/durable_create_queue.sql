CREATE OR REPLACE FUNCTION @extschema@.durable_create_queue(
    queue text,
    lease interval DEFAULT '30 seconds',
    max_attempts int DEFAULT 3,
    retry_base int DEFAULT 2,
    retry_cap int DEFAULT 60,
    deadline interval DEFAULT NULL,
    retry_capacity int DEFAULT NULL,
    retry_refill_rate float8 DEFAULT 10,
    progress_timeout interval DEFAULT NULL,
    partitions int DEFAULT 1,
    notify bool DEFAULT false,
    concurrency_limit int DEFAULT NULL,
    version_timeout interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_create_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_create_queue(text, interval, int, int, int, interval, int, float8, interval, int, bool, int, interval) IS
  'create a queue: default lease, retry budget, retry-token bucket (NULL capacity = unlimited), stuck-alarm timeout, partitions, whether enqueues NOTIFY durable_ready, the most running tasks per concurrency key, and after how long a task no worker runs the versions of goes to review';
REVOKE ALL ON FUNCTION @extschema@.durable_create_queue(text, interval, integer, integer, integer, interval, integer, double precision, interval, integer, boolean, integer, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_create_queue(text, interval, integer, integer, integer, interval, integer, double precision, interval, integer, boolean, integer, interval) TO durable_operator;
