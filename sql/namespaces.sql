--
-- Outbox messages, inbox entries and request keys belong to a queue: one
-- application neither reads, acknowledges, pre-empts nor starts another's
-- (issue 37, finding 7).  Before 0.9.0 they were one namespace for all.
--
CREATE ROLE regress_ns_billing IN ROLE durable_producer, durable_worker;
CREATE ROLE regress_ns_intruder IN ROLE durable_producer, durable_worker;
SELECT durable_create_queue('ns_billing');
SELECT durable_create_queue('ns_intruder');
SELECT durable_grant_queue('ns_billing', 'regress_ns_billing', 'all');
SELECT durable_grant_queue('ns_intruder', 'regress_ns_intruder', 'all');

-- billing's rows: a message to publish, a message received, a request begun
SET ROLE regress_ns_billing;
SELECT durable_outbox_emit('ns_billing', 'invoices', '{"card": "4111"}', 'inv-1') AS m \gset
SELECT durable_inbox_receive('ns_billing', 'webhooks', 'evt-1', '{"paid": 1}') AS billing_received;
SELECT status AS billing_began, fence AS rf
FROM durable_idempotent_begin('ns_billing', 'http', 'req-1', '{"amount": 1}') \gset
\echo :billing_began
RESET ROLE;

-- the intruder may not claim, acknowledge, receive or begin in billing's
-- queue: 42501, whether the row exists or not, and nothing changes
SET ROLE regress_ns_intruder;
\set VERBOSITY sqlstate
SELECT * FROM durable_outbox_claim('ns_billing', 'thief');
SELECT durable_outbox_ack('ns_billing', ARRAY[:m]::bigint[], 1);
SELECT durable_outbox_ack('ns_billing', ARRAY[1]::bigint[], 1);
SELECT durable_outbox_ack('ns_billing', ARRAY[]::bigint[], 1);
SELECT durable_outbox_emit('ns_billing', 'invoices', '{"forged": true}');
SELECT durable_inbox_receive('ns_billing', 'webhooks', 'evt-1', '{"paid": 1}');
SELECT durable_inbox_receive('ns_billing', 'webhooks', 'evt-2', '{"paid": 2}');
SELECT * FROM durable_idempotent_begin('ns_billing', 'http', 'req-1', '{"amount": 1}');
SELECT * FROM durable_idempotent_begin('ns_billing', 'http', 'req-2', '{"amount": 2}');
SELECT durable_idempotent_advance('ns_billing', 'http', 'req-1', :rf, 'stolen');
SELECT durable_idempotent_finish('ns_billing', 'http', 'req-1', :rf, '{"by": "intruder"}');
SELECT durable_idempotent_advance('ns_billing', 'http', 'nothing', 1, 'x');
\set VERBOSITY default
-- the whole refusal: it names the queue and the grant, nothing of the row
SELECT * FROM durable_outbox_claim('ns_billing', 'thief');
SELECT durable_inbox_receive('ns_billing', 'webhooks', 'evt-1');

-- in its own queue the same names are its own: nothing of billing's is met
SELECT count(*) AS billing_messages_seen FROM durable_outbox_claim('ns_intruder', 'thief');
SELECT durable_outbox_ack('ns_intruder', ARRAY[:m]::bigint[], 1);
SELECT durable_inbox_receive('ns_intruder', 'webhooks', 'evt-1', '{"other": true}') AS own_first;
SELECT status FROM durable_idempotent_begin('ns_intruder', 'http', 'req-1', '{"other": true}');
RESET ROLE;

-- billing finds everything as it left it
SET ROLE regress_ns_billing;
SELECT message_id = :m AS own_message, fence AS of, topic, key, payload
FROM durable_outbox_claim('ns_billing', 'publisher') \gset
\echo :own_message :topic :key :payload
SELECT durable_outbox_ack('ns_billing', ARRAY[:m]::bigint[], :of) AS acked;
SELECT durable_inbox_receive('ns_billing', 'webhooks', 'evt-1', '{"paid": 1}') AS duplicate;
SELECT durable_idempotent_finish('ns_billing', 'http', 'req-1', :rf, '{"status": 201}');
SELECT status, response FROM durable_idempotent_begin('ns_billing', 'http', 'req-1', '{"amount": 1}');
RESET ROLE;
SELECT queue_name, recovery_point, completed FROM durable.idempotency_keys
WHERE queue_name LIKE 'ns\_%' ORDER BY 1;
SELECT queue_name, count(*) FROM durable.inbox WHERE queue_name LIKE 'ns\_%' GROUP BY 1 ORDER BY 1;

-- each row is in one of its queue's partitions
SELECT count(*) AS outside_their_queue FROM (
  SELECT queue_name, partition_key FROM durable.inbox
  UNION ALL SELECT queue_name, partition_key FROM durable.idempotency_keys
  UNION ALL SELECT queue_name, partition_key FROM durable.outbox) r
JOIN durable.queues q USING (queue_name)
WHERE (r.partition_key - q.partition_base + 32768) % 32768 >= q.partitions;

-- an unknown queue is 42704; a queue name is checked as any
SELECT durable_outbox_emit('ns_nowhere', 'invoices', '{}');
SELECT * FROM durable_outbox_claim('ns_nowhere', 'p');
SELECT durable_outbox_ack('ns_nowhere', ARRAY[1]::bigint[], 1);
SELECT durable_inbox_receive('ns_nowhere', 'c', 'm');
SELECT * FROM durable_idempotent_begin('ns_nowhere', 's', 'k', '{}');
SELECT durable_idempotent_finish('ns_nowhere', 's', 'k', 1, '{}');
SELECT durable_outbox_emit(NULL, 'invoices', '{}');
SELECT durable_inbox_receive('', 'c', 'm');
SELECT * FROM durable_idempotent_begin(NULL, 's', 'k', '{}');

-- a dropped queue takes its messages, entries and keys with it
SELECT durable_drop_queue('ns_billing');
SELECT durable_drop_queue('ns_intruder');
SELECT (SELECT count(*) FROM durable.outbox WHERE queue_name LIKE 'ns\_%') AS outbox_left,
       (SELECT count(*) FROM durable.inbox WHERE queue_name LIKE 'ns\_%') AS inbox_left,
       (SELECT count(*) FROM durable.idempotency_keys WHERE queue_name LIKE 'ns\_%') AS keys_left;
DROP ROLE regress_ns_billing, regress_ns_intruder;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'ns_billing,ns_intruder'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
