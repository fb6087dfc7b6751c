--
-- A queue's retry-token bucket is split evenly over its partitions: each
-- holds retry_capacity / partitions tokens and refills retry_refill_rate /
-- partitions a second (durable.retry_buckets), as on Citus, where a retry
-- then takes its token on its task's node only.  A queue of one partition
-- keeps its bucket in its row (retry_tokens_tick.sql).
--
-- (a retry's own delay is 100 s: no retried task comes due while the file
-- runs, so a claim takes the task it was meant to, however slow the server)
-- Every claim here is begun by its worker (durable_begin), so that a lease
-- that runs out is judged by the recovery table; an unbegun one would go
-- back for nothing (begin.sql).
SELECT durable_create_queue('split', partitions => 2, retry_base => 100, retry_cap => 100,
                            retry_capacity => 2, retry_refill_rate => 0.002);
-- four tasks, two in each partition (enqueues take the partitions in turn)
SELECT count(durable_enqueue('split', jsonb_build_object('n', i))) FROM generate_series(1, 4) i;
SELECT partition_key, count(*) FROM durable.tasks WHERE queue_name = 'split'
GROUP BY 1 HAVING count(*) <> 2;
CREATE TEMP TABLE held AS SELECT task_id, fence FROM durable_claim('split', 'w', batch => 4) c, durable_begin(c.task_id, c.fence) b;
-- each fails once: a partition's first retry has its token (one each), the
-- second waits for its partition's refill, 1000 s at 0.001 a second
SELECT count(durable_fail(task_id, fence, 'transient', '{}')) AS failed
FROM (SELECT * FROM held ORDER BY task_id) h;
SELECT rank() OVER (PARTITION BY t.partition_key ORDER BY t.task_id) AS nth_in_partition,
       e.detail ? 'deferred_until' AS deferred,
       round(extract(epoch FROM t.run_at - now()) / 1000) AS kiloseconds_ahead
FROM durable.tasks t
JOIN durable.events e ON e.partition_key = t.partition_key AND e.task_id = t.task_id
 AND e.kind = 'retry_scheduled'
WHERE t.queue_name = 'split' ORDER BY 1, 2;
-- a bucket per partition; the queue's own is not taken from
SELECT count(*) AS buckets, min(tokens) AS tokens, max(tokens) AS tokens_max
FROM durable.retry_buckets WHERE queue_name = 'split';
SELECT retry_tokens FROM durable.queues WHERE queue_name = 'split';
-- within a reconciler tick, the owed tokens are taken partition by partition
SELECT durable_enqueue('split', '{}') AS t \gset
SELECT fence AS f FROM durable_claim('split', 'w2') c, durable_begin(c.task_id, c.fence) b WHERE task_id = :t \gset
UPDATE durable.live_tasks SET lease_until = now() - interval '1 second' WHERE task_id = :t;
SELECT action FROM durable_reconcile() r
WHERE (SELECT t.queue_name FROM durable.tasks t WHERE t.task_id = r.task_id) IN ('split');
SELECT e.detail ? 'deferred_until' OR t.run_at > now() + interval '100 seconds' AS deferred
FROM durable.tasks t
JOIN durable.events e ON e.partition_key = t.partition_key AND e.task_id = t.task_id
 AND e.kind = 'retry_deferred'
WHERE t.task_id = :t;
-- the bucket removed, and set again, starts full; a dropped queue leaves none
SELECT durable_alter_queue('split', clear => ARRAY['retry_capacity']);
SELECT count(*) AS buckets FROM durable.retry_buckets WHERE queue_name = 'split';
SELECT durable_alter_queue('split', retry_capacity => 2);
SELECT durable_enqueue('split', '{}') AS t \gset
SELECT fence AS f FROM durable_claim('split', 'w3') c, durable_begin(c.task_id, c.fence) b WHERE task_id = :t \gset
SELECT durable_fail(:t, :f, 'transient', '{}');
SELECT tokens FROM durable.retry_buckets WHERE queue_name = 'split';
SELECT count(*) AS cancelled FROM durable.tasks t, LATERAL durable_cancel(t.task_id, 'done')
WHERE t.queue_name = 'split' AND t.state <> 'completed';
SELECT durable_drop_queue('split');
SELECT count(*) AS buckets FROM durable.retry_buckets WHERE queue_name = 'split';

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'split'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
