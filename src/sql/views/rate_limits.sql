--
-- The rate limits (src/core/rate_limits.c), each with the room left now in
-- its most used bucket (of its keys, and on Citus of its partitions) and
-- the tasks it holds back: deferred by it (or one of its keys) and not due
-- yet.  Buckets and tasks are aggregated where the rows are, then joined
-- to the definitions (as durable.fairness_keys, for Citus).
--
CREATE OR REPLACE VIEW durable.rate_limits AS
SELECT d.limit_name AS name, d.rate, d.per, d.burst,
       coalesce(b.keys, 0) AS keys,
       greatest(coalesce(pg_catalog.floor(d.burst - b.busiest_us * d.rate::float8 / d.per_us), d.burst), 0)::int
           AS room,
       coalesce(t.deferred, 0) AS deferred
FROM durable.rate_limit_definitions d
LEFT JOIN (
    SELECT limit_name, count(DISTINCT limit_key) AS keys,
           greatest(max(EXTRACT(EPOCH FROM tat - now()) * 1000000), 0)::float8 AS busiest_us
    FROM durable.rate_limit_buckets
    GROUP BY limit_name) b ON b.limit_name = d.limit_name
LEFT JOIN (
    SELECT split_part(rate_limited_by, ':', 1) AS limit_name, count(*) AS deferred
    FROM durable.live_tasks
    WHERE rate_limited_by IS NOT NULL AND state IN ('ready', 'waiting') AND run_at > now()
    GROUP BY 1) t ON t.limit_name = d.limit_name;
COMMENT ON VIEW durable.rate_limits IS 'per rate limit: its rate, period and burst, how many keys it has buckets for, the units its most used bucket has room for now, and the tasks it has deferred that are not due yet';
REVOKE ALL ON durable.rate_limits FROM PUBLIC;
GRANT SELECT ON durable.rate_limits TO durable_operator;
