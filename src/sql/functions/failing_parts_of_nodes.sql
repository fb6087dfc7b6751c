-- What pg_monitor may know of durable.tick_failures_of_nodes(): the
-- failing parts and since when, not their errors (durable.status).
CREATE OR REPLACE FUNCTION durable.failing_parts_of_nodes()
RETURNS TABLE (node text, part text, failing_since timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
SET TimeZone = 'UTC' SET extra_float_digits = 1
AS $$
    SELECT f.node, f.part, f.failing_since FROM durable.tick_failures_of_nodes() f
$$;
COMMENT ON FUNCTION durable.failing_parts_of_nodes() IS
  'the failing parts of the reconciler of every node and since when, without their errors';
REVOKE ALL ON FUNCTION durable.failing_parts_of_nodes() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION durable.failing_parts_of_nodes() TO durable_operator, pg_monitor;
