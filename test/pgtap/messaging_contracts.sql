-- SQLSTATE contracts of the inbox, the outbox and request idempotency, and
-- who may call them.
BEGIN;
SELECT plan(17);

SELECT lives_ok($$SELECT durable_inbox_receive('c', 'm-1', '{"a": 1}')$$, 'first delivery');
SELECT is(durable_inbox_receive('c', 'm-1', '{"a": 1}'), false, 'a duplicate is false');
SELECT throws_ok($$SELECT durable_inbox_receive('c', 'm-1', '{"a": 2}')$$, '55U03', NULL,
                 'the same message id with another payload is 55U03');

SELECT durable_outbox_emit('t', '{"n": 1}');
CREATE TEMP TABLE leased AS SELECT message_id, fence FROM durable_outbox_claim('p');
SELECT throws_ok($$SELECT durable_outbox_ack(array_agg(message_id), max(fence) + 1) FROM leased$$,
                 '55U01', NULL, 'an ack under another fence is 55U01');
SELECT is((SELECT durable_outbox_ack(array_agg(message_id), max(fence)) FROM leased), 1,
          'an ack under the fence publishes');

-- fences come from a sequence that starts from the clock: the one handed out
CREATE TEMP TABLE began AS SELECT * FROM durable_idempotent_begin('s', 'k', '{"x": 1}');
SELECT is((SELECT status FROM began), 'started', 'begin');
SELECT throws_ok($$SELECT durable_idempotent_begin('s', 'k', '{"x": 2}')$$, '55U03', NULL,
                 'another request under the key is 55U03');
SELECT throws_ok($$SELECT durable_idempotent_advance('s', 'k', fence + 1, 'p') FROM began$$, '55U01', NULL,
                 'an advance under another fence is 55U01');
SELECT throws_ok($$SELECT durable_idempotent_finish('s', 'k', 0, '{"ok": true}')$$, '55U01', NULL,
                 'a finish under another fence is 55U01');
SELECT lives_ok($$SELECT durable_idempotent_finish('s', 'k', fence, '{"ok": true}') FROM began$$, 'finish');
SELECT throws_ok($$SELECT durable_idempotent_finish('s', 'k', fence, '{"ok": true}') FROM began$$, '55U04', NULL,
                 'finishing twice is 55U04');
SELECT throws_ok($$SELECT durable_idempotent_advance('s', 'nope', 1, 'p')$$, '42704', NULL,
                 'an unknown key is 42704');

SELECT function_privs_are('public', 'durable_inbox_receive', ARRAY['text', 'text', 'jsonb'],
                          'durable_worker', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'durable_outbox_claim', ARRAY['text', 'integer', 'interval'],
                          'durable_producer', ARRAY[]::text[]);
SELECT function_privs_are('public', 'durable_idempotent_begin', ARRAY['text', 'text', 'jsonb', 'interval'],
                          'durable_producer', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'durable_idempotent_finish', ARRAY['text', 'text', 'bigint', 'jsonb', 'interval'],
                          'durable_producer', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'durable_step', ARRAY['bigint', 'bigint', 'text', 'text', 'jsonb', 'text'],
                          'durable_producer', ARRAY[]::text[]);

SELECT * FROM finish();
ROLLBACK;
