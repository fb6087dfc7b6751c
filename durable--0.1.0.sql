/* durable--0.1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION durable" to load this file. \quit

CREATE SCHEMA durable;
COMMENT ON SCHEMA durable IS 'durable''s tables, views and internal functions; change state only through the durable_* API';
REVOKE ALL ON SCHEMA durable FROM PUBLIC;

--
-- Pure decision functions (DESIGN section 3).  Same evidence, same decision:
-- the reconciler and durable_fail call the same C code.
--
CREATE FUNCTION @extschema@.durable_retry_delay(activity_id text, attempt int,
                                                base int DEFAULT 2, cap int DEFAULT 60)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_retry_delay'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.durable_retry_delay(text, int, int, int) IS
  'seconds before the given attempt: min(cap, base * 2^(attempt-1)) with stable SHA-256 jitter in [50%, 100%]';

CREATE FUNCTION @extschema@.durable_next_action(attempts int, max_attempts int,
                                                elapsed interval, deadline interval,
                                                error_class text,
                                                next_delay interval DEFAULT '0')
RETURNS text
AS 'MODULE_PATHNAME', 'durable_next_action'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.durable_next_action(int, int, interval, interval, text, interval) IS
  'retry budget after a failed attempt: schedule_retry, fail_permanent, manual_review, deadline_exceeded or attempts_exhausted';

CREATE FUNCTION @extschema@.durable_recovery_action(lease_expired bool, receipt text,
                                                    retry_safe bool, attempts int,
                                                    max_attempts int,
                                                    queryable bool DEFAULT false)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_recovery_action'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.durable_recovery_action(bool, text, bool, int, int, bool) IS
  'recovery of an expired or questioned activity: wait, record_completion, record_failure, reconcile, manual_review, exhausted or retry_same_activity';

CREATE FUNCTION @extschema@.durable_request_hash(request jsonb)
RETURNS bytea
AS 'MODULE_PATHNAME', 'durable_request_hash'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.durable_request_hash(jsonb) IS
  'SHA-256 of the canonical text of a request; key order and white space never change it';

CREATE FUNCTION @extschema@.durable_idempotency_key(VARIADIC parts text[])
RETURNS text
AS 'MODULE_PATHNAME', 'durable_idempotency_key'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.durable_idempotency_key(text[]) IS
  'stable idempotency key of a logical operation: hex SHA-256 over its length-prefixed parts';
