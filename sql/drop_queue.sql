--
-- Dropping a queue removes its finished tasks with their steps and events,
-- so durable_verify() has nothing to report afterwards.
--
SELECT setval('durable.task_seq', 8000) AS first_id_counter;
SELECT durable_create_queue('gone');
SELECT durable_enqueue('gone', '{}') AS t \gset
SELECT fence AS f FROM durable_claim('gone', 'w') \gset
SELECT version AS v FROM durable_step(:t, :f, 'charge', 'idempotent') \gset
SELECT durable_step_start(:t, :f, 'charge', :v) AS v \gset
SELECT durable_commit(:t, :f, '{"ok": true}', step => 'charge', expected_version => :v);
SELECT durable_commit(:t, :f);
SELECT durable_drop_queue('gone');
SELECT (SELECT count(*) FROM durable.tasks WHERE task_id = :t) AS tasks,
       (SELECT count(*) FROM durable.steps WHERE task_id = :t) AS steps,
       (SELECT count(*) FROM durable.events WHERE task_id = :t) AS events;
SELECT count(*) AS disagreements FROM durable_verify();

-- under a transaction snapshot a concurrent enqueue could stay behind
SELECT durable_create_queue('gone');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT durable_drop_queue('gone');
ROLLBACK;
SELECT durable_drop_queue('gone');
SELECT durable_drop_queue('gone');
