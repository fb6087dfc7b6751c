--
-- History on a Citus cluster (tools/citus, after citus.sql distributed
-- durable): days of history are distributed partitions that the
-- coordinator makes ahead and drops whole; the default partitions are
-- drained a shard at a time; the keys of tasks gone go, and a day of events
-- only once no task kept was created before its end.
--
-- durable.maintain_history is called with explicit times, in a transaction
-- that first waits for the history lock (the maintainers' advisory lock on
-- this node, then the table's on every node), so that the coordinator's
-- reconciler (durable.retention of 7 days, the real time) cannot answer
-- 'busy' meanwhile.  The days used lie from 6 to 1 days back: the
-- reconciler neither makes those nor drops them, nor drains rows of them.
--
SET client_min_messages = warning;
\set VERBOSITY terse
SELECT pg_catalog.date_trunc('day', now(), 'UTC') AS today \gset
-- tasks by shard (numbered 1..32), counted in a CTE, shards from the metadata
\set by_shard 'SELECT (SELECT count(*) FROM pg_dist_shard s WHERE s.logicalrelid = ''durable.task_history''::regclass AND s.shardid <= pg_catalog.get_shard_id_for_distribution_column(''durable.task_history'', c.partition_key)) AS shard, sum(c.n) AS tasks FROM c GROUP BY 1 ORDER BY 1'

-- the coordinator's reconciler made the next two days ahead, as
-- distributed partitions colocated with the tasks (today's too, unless rows
-- of today reached a default partition first, while the cluster was made:
-- that day stays there)
SELECT d, count(*) AS tables,
       bool_and(p.partmethod = 'h' AND p.colocationid = (SELECT colocationid FROM pg_dist_partition
                WHERE logicalrelid = 'durable.live_tasks'::regclass)) AS distributed_colocated
FROM generate_series(1, 2) d
CROSS JOIN unnest(ARRAY['task_history', 'step_history', 'event_log']) t
JOIN pg_dist_partition p ON p.logicalrelid::text = 'durable.' || t || '_p' || to_char((:'today'::timestamptz + make_interval(days => d)) AT TIME ZONE 'UTC', 'YYYYMMDD')
GROUP BY d ORDER BY d;

-- a worker may not make or drop days (55000)
SELECT success, result FROM run_command_on_workers($$
    SELECT count(*) FROM durable.maintain_history(now(), NULL, 0)$$);

-- 24 finished tasks with a step each and an idempotency key; their
-- partitions follow from their keys
SELECT durable_create_queue('hist', partitions => 8);
SELECT count(durable_enqueue('hist', jsonb_build_object('n', g), idempotency_key => 'h' || g))
FROM generate_series(1, 24) g;
DO $$
DECLARE
    r record;
BEGIN
    LOOP
        SELECT task_id, fence INTO r FROM durable_claim('hist', 'w');
        EXIT WHEN r.task_id IS NULL;
        PERFORM durable_step(r.task_id, r.fence, 'only', 'pure');
        PERFORM durable_step_start(r.task_id, r.fence, 'only', 1);
        PERFORM durable_commit(r.task_id, r.fence, '{}', step => 'only', expected_version => 2);
        PERFORM durable_commit(r.task_id, r.fence);
    END LOOP;
END
$$;
SELECT count(*) AS finished, count(DISTINCT partition_key) AS partitions
FROM durable.task_history WHERE queue_name = 'hist';
CREATE TEMP TABLE hist AS
SELECT partition_key, task_id, (payload->>'n')::int AS n FROM durable.task_history
WHERE queue_name = 'hist';

-- three days in the past, made on demand (the coordinator may); the
-- default partitions a day's attach locks are waited for here, where the
-- call's part would give up after DURABLE_PART_LOCK_TIMEOUT (once, on a loaded
-- machine, with 55P03 on step_history_default) and leave the day to a tick
BEGIN;
SELECT 1 AS locked FROM pg_advisory_xact_lock('durable.history_horizon'::regclass::oid::int8);
LOCK TABLE durable.history_horizon IN EXCLUSIVE MODE;
LOCK TABLE durable.task_history_default, durable.step_history_default,
  durable.event_log_default IN ACCESS EXCLUSIVE MODE;
