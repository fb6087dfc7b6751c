--
-- Request-level idempotency (begin, advance, finish) for request handlers.
--
-- fences come from a sequence that starts from the clock at every
-- installation; from a known value here, so that they read the same
SELECT setval('durable.request_fence_seq', 100) AS first_fence_counter;
SELECT durable_create_queue('requests');
SELECT * FROM durable_idempotent_begin('requests', 'payments', 'req-1', '{"amount": 100}');
SELECT fence AS f1 FROM durable.idempotency_keys WHERE scope = 'payments' AND key = 'req-1' \gset
-- the same request while the first handler holds it: no fence for it
SELECT * FROM durable_idempotent_begin('requests', 'payments', 'req-1', '{"amount": 100}');
-- another request under the same key
SELECT * FROM durable_idempotent_begin('requests', 'payments', 'req-1', '{"amount": 999}');
-- the handler advances through recovery points, then finishes
SELECT durable_idempotent_advance('requests', 'payments', 'req-1', :f1, 'charge_created');
SELECT * FROM durable_idempotent_begin('requests', 'payments', 'req-1', '{"amount": 100}');
SELECT durable_idempotent_finish('requests', 'payments', 'req-1', :f1, '{"status": 201, "id": "ch_1"}');
SELECT * FROM durable_idempotent_begin('requests', 'payments', 'req-1', '{"amount": 100}');
SELECT durable_idempotent_finish('requests', 'payments', 'req-1', :f1, '{"status": 201}');
SELECT durable_idempotent_advance('requests', 'payments', 'req-1', :f1, 'again');
-- scopes keep keys apart
SELECT status, fence FROM durable_idempotent_begin('requests', 'refunds', 'req-1', '{"amount": 5}');

-- a handler that died: its lock runs out, the next begin resumes at its
-- recovery point under a new fence, and the old fence writes nothing
SELECT status, fence FROM durable_idempotent_begin('requests', 'payments', 'req-2', '{"n": 2}', lock => '1 ms');
SELECT fence AS f2 FROM durable.idempotency_keys WHERE scope = 'payments' AND key = 'req-2' \gset
SELECT durable_idempotent_advance('requests', 'payments', 'req-2', :f2, 'order_saved');
SELECT pg_sleep(0.01);
SELECT * FROM durable_idempotent_begin('requests', 'payments', 'req-2', '{"n": 2}');
SELECT fence AS f2b FROM durable.idempotency_keys WHERE scope = 'payments' AND key = 'req-2' \gset
SELECT :f2b > :f2 AS fence_moved_on;
SELECT * FROM durable_idempotent_begin('requests', 'payments', 'req-2', '{"n": 2}');
SELECT durable_idempotent_advance('requests', 'payments', 'req-2', :f2, 'late');
SELECT durable_idempotent_finish('requests', 'payments', 'req-2', :f2, '{"by": "old"}');
SELECT durable_idempotent_advance('requests', 'payments', 'req-2', 99, 'never handed out');
SELECT recovery_point, completed, fence = :f2b AS new_fence FROM durable.idempotency_keys WHERE key = 'req-2';
SELECT durable_idempotent_finish('requests', 'payments', 'req-2', :f2b, '{"by": "new"}');
SELECT * FROM durable_idempotent_begin('requests', 'payments', 'req-2', '{"n": 2}');

-- after its retention window a key is forgotten: a new request may use it,
-- under a new fence
SELECT status, fence FROM durable_idempotent_begin('requests', 'payments', 'req-3', '{"n": 3}');
SELECT fence AS f3 FROM durable.idempotency_keys WHERE scope = 'payments' AND key = 'req-3' \gset
SELECT durable_idempotent_finish('requests', 'payments', 'req-3', :f3, '{"ok": true}', retention => '1 ms');
SELECT pg_sleep(0.01);
SELECT status, recovery_point, fence > :f3 AS new_fence, response
FROM durable_idempotent_begin('requests', 'payments', 'req-3', '{"n": 4}');
SELECT durable_idempotent_advance('requests', 'payments', 'req-3', :f3, 'stale');

-- bad input
SELECT * FROM durable_idempotent_begin('requests', NULL, 'k', '{}');
SELECT * FROM durable_idempotent_begin('requests', 'payments', NULL, '{}');
SELECT * FROM durable_idempotent_begin('requests', 'payments', '', '{}');
SELECT * FROM durable_idempotent_begin('requests', 'payments', 'k', NULL);
SELECT * FROM durable_idempotent_begin('requests', 'payments', 'k', '{}', lock => '0 s');
SELECT durable_idempotent_advance('requests', 'payments', 'missing', 101, 'x');
SELECT durable_idempotent_finish('requests', 'payments', 'missing', 101, '{}');
SELECT durable_idempotent_finish('requests', 'payments', 'req-2', :f2b, NULL);
SELECT durable_idempotent_advance('requests', 'payments', 'req-2', NULL, 'x');
SELECT durable_idempotent_advance('requests', 'payments', 'req-2', :f2b, NULL);

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'requests'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
