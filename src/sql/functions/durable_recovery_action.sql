CREATE OR REPLACE FUNCTION @extschema@.durable_recovery_action(lease_expired bool, receipt text,
                                                    retry_safe bool, attempts int,
                                                    max_attempts int,
                                                    queryable bool DEFAULT false)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_recovery_action'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.durable_recovery_action(bool, text, bool, int, int, bool) IS
  'recovery of an expired or questioned activity: wait, record_completion, record_failure, reconcile, manual_review, exhausted or retry_same_activity';