SELECT count(*) AS failed
FROM durable.maintain_history(:'today'::timestamptz - interval '3 days' + interval '12 hours', NULL, 0);
COMMIT;
SELECT d, count(*) AS tables, count(p.logicalrelid) AS distributed
FROM generate_series(-3, -1) d
CROSS JOIN unnest(ARRAY['task_history', 'step_history', 'event_log']) t
LEFT JOIN pg_dist_partition p ON p.logicalrelid::text = 'durable.' || t || '_p' || to_char((:'today'::timestamptz + make_interval(days => d)) AT TIME ZONE 'UTC', 'YYYYMMDD')
WHERE to_regclass('durable.' || t || '_p' || to_char((:'today'::timestamptz + make_interval(days => d)) AT TIME ZONE 'UTC', 'YYYYMMDD')) IS NOT NULL
GROUP BY d ORDER BY d;

-- tasks 1..12 finished five days ago, a minute apart (no day of their
-- own: the default partitions), 13..16 three days ago, 17..20 two days
-- ago, 21..24 yesterday, with their steps and events; their keys were
-- made five days ago
WITH x AS MATERIALIZED (
    SELECT n, :'today'::timestamptz - interval '5 days' + interval '12 hours' + make_interval(mins => n) AS at
    FROM generate_series(1, 12) n)
UPDATE durable.task_history h SET finished_at = x.at
FROM x WHERE h.queue_name = 'hist' AND (h.payload->>'n')::int = x.n;
UPDATE durable.task_history SET finished_at = :'today'::timestamptz - interval '3 days' + interval '12 hours'
WHERE queue_name = 'hist' AND (payload->>'n')::int BETWEEN 13 AND 16;
UPDATE durable.task_history SET finished_at = :'today'::timestamptz - interval '2 days' + interval '12 hours'
WHERE queue_name = 'hist' AND (payload->>'n')::int BETWEEN 17 AND 20;
UPDATE durable.task_history SET finished_at = :'today'::timestamptz - interval '1 day' + interval '12 hours'
WHERE queue_name = 'hist' AND (payload->>'n')::int BETWEEN 21 AND 24;
UPDATE durable.step_history s SET finished_at = h.finished_at
FROM durable.task_history h
WHERE h.queue_name = 'hist' AND s.partition_key = h.partition_key AND s.task_id = h.task_id;
UPDATE durable.event_log e SET at = h.finished_at
FROM durable.task_history h
WHERE h.queue_name = 'hist' AND e.partition_key = h.partition_key AND e.task_id = h.task_id
  AND h.finished_at < :'today';
UPDATE durable.task_keys SET created_at = :'today'::timestamptz - interval '5 days'
WHERE queue_name = 'hist';
SELECT (finished_at AT TIME ZONE 'UTC')::date - (:'today'::timestamptz AT TIME ZONE 'UTC')::date AS day, count(*) AS tasks
FROM durable.task_history WHERE queue_name = 'hist' GROUP BY 1 ORDER BY 1;
SELECT count(*) AS in_default FROM durable.task_history_default WHERE queue_name = 'hist';
SELECT count(*) AS steps_in_default FROM durable.step_history_default s JOIN hist USING (partition_key, task_id);
WITH c AS MATERIALIZED (SELECT partition_key, count(*) AS n FROM durable.task_history_default
                        WHERE queue_name = 'hist' GROUP BY 1)
:by_shard;

-- the default partitions drain a batch at a time, each shard's rows by a
-- statement of its own, with their steps, events and keys; no day goes
-- (cutoff four days ago)
BEGIN;
SELECT 1 AS locked FROM pg_advisory_xact_lock('durable.history_horizon'::regclass::oid::int8);
LOCK TABLE durable.history_horizon IN EXCLUSIVE MODE;
SELECT action, count(*) FROM durable.maintain_history(:'today'::timestamptz + interval '12 hours',
                                                     interval '4 days 12 hours', 5)
GROUP BY 1 ORDER BY 1;
COMMIT;
-- the oldest five (tasks 1..5) went
SELECT array_agg(n ORDER BY n) AS left_in_default FROM durable.task_history_default JOIN hist USING (partition_key, task_id);
WITH c AS MATERIALIZED (SELECT partition_key, count(*) AS n FROM durable.task_history_default
                        WHERE queue_name = 'hist' GROUP BY 1)
