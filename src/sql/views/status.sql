-- pg_monitor sees how many parts fail and since when, not their errors;
-- on Citus, the parts of every node's reconciler
CREATE OR REPLACE VIEW durable.status AS
SELECT l.preloaded,
       CASE WHEN NOT l.preloaded THEN 'not preloaded'
            WHEN l.reconciler_database IS DISTINCT FROM current_database()::text THEN 'in another database'
            WHEN NOT l.reconciler_enabled THEN 'disabled'
            WHEN p.pid IS NULL THEN 'not running'
            ELSE 'running' END AS reconciler,
       p.pid AS reconciler_pid,
       l.reconciler_database,
       l.node_id,
       f.failing_parts,
       f.failing_since,
       -- a column of its own, not of f: a reader of the columns above
       -- (pg_monitor) does not call what reads the errors
       (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                   'part', t.part, 'sqlstate', t.sqlstate, 'error', t.error,
                   'failing_since', t.failing_since, 'last_failed_at', t.last_failed_at,
                   'failures', t.failures)
                   OPERATOR(pg_catalog.||) CASE WHEN t.node IS NOT NULL
                       THEN pg_catalog.jsonb_build_object('node', t.node) ELSE '{}' END
                   ORDER BY t.failing_since, t.part, t.node), '[]')
        FROM durable.tick_failures_of_nodes() t) AS failures,
       -- the library this session runs: during an upgrade, the new one
       -- beside the preloaded library of the version before
       l.library_version
FROM durable.library_status() l,
     LATERAL (SELECT durable.reconciler_pid() AS pid) p,
     LATERAL (SELECT pg_catalog.count(*)::int AS failing_parts,
                     pg_catalog.min(t.failing_since) AS failing_since
              FROM durable.failing_parts_of_nodes() t) f;
COMMENT ON VIEW durable.status IS 'whether durable is preloaded, whether a reconciler works in this database (running, not running, disabled, in another database, not preloaded), the database it works in, the node number in task ids, and the parts of its tick that fail (on Citus, of every node''s): how many, since when, and (failures, for durable_operator) each with its error and node; and the version of the library this session runs';
REVOKE ALL ON durable.status FROM PUBLIC;
GRANT SELECT ON durable.status TO durable_operator;
GRANT SELECT (preloaded, reconciler, reconciler_pid, reconciler_database, node_id,
              failing_parts, failing_since, library_version)
    ON durable.status TO pg_monitor;
