--
-- durable_reconcile(queue => ...): one queue's expired leases and stuck
-- alarms, and nothing of any other queue, even one whose tasks share its
-- partition; what a test or an operator asks about, and only that.
--
-- Every claim here is begun by its worker (durable_begin), so that a lease
-- that runs out is judged by the recovery table; an unbegun one would go
-- back for nothing (begin.sql).
SET TimeZone = 'UTC';
-- (retries wait an hour: none comes due while the file runs, so each claim
-- takes the task just enqueued, however slow the server)
SELECT durable_create_queue('rq_mine', lease => '1 hour', max_attempts => 5,
                            retry_base => 3600, retry_cap => 3600,
                            progress_timeout => '1 ms');
-- a queue whose partition is rq_mine's: the first of these names whose
-- hash (as durable_create_queue takes it) lands on the same partition
SELECT name AS neighbour FROM (
    SELECT 'rq_neighbour_' || i AS name FROM generate_series(1, 400000) i) n
WHERE ((get_byte(sha256(convert_to(name, 'UTF8')), 0) << 8)
       | get_byte(sha256(convert_to(name, 'UTF8')), 1)) % 32768
    = (SELECT partition_base FROM durable.queues WHERE queue_name = 'rq_mine')
LIMIT 1 \gset
SELECT durable_create_queue(:'neighbour', lease => '1 hour', max_attempts => 5,
                            retry_base => 3600, retry_cap => 3600,
                            progress_timeout => '1 ms');
SELECT count(DISTINCT partition_base) = 1 AS one_partition
FROM durable.queues WHERE queue_name IN ('rq_mine', :'neighbour');
SELECT durable_create_queue('rq_other', lease => '1 hour', max_attempts => 5,
                            retry_base => 3600, retry_cap => 3600);

-- a crashed worker's lease in each
SELECT durable_enqueue('rq_mine', '{}') AS mine \gset
SELECT durable_enqueue(:'neighbour', '{}') AS neighbour_task \gset
SELECT durable_enqueue('rq_other', '{}') AS other \gset
SELECT count(*) AS claimed FROM durable_claim('rq_mine', 'crashed') c, durable_begin(c.task_id, c.fence) b;
SELECT count(*) AS claimed FROM durable_claim(:'neighbour', 'crashed') c, durable_begin(c.task_id, c.fence) b;
SELECT count(*) AS claimed FROM durable_claim('rq_other', 'crashed') c, durable_begin(c.task_id, c.fence) b;
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s'
WHERE task_id IN (:mine, :neighbour_task, :other);

-- only rq_mine's is settled; the others stay as they were
SELECT task_id = :mine AS is_mine, action FROM durable_reconcile(queue => 'rq_mine');
SELECT task_id = :mine AS is_mine, state, fence FROM durable.tasks
WHERE task_id IN (:mine, :neighbour_task, :other) ORDER BY task_id;
SELECT count(*) AS nothing_left FROM durable_reconcile(queue => 'rq_mine');
SELECT task_id = :other AS is_other, action FROM durable_reconcile(queue => 'rq_other', batch => 10);
SELECT task_id = :neighbour_task AS is_neighbours, action FROM durable_reconcile(queue => :'neighbour');

-- stuck alarms too: a lease renewed without progress in two queues of one
-- partition raises the alarm of the queue asked about only
-- (the retried tasks wait out their backoff: these are new ones)
SELECT durable_enqueue('rq_mine', '{}') AS mine \gset
SELECT durable_enqueue(:'neighbour', '{}') AS neighbour_task \gset
SELECT fence AS fm FROM durable_claim('rq_mine', 'slow') c, durable_begin(c.task_id, c.fence) b \gset
SELECT fence AS fn FROM durable_claim(:'neighbour', 'slow') c, durable_begin(c.task_id, c.fence) b \gset
SELECT pg_sleep(0.01);
SELECT durable_heartbeat(:mine, :fm, 'page 1') IS NOT NULL AS renewed;
SELECT durable_heartbeat(:neighbour_task, :fn, 'page 1') IS NOT NULL AS renewed;
SELECT pg_sleep(0.01);
SELECT durable_heartbeat(:mine, :fm, 'page 1') IS NOT NULL AS renewed;
SELECT durable_heartbeat(:neighbour_task, :fn, 'page 1') IS NOT NULL AS renewed;
SELECT task_id = :mine AS is_mine, action FROM durable_reconcile(queue => 'rq_mine');
SELECT task_id = :mine AS is_mine, alarmed FROM durable.stuck_tasks
WHERE queue_name IN ('rq_mine', :'neighbour') ORDER BY task_id;
SELECT task_id = :neighbour_task AS is_neighbours, action FROM durable_reconcile(queue => :'neighbour');

SELECT durable_commit(:mine, :fm);
SELECT durable_commit(:neighbour_task, :fn);

-- a batch bounds it: of two expired leases, one is settled at a time
SELECT durable_enqueue('rq_other', '{}') IS NOT NULL AS enqueued;
SELECT durable_enqueue('rq_other', '{}') IS NOT NULL AS enqueued;
SELECT count(*) AS claimed FROM durable_claim('rq_other', 'crashed', batch => 2) c, durable_begin(c.task_id, c.fence) b;
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s'
WHERE queue_name = 'rq_other' AND state = 'running';
SELECT action, count(*) AS settled FROM durable_reconcile(1, 'rq_other') GROUP BY 1;
SELECT action, count(*) AS settled FROM durable_reconcile(1, 'rq_other') GROUP BY 1;
SELECT count(*) AS settled FROM durable_reconcile(1, 'rq_other');

-- bad input
SELECT * FROM durable_reconcile(queue => 'rq_nowhere');
SELECT * FROM durable_reconcile(queue => '');
SELECT * FROM durable_reconcile(0, 'rq_mine');
SELECT * FROM durable_reconcile(NULL, 'rq_mine');
-- one function, not an overload: an untyped argument, as drivers send
-- one, is still the batch
PREPARE rq_untyped AS SELECT * FROM durable_reconcile($1);
SELECT parameter_types FROM pg_prepared_statements WHERE name = 'rq_untyped';
DEALLOCATE rq_untyped;
-- an operator's function: a role without durable_operator may not call it
CREATE ROLE regress_rq_worker;
GRANT durable_worker TO regress_rq_worker;
SET ROLE regress_rq_worker;
SELECT * FROM durable_reconcile(queue => 'rq_mine');
RESET ROLE;
DROP ROLE regress_rq_worker;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'rq_mine,rq_other,' :neighbour
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
