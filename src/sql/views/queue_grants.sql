CREATE OR REPLACE VIEW durable.queue_grants AS
SELECT q.queue_name,
       CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'public'
            ELSE r.rolname::text END AS grantee,
       CASE a.privilege_type WHEN 'UPDATE' THEN 'enqueue' ELSE 'work' END AS privilege
FROM durable.queues q
JOIN pg_catalog.pg_namespace n ON n.nspname OPERATOR(pg_catalog.=) 'durable'
JOIN pg_catalog.pg_class c
  ON c.relnamespace OPERATOR(pg_catalog.=) n.oid
 AND c.relname OPERATOR(pg_catalog.=) q.grants_sequence
CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
WHERE q.restricted AND a.privilege_type IN ('UPDATE', 'USAGE');
COMMENT ON VIEW durable.queue_grants IS 'who may use a restricted queue: enqueue into it, or work on its tasks (the privileges on its grants sequence); grantee ''public'' is everyone';
REVOKE ALL ON durable.queue_grants FROM PUBLIC;
GRANT SELECT ON durable.queue_grants TO durable_operator;
