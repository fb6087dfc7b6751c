--
-- Queues restricted to roles, refusals that keep the fence to themselves,
-- the session role in every event (docs/design.md section 9).
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 4000) AS first_id_counter;
CREATE ROLE regress_app_a LOGIN IN ROLE durable_producer, durable_worker;
CREATE ROLE regress_app_b LOGIN IN ROLE durable_producer, durable_worker;
CREATE ROLE regress_ops IN ROLE durable_operator;
CREATE ROLE regress_a_worker IN ROLE regress_app_a;
SELECT durable_create_queue('billing', lease => '1 minute');
SELECT durable_create_queue('open', lease => '1 minute');

-- a queue is open to every worker until its first grant
SET ROLE regress_app_b;
SELECT durable_enqueue('open', '{"n": 1}') AS t_open \gset
SELECT task_id = :t_open AS claimed, fence AS f_open FROM durable_claim('open', 'b-1') \gset
RESET ROLE;

-- grants are an operator's; they name a queue, a role and a privilege
SET ROLE regress_app_a;
SELECT durable_grant_queue('billing', 'regress_app_a', 'all');
RESET ROLE;
SET ROLE regress_ops;
SELECT durable_grant_queue('billing', 'regress_app_a', 'all');
SELECT durable_grant_queue('billing', 'regress_app_a', 'work');
SELECT durable_grant_queue('billing', 'regress_app_b', 'enqueue');
SELECT durable_grant_queue('billing', 'regress_nobody', 'work');
SELECT durable_grant_queue('nowhere', 'regress_app_a', 'work');
SELECT durable_grant_queue('billing', 'regress_app_a', 'read');
SELECT durable_grant_queue('billing', NULL, 'work');
SELECT durable_grant_queue('billing', 'regress_app_a', NULL);
RESET ROLE;
SELECT queue_name, grantee::regrole, privilege FROM durable.queue_grants
WHERE queue_name IN ('billing', 'open', 'security_payments', 'shipping') ORDER BY 1, 2::text, 3;
SELECT queue_name, restricted FROM durable.queues WHERE queue_name IN ('billing', 'open') ORDER BY 1;

-- the granted role and its members enqueue and work; another only enqueues
SET ROLE regress_app_a;
SELECT durable_enqueue('billing', '{"invoice": 1}') AS t \gset
RESET ROLE;
SET ROLE regress_app_b;
SELECT durable_enqueue('billing', '{"invoice": 2}') AS t2 \gset
SELECT count(*) FROM durable_claim('billing', 'b-1');
RESET ROLE;
SET ROLE regress_a_worker;
SELECT task_id = :t AS claimed, fence AS f FROM durable_claim('billing', 'a-1') \gset
SELECT :'claimed' AS claimed;
RESET ROLE;

-- a foreign worker learns nothing and changes nothing: every fenced call on
-- the queue's tasks is refused before anything about the task is told
SET ROLE regress_app_b;
SELECT durable_heartbeat(:t, 0);
SELECT durable_heartbeat(:t, :f);
SELECT durable_commit(:t, :f);
SELECT durable_commit_batch(ARRAY[:t]::bigint[], ARRAY[:f]::bigint[]);
SELECT durable_commit_and_claim(:t, :f);
SELECT durable_fail(:t, :f, 'permanent');
SELECT durable_step(:t, :f, 'charge', 'queryable');
SELECT durable_checkpoint(:t, :f, '{}', 0);
SELECT durable_claim_reconcile('billing', 'b-1');
-- nor whether its fence is right, nor whether a task id exists at all: one
-- answer, which names no queue, also from a batch heartbeat
SELECT durable_heartbeat(:t, :f + 7);
SELECT * FROM durable_heartbeat_batch(ARRAY[:t]::bigint[], ARRAY[:f]::bigint[]);
SELECT * FROM durable_heartbeat_batch(ARRAY[:t]::bigint[], ARRAY[:f + 7]::bigint[]);
SELECT durable_heartbeat(4999, 1);
SELECT * FROM durable_heartbeat_batch(ARRAY[4999]::bigint[], ARRAY[1]::bigint[]);
SELECT durable_commit(4999, 1);
SELECT durable_commit_batch(ARRAY[4999]::bigint[], ARRAY[1]::bigint[]);
SELECT durable_release(4999, 1);
SELECT durable_step(4999, 1, 'charge', 'queryable');
RESET ROLE;
SELECT state, fence, version FROM durable.tasks WHERE task_id = :t;
-- a role that may work on every restricted queue is told that an unknown
-- task does not exist, as everyone is where no queue is restricted
SET ROLE regress_a_worker;
SELECT durable_heartbeat(4999, 1);
SELECT * FROM durable_heartbeat_batch(ARRAY[4999]::bigint[], ARRAY[1]::bigint[]);
RESET ROLE;

-- on an open queue a wrong fence is refused without telling the right one
SET ROLE regress_app_a;
SELECT durable_heartbeat(:t_open, 0);
SELECT durable_heartbeat(:t_open, :f_open + 5);
RESET ROLE;

-- the holder works as before, and every event records the session role
SET ROLE regress_a_worker;
SELECT state FROM durable_step(:t, :f, 'charge', 'queryable');
SELECT durable_heartbeat(:t, :f) > now() AS renewed;
SELECT durable_commit(:t, :f, '{"paid": true}');
RESET ROLE;
SELECT seq, kind, actor, role FROM durable.events WHERE task_id = :t ORDER BY seq;