:by_shard;
SELECT count(*) AS steps_left_in_default FROM durable.step_history_default s JOIN hist USING (partition_key, task_id);
SELECT count(*) AS keys_left FROM durable.task_keys WHERE queue_name = 'hist';
SELECT count(*) AS tasks_with_events FROM (SELECT DISTINCT task_id FROM durable.event_log e JOIN hist USING (partition_key, task_id)) x;
BEGIN;
SELECT 1 AS locked FROM pg_advisory_xact_lock('durable.history_horizon'::regclass::oid::int8);
LOCK TABLE durable.history_horizon IN EXCLUSIVE MODE;
SELECT action, count(*) FROM durable.maintain_history(:'today'::timestamptz + interval '12 hours',
                                                     interval '4 days 12 hours', 100)
GROUP BY 1 ORDER BY 1;
COMMIT;
WITH c AS MATERIALIZED (SELECT partition_key, count(*) AS n FROM durable.task_history_default
                        WHERE queue_name = 'hist' GROUP BY 1)
:by_shard;
SELECT count(*) AS steps_left_in_default FROM durable.step_history_default s JOIN hist USING (partition_key, task_id);
SELECT count(*) AS keys_left FROM durable.task_keys WHERE queue_name = 'hist';
SELECT count(*) AS tasks_with_events FROM (SELECT DISTINCT task_id FROM durable.event_log e JOIN hist USING (partition_key, task_id)) x;
SELECT count(*) AS problems FROM durable_verify();

-- a whole day goes at once when all of it is older than retention (cutoff
-- two days ago): the day three days back, on every shard; its events stay
-- while a task kept was created before the day's end ...
UPDATE durable.task_history SET created_at = :'today'::timestamptz - interval '3 days' + interval '6 hours'
WHERE queue_name = 'hist' AND (payload->>'n')::int = 24;
BEGIN;
SELECT 1 AS locked FROM pg_advisory_xact_lock('durable.history_horizon'::regclass::oid::int8);
LOCK TABLE durable.history_horizon IN EXCLUSIVE MODE;
SELECT regexp_replace(action, '[0-9]{8}', 'YYYYMMDD') AS action, count(*)
FROM durable.maintain_history(:'today'::timestamptz + interval '12 hours', interval '2 days 12 hours', 100)
GROUP BY 1 ORDER BY 1;
COMMIT;
SELECT t, to_regclass('durable.' || t || '_p' || to_char((:'today'::timestamptz + make_interval(days => d)) AT TIME ZONE 'UTC', 'YYYYMMDD')) IS NOT NULL AS exists,
       EXISTS (SELECT FROM pg_dist_partition
               WHERE logicalrelid::text = 'durable.' || t || '_p' || to_char((:'today'::timestamptz + make_interval(days => d)) AT TIME ZONE 'UTC', 'YYYYMMDD')) AS distributed
FROM (VALUES (-3)) v(d), unnest(ARRAY['task_history', 'step_history', 'event_log']) t ORDER BY 1;
-- no shard of the day's tasks or steps is left on a worker
SELECT result FROM run_command_on_workers($$
    SELECT count(*) FROM pg_catalog.pg_inherits
    WHERE inhrelid::regclass::text ~ ('^durable\.(task|step)_history_p'
        || to_char(now() AT TIME ZONE 'UTC' - interval '3 days', 'YYYYMMDD'))$$);
