--
-- Inbox deduplication and the transactional outbox.
--

SELECT durable_create_queue('msg');
SELECT durable_create_queue('msg_other');

-- inbox: true the first time, false for a duplicate, 55U03 for another payload
SELECT durable_inbox_receive('msg', 'billing', 'msg-1', '{"amount": 10}') AS first,
       durable_inbox_receive('msg', 'billing', 'msg-1', '{"amount": 10}') AS duplicate,
       durable_inbox_receive('msg', 'shipping', 'msg-1', '{"amount": 10}') AS other_consumer;
SELECT durable_inbox_receive('msg', 'billing', 'msg-1', '{"amount": 11}');
SELECT durable_inbox_receive('msg', 'billing', 'msg-2') AS no_payload,
       durable_inbox_receive('msg', 'billing', 'msg-2') AS duplicate_no_payload;
SELECT durable_inbox_receive('msg', 'billing', 'msg-2', '{}');
-- in the caller's transaction: a rolled back receipt was never received
BEGIN;
SELECT durable_inbox_receive('msg', 'billing', 'msg-3');
ROLLBACK;
SELECT durable_inbox_receive('msg', 'billing', 'msg-3') AS received_after_rollback;
SELECT durable_inbox_receive('msg', NULL, 'x');
SELECT durable_inbox_receive(NULL, 'billing', 'x');
SELECT durable_inbox_receive('msg', 'billing', NULL);
SELECT durable_inbox_receive('msg', 'billing', '');
-- a message id is the consumer's within its queue: another queue's is another
SELECT durable_inbox_receive('msg_other', 'billing', 'msg-1', '{"amount": 99}') AS other_queue;
SELECT queue_name, count(*) AS inbox_rows FROM durable.inbox
WHERE queue_name IN ('msg', 'msg_other') GROUP BY 1 ORDER BY 1;

-- outbox: emitted in the business transaction, claimed under a fence, acknowledged
-- (fences start from the clock; this file counts them from 1)
SELECT setval('durable.outbox_fence_seq', 1, false) AS fences_from_1 \gset
BEGIN;
SELECT durable_outbox_emit('msg', 'orders', '{"order": 1}', key => 'customer-7') AS m1 \gset
SELECT durable_outbox_emit('msg', 'orders', '{"order": 2}', key => 'customer-7') AS m2 \gset
COMMIT;
BEGIN;
SELECT durable_outbox_emit('msg', 'orders', '{"order": 3}') > 0 AS emitted_then_rolled_back;
ROLLBACK;
SELECT :m1 < :m2 AS ordered, :m1 & 32767 = :m2 & 32767 AS same_key_same_partition;
SELECT message_id = :m1 AS is_m1, fence AS f1, topic, key, payload, attempt
FROM durable_outbox_claim('msg', 'p1', batch => 1) \gset
\echo :is_m1 :topic :key :payload :attempt
-- p2 gets the other one; nothing is handed out twice under a live lease
SELECT message_id = :m2 AS is_m2, fence AS f2, fence <> :f1 AS own_fence
FROM durable_outbox_claim('msg', 'p2') \gset
\echo :is_m2 :own_fence
SELECT count(*) AS nothing_left FROM durable_outbox_claim('msg', 'p3');
SELECT durable_outbox_ack('msg', ARRAY[:m1, :m1], :f1) AS acked;
SELECT durable_outbox_ack('msg', ARRAY[:m2], :f1);
SELECT durable_outbox_ack('msg', ARRAY[:m1], :f1);
-- an unacknowledged message comes back after its lease, with a new fence
UPDATE durable.outbox SET lease_until = now() - interval '1 s' WHERE message_id = :m2;
SELECT message_id = :m2 AS redelivered, fence > :f2 AS new_fence, attempt
FROM durable_outbox_claim('msg', 'p3');
SELECT durable_outbox_ack('msg', ARRAY[:m2], :f2);
SELECT durable_outbox_ack('msg', ARRAY[]::bigint[], :f2) AS nothing;
SELECT durable_outbox_ack('msg', ARRAY[NULL]::bigint[], :f2);
SELECT durable_outbox_ack('msg', NULL, :f2);
SELECT durable_outbox_claim('msg', 'p4', batch => 0);
SELECT durable_outbox_claim('msg', 'p4', lease => '0 s');
SELECT durable_outbox_emit('msg', 'orders', NULL);
SELECT topic, published_at IS NOT NULL AS published, publisher, attempt
FROM durable.outbox WHERE queue_name IN ('msg', 'msg_other') ORDER BY message_id;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'msg,msg_other'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
