CREATE OR REPLACE FUNCTION @extschema@.durable_next_action(attempts int, max_attempts int,
                                                elapsed interval, deadline interval,
                                                error_class text,
                                                next_delay interval DEFAULT '0')
RETURNS text
AS 'MODULE_PATHNAME', 'durable_next_action'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.durable_next_action(int, int, interval, interval, text, interval) IS
  'retry budget after a failed attempt: schedule_retry, fail_permanent, manual_review, deadline_exceeded or attempts_exhausted';
