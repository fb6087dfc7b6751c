--
-- Steps (see step.c for the state machine)
--
CREATE OR REPLACE FUNCTION @extschema@.durable_step(
    task_id bigint,
    fence bigint,
    step text,
    class text,
    request jsonb DEFAULT NULL,
    target text DEFAULT NULL)
RETURNS TABLE (state text, version int, attempt int, idempotency_key text,
               result jsonb, receipt text)
AS 'MODULE_PATHNAME', 'durable_step'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_step(bigint, bigint, text, text, jsonb, text) IS
  'plan a step with its class and stable idempotency key, or return it as it is (a committed step returns its result)';
REVOKE ALL ON FUNCTION @extschema@.durable_step(bigint, bigint, text, text, jsonb, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_step(bigint, bigint, text, text, jsonb, text) TO durable_worker;
