--
-- main: the recovery package reaches durable's own objects only (DESIGN
-- section 9).  It used to call durable_recovery_action through the schema
-- the API was installed in, which a database owner can rename and shadow:
-- a superuser reading a package then ran the owner's code.  It now calls
-- a C function in schema durable, which only its owner can change, and
-- recommends what recovery itself would do for every step in doubt.
--
CREATE OR REPLACE FUNCTION durable.recovery_action_of(task_id bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_recovery_action_of'
LANGUAGE C STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION durable.recovery_action_of(bigint) IS
  'the recovery action the reconciler would take for a running task now, without taking it';
REVOKE ALL ON FUNCTION durable.recovery_action_of(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION durable.recovery_action_of(bigint) TO durable_operator;
