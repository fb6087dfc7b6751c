--
-- Dropping a queue removes its finished tasks with their steps and events,
-- so durable_verify() has nothing to report afterwards.
--
SELECT setval('durable.task_seq', 8000) AS first_id_counter;
SELECT durable_create_queue('drop_queue_gone');
SELECT durable_enqueue('drop_queue_gone', '{}') AS t \gset
SELECT fence AS f FROM durable_claim('drop_queue_gone', 'w') \gset
SELECT version AS v FROM durable_step(:t, :f, 'charge', 'idempotent') \gset
SELECT durable_step_start(:t, :f, 'charge', :v) AS v \gset
SELECT durable_commit(:t, :f, '{"ok": true}', step => 'charge', expected_version => :v);
SELECT durable_commit(:t, :f);
SELECT durable_drop_queue('drop_queue_gone');
SELECT (SELECT count(*) FROM durable.tasks WHERE task_id = :t) AS tasks,
       (SELECT count(*) FROM durable.steps WHERE task_id = :t) AS steps,
       (SELECT count(*) FROM durable.events WHERE task_id = :t) AS events;
SELECT count(*) AS disagreements FROM durable_verify();

-- under a transaction snapshot a concurrent enqueue could stay behind
SELECT durable_create_queue('drop_queue_gone');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT durable_drop_queue('drop_queue_gone');
ROLLBACK;
SELECT durable_drop_queue('drop_queue_gone');
SELECT durable_drop_queue('drop_queue_gone');

--
-- A queue's schedules go with it (docs/design.md section 12): while a schedule
-- targets the queue the drop is refused (2BP01, naming the schedules), so
-- that no schedule fires later into a new queue of the same name;
-- cascade => true removes them with the queue, in one transaction.
--
SELECT durable_create_queue('timed');
SELECT durable_schedule('timed_b', '0 * * * *', 'timed', '{"secret": 1}') > now() AS scheduled;
SELECT durable_schedule('timed_a', '0 3 * * *', 'timed') > now() AS scheduled;
SELECT durable_create_queue('elsewhere');
SELECT durable_schedule('timed_other', '0 3 * * *', 'elsewhere') > now() AS scheduled;
SELECT durable_drop_queue('timed');
SELECT durable_drop_queue('timed', cascade => false);
SELECT count(*) AS queues FROM durable.queues WHERE queue_name = 'timed';
-- a cascade that fails later leaves the schedules where they were
SELECT durable_enqueue('timed', '{}') AS t \gset
SELECT durable_drop_queue('timed', cascade => true);
SELECT schedule_name FROM durable.schedules WHERE queue_name IN ('timed', 'elsewhere') ORDER BY 1;
SELECT durable_cancel(:t, 'ops');
SELECT durable_drop_queue('timed', cascade => true);
SELECT schedule_name FROM durable.schedules WHERE queue_name IN ('timed', 'elsewhere') ORDER BY 1;
-- a new queue of the same name gets none of the old occurrences
SELECT durable_create_queue('timed');
UPDATE durable.schedules SET next_run = now() - interval '1 hour' WHERE queue_name = 'timed';
SELECT count(*) AS scheduled FROM durable_reconcile() WHERE action = 'scheduled';
SELECT count(*) AS tasks FROM durable.tasks WHERE queue_name = 'timed';
SELECT durable_drop_queue('timed');
SELECT durable_unschedule('timed_other');
SELECT durable_drop_queue('elsewhere', NULL);
SELECT durable_drop_queue('elsewhere', true);
SELECT count(*) AS disagreements FROM durable_verify();

-- a queue with a concurrency limit: the rows of its keys go with it
SELECT durable_create_queue('drop_queue_limited', concurrency_limit => 1);
SELECT durable_enqueue('drop_queue_limited', '{}', concurrency_key => 'acme') > 0 AS enqueued;
SELECT durable_commit(task_id, fence) FROM durable_claim('drop_queue_limited', 'w');
SELECT queue_name, concurrency_key FROM durable.concurrency_keys WHERE queue_name = 'drop_queue_limited';
SELECT durable_drop_queue('drop_queue_limited');
SELECT count(*) AS key_rows FROM durable.concurrency_keys WHERE queue_name = 'drop_queue_limited';

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'elsewhere,drop_queue_gone,drop_queue_limited,timed'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
