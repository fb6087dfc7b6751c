--
-- Request-level idempotency (begin, advance, finish) for request handlers.
--
SELECT * FROM durable_idempotent_begin('payments', 'req-1', '{"amount": 100}');
-- the same request while the first handler holds it: no fence for it
SELECT * FROM durable_idempotent_begin('payments', 'req-1', '{"amount": 100}');
-- another request under the same key
SELECT * FROM durable_idempotent_begin('payments', 'req-1', '{"amount": 999}');
-- the handler advances through recovery points, then finishes
SELECT durable_idempotent_advance('payments', 'req-1', 1, 'charge_created');
SELECT * FROM durable_idempotent_begin('payments', 'req-1', '{"amount": 100}');
SELECT durable_idempotent_finish('payments', 'req-1', 1, '{"status": 201, "id": "ch_1"}');
SELECT * FROM durable_idempotent_begin('payments', 'req-1', '{"amount": 100}');
SELECT durable_idempotent_finish('payments', 'req-1', 1, '{"status": 201}');
SELECT durable_idempotent_advance('payments', 'req-1', 1, 'again');
-- scopes keep keys apart
SELECT status, fence FROM durable_idempotent_begin('refunds', 'req-1', '{"amount": 5}');

-- a handler that died: its lock runs out, the next begin resumes at its
-- recovery point under a new fence, and the old fence writes nothing
SELECT status, fence FROM durable_idempotent_begin('payments', 'req-2', '{"n": 2}', lock => '1 ms');
SELECT durable_idempotent_advance('payments', 'req-2', 1, 'order_saved');
SELECT pg_sleep(0.01);
SELECT * FROM durable_idempotent_begin('payments', 'req-2', '{"n": 2}');
SELECT * FROM durable_idempotent_begin('payments', 'req-2', '{"n": 2}');
SELECT durable_idempotent_advance('payments', 'req-2', 1, 'late');
SELECT durable_idempotent_finish('payments', 'req-2', 1, '{"by": "old"}');
SELECT durable_idempotent_advance('payments', 'req-2', 3, 'never handed out');
SELECT recovery_point, completed, fence FROM durable.idempotency_keys WHERE key = 'req-2';
SELECT durable_idempotent_finish('payments', 'req-2', 2, '{"by": "new"}');
SELECT * FROM durable_idempotent_begin('payments', 'req-2', '{"n": 2}');

-- after its retention window a key is forgotten: a new request may use it,
-- under a new fence
SELECT status, fence FROM durable_idempotent_begin('payments', 'req-3', '{"n": 3}');
SELECT durable_idempotent_finish('payments', 'req-3', 1, '{"ok": true}', retention => '1 ms');
SELECT pg_sleep(0.01);
SELECT * FROM durable_idempotent_begin('payments', 'req-3', '{"n": 4}');
SELECT durable_idempotent_advance('payments', 'req-3', 1, 'stale');

-- bad input
SELECT * FROM durable_idempotent_begin(NULL, 'k', '{}');
SELECT * FROM durable_idempotent_begin('payments', NULL, '{}');
SELECT * FROM durable_idempotent_begin('payments', '', '{}');
SELECT * FROM durable_idempotent_begin('payments', 'k', NULL);
SELECT * FROM durable_idempotent_begin('payments', 'k', '{}', lock => '0 s');
SELECT durable_idempotent_advance('payments', 'missing', 1, 'x');
SELECT durable_idempotent_finish('payments', 'missing', 1, '{}');
SELECT durable_idempotent_finish('payments', 'req-2', 2, NULL);
SELECT durable_idempotent_advance('payments', 'req-2', NULL, 'x');
SELECT durable_idempotent_advance('payments', 'req-2', 2, NULL);