SELECT (finished_at AT TIME ZONE 'UTC')::date - (:'today'::timestamptz AT TIME ZONE 'UTC')::date AS day, count(*) AS tasks
FROM durable.task_history WHERE queue_name = 'hist' GROUP BY 1 ORDER BY 1;
SELECT count(*) AS steps_kept FROM durable.step_history s JOIN hist USING (partition_key, task_id);
SELECT count(*) AS keys_left FROM durable.task_keys WHERE queue_name = 'hist';
SELECT count(*) AS tasks_with_events FROM (SELECT DISTINCT task_id FROM durable.event_log e JOIN hist USING (partition_key, task_id)) x;
SELECT (removed_before AT TIME ZONE 'UTC')::date - (:'today'::timestamptz AT TIME ZONE 'UTC')::date AS removed_before_day FROM durable.history_horizon;
SELECT count(*) AS problems FROM durable_verify();
-- ... and goes once none is, looked at again ten minutes later
UPDATE durable.task_history SET created_at = finished_at
WHERE queue_name = 'hist' AND (payload->>'n')::int = 24;
BEGIN;
SELECT 1 AS locked FROM pg_advisory_xact_lock('durable.history_horizon'::regclass::oid::int8);
LOCK TABLE durable.history_horizon IN EXCLUSIVE MODE;
SELECT count(*) AS removed
FROM durable.maintain_history(:'today'::timestamptz + interval '12 hours 5 minutes', interval '2 days 12 hours', 100);
SELECT to_regclass('durable.event_log_p' || to_char((:'today'::timestamptz + make_interval(days => d)) AT TIME ZONE 'UTC', 'YYYYMMDD')) IS NOT NULL AS events_kept_until_looked_at
FROM (VALUES (-3)) v(d);
SELECT count(*) AS removed
FROM durable.maintain_history(:'today'::timestamptz + interval '12 hours 11 minutes', interval '2 days 12 hours', 100);
COMMIT;
SELECT to_regclass('durable.event_log_p' || to_char((:'today'::timestamptz + make_interval(days => d)) AT TIME ZONE 'UTC', 'YYYYMMDD')) AS day_of_events FROM (VALUES (-3)) v(d);
SELECT count(*) AS tasks_with_events FROM (SELECT DISTINCT task_id FROM durable.event_log e JOIN hist USING (partition_key, task_id)) x;
SELECT count(*) AS problems FROM durable_verify();

-- nothing half-done: each day that is left has its three tables, each
-- distributed with a shard on every one of its placements, and the
-- coordinator's reconciler has no part of history failing
SELECT d, count(*) AS tables, count(p.logicalrelid) AS distributed
FROM unnest(ARRAY[-3, -2, -1, 1, 2]) d
CROSS JOIN unnest(ARRAY['task_history', 'step_history', 'event_log']) t
LEFT JOIN pg_dist_partition p ON p.logicalrelid::text = 'durable.' || t || '_p' || to_char((:'today'::timestamptz + make_interval(days => d)) AT TIME ZONE 'UTC', 'YYYYMMDD')
WHERE to_regclass('durable.' || t || '_p' || to_char((:'today'::timestamptz + make_interval(days => d)) AT TIME ZONE 'UTC', 'YYYYMMDD')) IS NOT NULL
GROUP BY d ORDER BY d;
SELECT coalesce(bool_and(EXISTS (SELECT FROM pg_dist_partition p WHERE p.logicalrelid = to_regclass(r))), true)
       AS today_distributed
FROM unnest(ARRAY['task_history', 'step_history', 'event_log']) t,
     LATERAL (SELECT 'durable.' || t || '_p' || to_char(:'today'::timestamptz AT TIME ZONE 'UTC', 'YYYYMMDD')) x(r)
WHERE to_regclass(r) IS NOT NULL;
SELECT count(*) AS shards, bool_and(success) AS all_there
FROM run_command_on_shards('durable.task_history_p' || to_char(now() AT TIME ZONE 'UTC' - interval '2 days', 'YYYYMMDD'),
                           $$SELECT count(*) FROM %s$$);
SELECT count(*) AS history_failing FROM durable.tick_failures WHERE part LIKE 'history%';

-- the reconciler's tick on the coordinator does it at durable.retention:
-- a task that finished six days ago, in the default partitions, is kept
-- by the seven days of the coordinator's reconciler, and goes with 1 day
UPDATE durable.task_history SET finished_at = :'today'::timestamptz - interval '6 days' + interval '1 hour'
WHERE queue_name = 'hist' AND (payload->>'n')::int = 23;
UPDATE durable.step_history s SET finished_at = h.finished_at
FROM durable.task_history h
WHERE h.queue_name = 'hist' AND (h.payload->>'n')::int = 23
  AND s.partition_key = h.partition_key AND s.task_id = h.task_id;
SELECT count(*) AS in_default FROM durable.task_history_default WHERE queue_name = 'hist';
SET durable.retention = '1d';
BEGIN;
SELECT 1 AS locked FROM pg_advisory_xact_lock('durable.history_horizon'::regclass::oid::int8);
LOCK TABLE durable.history_horizon IN EXCLUSIVE MODE;
SELECT count(*) > 0 AS removed FROM durable_reconcile(1000) WHERE action = 'removed';
COMMIT;
RESET durable.retention;
SELECT count(*) AS in_default FROM durable.task_history_default WHERE queue_name = 'hist';
SELECT count(*) AS problems FROM durable_verify();
