--
-- The calls (see wait.c, child.c, schedule.c, cron.c and enqueue.c).
--
CREATE OR REPLACE FUNCTION @extschema@.durable_sleep(task_id bigint, fence bigint, name text, until timestamptz)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_sleep_until'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_sleep(bigint, bigint, text, timestamptz) IS
  'a named durable timer: ''sleeping'' the first time (the lease ends, the task waits until then), ''elapsed'' when replayed after it';
REVOKE ALL ON FUNCTION @extschema@.durable_sleep(bigint, bigint, text, timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_sleep(bigint, bigint, text, timestamp with time zone) TO durable_worker;

CREATE OR REPLACE FUNCTION @extschema@.durable_sleep(task_id bigint, fence bigint, name text, duration interval)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_sleep_for'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_sleep(bigint, bigint, text, interval) IS
  'a named durable timer for a duration of database time from its first call';
REVOKE ALL ON FUNCTION @extschema@.durable_sleep(bigint, bigint, text, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_sleep(bigint, bigint, text, interval) TO durable_worker;
