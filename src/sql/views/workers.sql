CREATE OR REPLACE VIEW durable.workers AS
SELECT w.queue_name, w.worker, w.versions, w.role, w.first_claim_at, w.last_claim_at,
       q.version_timeout,
       q.version_timeout IS NULL
       OR w.last_claim_at > pg_catalog.timezone('UTC', pg_catalog.timezone('UTC', now()) - q.version_timeout)
                            - interval '1 second'
           AS alive
FROM durable.workers_seen w JOIN durable.queues q USING (queue_name);
COMMENT ON VIEW durable.workers IS 'every worker that claimed in a queue: the versions it runs (NULL: it did not say), its first and last claim, and whether it counts as alive for the queue''s version_timeout';
REVOKE ALL ON durable.workers FROM PUBLIC;
GRANT SELECT ON durable.workers TO durable_operator;
