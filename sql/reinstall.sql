--
-- Ids and keys are never reused, also across DROP and CREATE EXTENSION, and
-- a library newer than the installed SQL refuses what is no longer safe.
-- Runs in a database of its own, so that the other files keep theirs.
--
SELECT current_database() AS regress_db \gset
CREATE DATABASE durable_reinstall;
\c durable_reinstall
SET client_min_messages = warning;

CREATE EXTENSION durable;
SELECT durable_create_queue('q');
SELECT durable_create_queue('apps');
SELECT durable_enqueue('q', '{}') AS t1 \gset
SELECT fence AS f1 FROM durable_claim('q', 'w') \gset
SELECT idempotency_key AS k1 FROM durable_step(:t1, :f1, 'charge', 'idempotent') \gset
SELECT durable_outbox_emit('apps', 'topic', '{}') AS m1 \gset
SELECT max(fence) AS o1 FROM durable_outbox_claim('apps', 'p') \gset
SELECT installation_id AS i1 FROM durable.installation \gset
SELECT fence AS r1 FROM durable_idempotent_begin('apps', 'api', 'req-1', '{"amount": 5}', lock => '1 hour') \gset

-- ids come from the clock: milliseconds since 2025-01-01 (fences: microseconds)
SELECT (:t1 >> 23) > 40000000000 AS task_counter_from_clock,
       (:m1 >> 23) > 40000000000 AS outbox_counter_from_clock,
       :o1 > 40000000000000 AS outbox_fence_from_clock;

DROP EXTENSION durable;
CREATE EXTENSION durable;
SELECT durable_create_queue('q');
SELECT durable_create_queue('apps');
SELECT durable_enqueue('q', '{}') AS t2 \gset
SELECT fence AS f2 FROM durable_claim('q', 'w') \gset
SELECT idempotency_key AS k2 FROM durable_step(:t2, :f2, 'charge', 'idempotent') \gset
SELECT durable_outbox_emit('apps', 'topic', '{}') AS m2 \gset
SELECT max(fence) AS o2 FROM durable_outbox_claim('apps', 'p') \gset
SELECT fence AS r2 FROM durable_idempotent_begin('apps', 'api', 'req-1', '{"amount": 5}', lock => '1 hour') \gset

SELECT :t2 > :t1 AS task_id_past_old,
       :'k2' <> :'k1' AS step_key_differs,
       :m2 > :m1 AS outbox_id_past_old,
       :o2 > :o1 AS outbox_fence_past_old,
       installation_id <> :'i1' AS new_installation_id,
       :r2 > :r1 AS request_fence_past_old
FROM durable.installation;
-- a handler of the request begun before the reinstall holds a fence that
-- the new owner's is not: it writes nothing
\set VERBOSITY sqlstate
SELECT durable_idempotent_advance('apps', 'api', 'req-1', :r1, 'charged');
SELECT durable_idempotent_finish('apps', 'api', 'req-1', :r1, '{"old": true}');
\set VERBOSITY default
SELECT recovery_point, completed FROM durable.idempotency_keys WHERE key = 'req-1';
-- the same task id and step name would still give another key
SELECT durable_idempotency_key(installation_id::text, :'t1', 'charge') <> :'k1' AS key_of_old_id_differs
FROM durable.installation;

-- the 0.1.0 SQL under this library: every call is refused, saying what to
-- do, until the update; then the same calls work
DROP EXTENSION durable;
CREATE EXTENSION durable VERSION '0.1.0';
SELECT durable_create_queue('q');
SELECT durable_enqueue('q', '{}');
SELECT * FROM durable_idempotent_begin('s', 'k', '{}');
SELECT durable_idempotent_advance('s', 'k', 'p');
SELECT durable_idempotent_finish('s', 'k', '{}');
ALTER EXTENSION durable UPDATE;
SELECT (SELECT count(*) FROM durable.installation) AS installations,
       (SELECT last_value FROM durable.task_seq) > 40000000000 AS counter_moved_on;
SELECT durable_create_queue('q');
SELECT durable_create_queue('apps');
SELECT durable_enqueue('q', '{}') AS t3 \gset
SELECT fence AS f3 FROM durable_claim('q', 'w') \gset
SELECT state FROM durable_step(:t3, :f3, 'charge', 'idempotent');
SELECT status, fence > 40000000000000 AS fence_from_clock FROM durable_idempotent_begin('apps', 's', 'k', '{}');

\c :regress_db
DROP DATABASE durable_reinstall;
