CREATE OR REPLACE FUNCTION @extschema@.durable_claim_reconcile(
    queue text,
    worker text,
    lease interval DEFAULT NULL,
    batch int DEFAULT 1)
RETURNS TABLE (task_id bigint, fence bigint, lease_until timestamptz, step text,
               idempotency_key text, request jsonb)
AS 'MODULE_PATHNAME', 'durable_claim_reconcile'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_claim_reconcile(text, text, interval, int) IS
  'lease tasks whose queryable step''s outcome is unknown to a reconcile handler, which looks it up and records a receipt';
REVOKE ALL ON FUNCTION @extschema@.durable_claim_reconcile(text, text, interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_claim_reconcile(text, text, interval, integer) TO durable_worker;
