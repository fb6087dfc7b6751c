--
-- A tick's batch is shared fairly between the partitions with expired
-- leases: one queue's backlog does not delay another queue's single
-- expired lease by a tick (issue 37, finding 10).
--
SET TimeZone = 'UTC';
SELECT durable_create_queue('fair_backlog', lease => '1 hour', max_attempts => 5);
SELECT durable_create_queue('fair_single', lease => '1 hour', max_attempts => 5);
SELECT cardinality(durable_enqueue_batch('fair_backlog',
    (SELECT array_agg(jsonb_build_object('n', i)) FROM generate_series(1, 20) i))) AS enqueued;
SELECT durable_enqueue('fair_single', '{}') IS NOT NULL AS enqueued;
SELECT count(*) AS claimed FROM durable_claim('fair_backlog', 'crashed', batch => 20);
SELECT count(*) AS claimed FROM durable_claim('fair_single', 'crashed');
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s'
WHERE queue_name IN ('fair_backlog', 'fair_single');

-- a batch of 4: the single lease gets its share, the backlog the rest
SELECT t.queue_name, count(*) AS settled
FROM durable_reconcile(4) r JOIN durable.tasks t USING (task_id)
GROUP BY 1 ORDER BY 1;

-- a batch of 1, fewer rows than partitions with work: the partition served
-- first moves on each tick, so the single lease waits one tick at most
SELECT durable_enqueue('fair_single', '{}') IS NOT NULL AS enqueued;
SELECT count(*) AS claimed FROM durable_claim('fair_single', 'crashed');
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s'
WHERE queue_name = 'fair_single' AND state = 'running';
SELECT count(*) AS settled FROM durable_reconcile(1);
SELECT count(*) AS settled FROM durable_reconcile(1);
SELECT queue_name, count(*) AS still_running FROM durable.tasks
WHERE queue_name IN ('fair_backlog', 'fair_single') AND state = 'running'
GROUP BY 1 ORDER BY 1;

-- what is left is settled in batches, none lost
SELECT count(*) AS settled FROM durable_reconcile(100);
SELECT count(*) AS running FROM durable.tasks
WHERE queue_name IN ('fair_backlog', 'fair_single') AND state = 'running';

SELECT count(*) AS cancelled FROM (SELECT durable_cancel(task_id, 'done') FROM durable.tasks
    WHERE queue_name IN ('fair_backlog', 'fair_single')) c;
SELECT durable_drop_queue('fair_backlog');
SELECT durable_drop_queue('fair_single');

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'fair_backlog,fair_single'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