-- a revoke keeps the queue restricted; a grant to public opens it again
SET ROLE regress_ops;
SELECT durable_revoke_queue('billing', 'regress_app_a', 'all');
RESET ROLE;
SET ROLE regress_app_a;
SELECT count(*) FROM durable_claim('billing', 'a-1');
RESET ROLE;
SET ROLE regress_ops;
SELECT durable_grant_queue('billing', 'public', 'work');
RESET ROLE;
SET ROLE regress_app_a;
SELECT task_id = :t2 AS claimed, fence AS f2 FROM durable_claim('billing', 'a-1') \gset
SELECT :'claimed' AS claimed, durable_commit(:t2, :f2);
RESET ROLE;

-- Events belong to a queue (docs/design.md sections 9 and 12): emitting into a
-- restricted queue needs its enqueue grant, awaiting another queue's event
-- its work grant, and a refusal tells nothing about the event
SELECT durable_create_queue('security_payments', lease => '1 minute');
SELECT durable_create_queue('shipping', lease => '1 minute');
SET ROLE regress_ops;
SELECT durable_grant_queue('security_payments', 'regress_a_worker', 'all');
RESET ROLE;
SET ROLE regress_a_worker;
SELECT durable_enqueue('security_payments', '{"order": 1}') AS tp \gset
SELECT task_id = :tp AS claimed, fence AS fp FROM durable_claim('security_payments', 'a-1') \gset
SELECT status FROM durable_await(:tp, :fp, 'paid', 'paid:1');
RESET ROLE;
-- a role without the grant cannot wake the task with a forged payload: the
-- same refusal for an event awaited, emitted or unknown
SET ROLE regress_app_b;
SELECT durable_emit('security_payments', 'paid:1', '{"forged": true}');
SELECT durable_emit('security_payments', 'never-heard-of');
RESET ROLE;
SELECT state, waits -> 'paid' ->> 'status' AS wait FROM durable.live_tasks WHERE task_id = :tp;
-- the real emit is the first one, and the task receives it
SET ROLE regress_a_worker;
SELECT durable_emit('security_payments', 'paid:1', '{"amount": 10}');
SELECT fence AS fp FROM durable_claim('security_payments', 'a-1') \gset
SELECT * FROM durable_await(:tp, :fp, 'paid', 'paid:1');
SELECT durable_commit(:tp, :fp);
RESET ROLE;
-- nor can it read the payload from a task of its own queue: awaiting the
-- name there waits for its own queue's event, naming the other queue is
-- refused before anything about the event is told
SET ROLE regress_app_b;
SELECT durable_enqueue('shipping', '{"parcel": 1}') AS tb \gset
SELECT task_id = :tb AS claimed, fence AS fb FROM durable_claim('shipping', 'b-1') \gset
SELECT * FROM durable_await(:tb, :fb, 'peek', 'paid:1', queue => 'security_payments');
SELECT * FROM durable_await(:tb, :fb, 'peek', 'never-heard-of', queue => 'security_payments');
SELECT * FROM durable_await(:tb, :fb, 'peek', 'paid:1');
RESET ROLE;
SELECT task_id = :tb AS same, event_queue, event FROM durable.waiting_tasks WHERE wait_name = 'peek';
-- the same name in its own queue is its own event: both first emits
SET ROLE regress_app_b;
SELECT durable_emit('shipping', 'paid:1', '{"parcel": "paid"}');
SELECT fence AS fb FROM durable_claim('shipping', 'b-1') \gset
SELECT * FROM durable_await(:tb, :fb, 'peek', 'paid:1');
RESET ROLE;
SELECT queue_name, payload, role FROM durable.emitted_events WHERE event = 'paid:1' ORDER BY 1;
-- the enqueue grant lets a role emit, not await; the work grant awaits
SET ROLE regress_ops;
SELECT durable_grant_queue('security_payments', 'regress_app_b', 'enqueue');
RESET ROLE;
SET ROLE regress_app_b;
SELECT durable_emit('security_payments', 'refund:1', '{"amount": 10}');
SELECT * FROM durable_await(:tb, :fb, 'refund', 'refund:1', queue => 'security_payments');
RESET ROLE;
SET ROLE regress_ops;
SELECT durable_grant_queue('security_payments', 'regress_app_b', 'work');
RESET ROLE;
SET ROLE regress_app_b;
SELECT * FROM durable_await(:tb, :fb, 'refund', 'refund:1', queue => 'security_payments');
SELECT durable_commit(:tb, :fb);
RESET ROLE;
-- a queue's events go with it: a new queue of that name starts with none
SELECT durable_drop_queue('security_payments');
SELECT count(*) AS events_left FROM durable.emitted_events WHERE queue_name = 'security_payments';

-- a grant is PostgreSQL's own privilege on the queue's grants sequence:
-- a role cannot be dropped while it holds one, and a rename keeps it
DROP ROLE regress_app_b;
ALTER ROLE regress_app_b RENAME TO regress_app_b2;
SELECT * FROM durable.queue_grants
WHERE queue_name IN ('billing', 'open', 'security_payments', 'shipping') ORDER BY 1, 2, 3;
ALTER ROLE regress_app_b2 RENAME TO regress_app_b;

-- dropping a queue takes its grants with it
SELECT durable_drop_queue('billing');
SELECT count(*) AS grants_left FROM durable.queue_grants WHERE queue_name = 'billing';

-- leave nothing running for the files after this one: its lease would
-- expire under their reconciliations
SELECT durable_cancel(:t_open, 'end of test');

SELECT * FROM durable_verify();
DROP ROLE regress_a_worker, regress_app_a, regress_app_b, regress_ops;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'billing,open,security_payments,shipping'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
