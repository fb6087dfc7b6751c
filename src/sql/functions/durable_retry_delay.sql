--
-- Pure decision functions (docs/design.md section 3).  Same evidence, same decision:
-- the reconciler and durable_fail call the same C code.
--
CREATE OR REPLACE FUNCTION @extschema@.durable_retry_delay(activity_id text, attempt int,
                                                base int DEFAULT 2, cap int DEFAULT 60)
RETURNS int
AS 'MODULE_PATHNAME', 'durable_retry_delay'
LANGUAGE C IMMUTABLE PARALLEL SAFE;  -- not STRICT: a NULL argument is 22004, never a NULL result
COMMENT ON FUNCTION @extschema@.durable_retry_delay(text, int, int, int) IS
  'seconds before the given attempt: min(cap, base * 2^(attempt-1)) with stable SHA-256 jitter in [50%, 100%]';
