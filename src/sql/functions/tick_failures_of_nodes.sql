--
-- The failing parts of the reconcilers of every node.  On Citus each node's
-- reconciler keeps its own in durable.tick_failures there: these read
-- every node's, each named by its node (host:port), and a node that does
-- not answer is a failing part of its own ("node", SQLSTATE 08006, with
-- Citus's error).  On one server they read durable.tick_failures, node
-- NULL.  The reads go over Citus's connections as the owner of durable;
-- pg_monitor calls only the one without the errors (durable.status shows
-- it their count and age, durable_operator their text).
--
CREATE OR REPLACE FUNCTION durable.tick_failures_of_nodes()
RETURNS TABLE (node text, part text, sqlstate text, error text,
               failing_since timestamptz, last_failed_at timestamptz, failures bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
SET TimeZone = 'UTC' SET extra_float_digits = 1
AS $$
DECLARE
    distributed bool := false;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition'
                ' WHERE logicalrelid OPERATOR(pg_catalog.=) ''durable.live_tasks''::pg_catalog.regclass)'
            INTO distributed;
    END IF;
    IF NOT distributed THEN
        RETURN QUERY SELECT NULL::text, t.part, t.sqlstate, t.error, t.failing_since,
                            t.last_failed_at, t.failures
                     FROM durable.tick_failures t;
        RETURN;
    END IF;
    RETURN QUERY EXECUTE $q$
        SELECT n.nodename OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) n.nodeport,
               f.part, f.sqlstate, f.error, f.failing_since, f.last_failed_at, f.failures
        FROM pg_catalog.run_command_on_all_nodes(
                 'SELECT COALESCE(pg_catalog.jsonb_agg(t), ''[]'') FROM durable.tick_failures t') r
        JOIN pg_catalog.pg_dist_node n ON n.nodeid OPERATOR(pg_catalog.=) r.nodeid
        CROSS JOIN LATERAL pg_catalog.jsonb_to_recordset(
            CASE WHEN r.success THEN r.result::pg_catalog.jsonb
                 ELSE pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
                     'part', 'node', 'sqlstate', '08006', 'error', r.result,
                     'failing_since', pg_catalog.now(), 'last_failed_at', pg_catalog.now(),
                     'failures', 1))
            END) AS f(part text, sqlstate text, error text, failing_since timestamptz,
                      last_failed_at timestamptz, failures bigint)
    $q$;
END
$$;
COMMENT ON FUNCTION durable.tick_failures_of_nodes() IS
  'the failing parts of the reconciler of every node (on Citus, each by its node; one that does not answer is a failing part), with their errors';
REVOKE ALL ON FUNCTION durable.tick_failures_of_nodes() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION durable.tick_failures_of_nodes() TO durable_operator;
