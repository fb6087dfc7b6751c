-- SQLSTATE contracts of the inbox, the outbox and request idempotency, and
-- who may call them.
BEGIN;
SELECT plan(21);
SELECT durable_create_queue('pgtap_msg');

SELECT lives_ok($$SELECT durable_inbox_receive('pgtap_msg', 'c', 'm-1', '{"a": 1}')$$, 'first delivery');
SELECT is(durable_inbox_receive('pgtap_msg', 'c', 'm-1', '{"a": 1}'), false, 'a duplicate is false');
SELECT throws_ok($$SELECT durable_inbox_receive('pgtap_msg', 'c', 'm-1', '{"a": 2}')$$, '55U03', NULL,
                 'the same message id with another payload is 55U03');

SELECT durable_outbox_emit('pgtap_msg', 't', '{"n": 1}');
CREATE TEMP TABLE leased AS SELECT message_id, fence FROM durable_outbox_claim('pgtap_msg', 'p');
SELECT throws_ok($$SELECT durable_outbox_ack('pgtap_msg', array_agg(message_id), max(fence) + 1) FROM leased$$,
                 '55U01', NULL, 'an ack under another fence is 55U01');
SELECT is((SELECT durable_outbox_ack('pgtap_msg', array_agg(message_id), max(fence)) FROM leased), 1,
          'an ack under the fence publishes');

-- fences come from a sequence that starts from the clock: the one handed out
CREATE TEMP TABLE began AS SELECT * FROM durable_idempotent_begin('pgtap_msg', 's', 'k', '{"x": 1}');
SELECT is((SELECT status FROM began), 'started', 'begin');
SELECT throws_ok($$SELECT durable_idempotent_begin('pgtap_msg', 's', 'k', '{"x": 2}')$$, '55U03', NULL,
                 'another request under the key is 55U03');
SELECT throws_ok($$SELECT durable_idempotent_advance('pgtap_msg', 's', 'k', fence + 1, 'p') FROM began$$, '55U01', NULL,
                 'an advance under another fence is 55U01');
SELECT throws_ok($$SELECT durable_idempotent_finish('pgtap_msg', 's', 'k', 0, '{"ok": true}')$$, '55U01', NULL,
                 'a finish under another fence is 55U01');
SELECT lives_ok($$SELECT durable_idempotent_finish('pgtap_msg', 's', 'k', fence, '{"ok": true}') FROM began$$, 'finish');
SELECT throws_ok($$SELECT durable_idempotent_finish('pgtap_msg', 's', 'k', fence, '{"ok": true}') FROM began$$, '55U04', NULL,
                 'finishing twice is 55U04');
SELECT throws_ok($$SELECT durable_idempotent_advance('pgtap_msg', 's', 'nope', 1, 'p')$$, '42704', NULL,
                 'an unknown key is 42704');

-- a restricted queue's messages and keys are its roles' alone: 42501
CREATE ROLE pgtap_msg_owner IN ROLE durable_worker;
CREATE ROLE pgtap_msg_other IN ROLE durable_worker;
SELECT durable_grant_queue('pgtap_msg', 'pgtap_msg_owner', 'all');
SET LOCAL ROLE pgtap_msg_other;
SELECT throws_ok($$SELECT * FROM durable_outbox_claim('pgtap_msg', 'p')$$, '42501', NULL,
                 'another role''s claim of a restricted queue''s outbox is 42501');
SELECT throws_ok($$SELECT durable_outbox_ack('pgtap_msg', ARRAY[1]::bigint[], 1)$$, '42501', NULL,
                 'and so is its acknowledgement');
SELECT throws_ok($$SELECT durable_inbox_receive('pgtap_msg', 'c', 'm-1', '{"a": 1}')$$, '42501', NULL,
                 'and its receipt of the queue''s message id');
SELECT throws_ok($$SELECT durable_idempotent_begin('pgtap_msg', 's', 'k', '{"x": 1}')$$, '42501', NULL,
                 'and its begin of the queue''s request key');
RESET ROLE;

SELECT function_privs_are('public', 'durable_inbox_receive', ARRAY['text', 'text', 'text', 'jsonb'],
                          'durable_worker', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'durable_outbox_claim', ARRAY['text', 'text', 'integer', 'interval'],
                          'durable_producer', ARRAY[]::text[]);
SELECT function_privs_are('public', 'durable_idempotent_begin', ARRAY['text', 'text', 'text', 'jsonb', 'interval'],
                          'durable_producer', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'durable_idempotent_finish', ARRAY['text', 'text', 'text', 'bigint', 'jsonb', 'interval'],
                          'durable_producer', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'durable_step', ARRAY['bigint', 'bigint', 'text', 'text', 'jsonb', 'text'],
                          'durable_producer', ARRAY[]::text[]);

SELECT * FROM finish();
ROLLBACK;
