CREATE OR REPLACE FUNCTION @extschema@.durable_record_receipt(
    task_id bigint,
    fence bigint,
    step text,
    receipt text,
    effect_id text DEFAULT NULL,
    evidence jsonb DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_record_receipt'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_record_receipt(bigint, bigint, text, text, text, jsonb) IS
  'record external evidence (succeeded, failed_permanent, not_executed) for a started or unknown step; settles an unknown one';
REVOKE ALL ON FUNCTION @extschema@.durable_record_receipt(bigint, bigint, text, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_record_receipt(bigint, bigint, text, text, text, jsonb) TO durable_worker;
