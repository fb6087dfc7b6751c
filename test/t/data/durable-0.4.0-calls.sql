-- The calls that made test/t/data/durable-0.4.0.sql, run with psql on the
-- 0.4.0 library in an empty database (then: UPDATE of the schedule's next run).
\set ON_ERROR_STOP 1
CREATE EXTENSION durable;
SELECT extversion FROM pg_extension WHERE extname = 'durable';
SELECT durable_create_queue('old', lease => '1 hour', max_attempts => 5);
SELECT durable_create_queue('side', lease => '1 hour');
SELECT durable_create_queue('fin', lease => '1 hour');
-- a task asleep
SELECT durable_enqueue('old', '{"case": "sleep"}') AS t \gset
SELECT fence AS f FROM durable_claim('old', 'w1') \gset
SELECT durable_sleep(:t, :f, 'nap', interval '1 second');
-- a task awaiting an event nobody emitted yet
SELECT durable_enqueue('old', '{"case": "await"}') AS t \gset
SELECT fence AS f FROM durable_claim('old', 'w1') \gset
SELECT * FROM durable_await(:t, :f, 'hook', 'e1', interval '100 years');
-- an event emitted before anybody awaited it, and one that was received
SELECT durable_emit('e2', '{"early": true}');
SELECT durable_emit('e3', '{"seen": true}');
SELECT durable_enqueue('old', '{"case": "received"}') AS t \gset
SELECT fence AS f FROM durable_claim('old', 'w1') \gset
SELECT * FROM durable_await(:t, :f, 'got', 'e3', interval '100 years');
SELECT durable_commit(:t, :f, result => '{"done": "received"}');
-- a parent joining a child it spawned
SELECT durable_enqueue('old', '{"case": "parent"}') AS t \gset
SELECT fence AS f FROM durable_claim('old', 'w1') \gset
SELECT durable_spawn(:t, :f, 'kid', 'side', '{"case": "child"}') AS child \gset
SELECT * FROM durable_join(:t, :f, 'kids');
-- a finished task with a step, and a failed one, in history
SELECT durable_enqueue('fin', '{"case": "done"}', idempotency_key => 'done-1') AS t \gset
SELECT fence AS f FROM durable_claim('fin', 'w2') \gset
SELECT (durable_step(:t, :f, 'charge', 'idempotent', '{"amount": 5}')).state;
SELECT durable_step_start(:t, :f, 'charge', 1);
SELECT durable_commit(:t, :f, result => '{"charged": 5}', step => 'charge', expected_version => 2);
SELECT durable_commit(:t, :f, result => '{"ok": true}');
SELECT durable_enqueue('fin', '{"case": "failed"}') AS t \gset
SELECT fence AS f FROM durable_claim('fin', 'w2') \gset
SELECT durable_fail(:t, :f, 'permanent', '{"why": "bad card"}');
-- a task running with a step started: its lease runs out before the update
SELECT durable_enqueue('old', '{"case": "running"}') AS t \gset
SELECT fence AS f FROM durable_claim('old', 'w3', lease => '1 second') \gset
SELECT (durable_step(:t, :f, 'mail', 'idempotent', '{"to": "a"}')).state;
SELECT durable_step_start(:t, :f, 'mail', 1);
-- a ready task, a schedule, request keys, inbox and outbox
SELECT durable_enqueue('old', '{"case": "ready"}');
SELECT durable_schedule('nightly', '0 3 * * *', 'old', '{"case": "scheduled"}') IS NOT NULL;
UPDATE durable.schedules SET next_run = now() - interval '1 hour';
SELECT fence AS kf FROM durable_idempotent_begin('http', 'req-1', '{"a": 1}') \gset
SELECT durable_idempotent_finish('http', 'req-1', :kf, '{"r": 1}', interval '100 years');
SELECT durable_inbox_receive('consumer', 'msg-1', '{"m": 1}');
SELECT durable_outbox_emit('topic', '{"o": 1}', 'k1');
SELECT count(*) AS verify_problems FROM durable_verify();
SELECT state, count(*) FROM durable.tasks GROUP BY 1 ORDER BY 1;
