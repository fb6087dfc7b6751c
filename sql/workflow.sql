--
-- The worked workflow of the README, run as written: reserve (idempotent),
-- charge (queryable), email (unsafe); a crash, a reconcile handler, a
-- resumed worker that skips what is done, and a stale worker fenced off.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 4000) AS first_id_counter;
SELECT durable_create_queue('orders', lease => '1 second');
SELECT durable_enqueue('orders', '{"order": 42, "sku": "A1", "amount": 1999}') AS task_id \gset

-- worker-1 claims the order
SELECT fence FROM durable_claim('orders', 'worker-1') \gset

-- step 1, reserve (idempotent): plan, start, call the API with the key, commit
SELECT version, idempotency_key FROM durable_step(:task_id, :fence, 'reserve', 'idempotent', '{"sku": "A1"}') \gset
SELECT durable_step_start(:task_id, :fence, 'reserve', :version) AS version \gset
--   inventory.reserve(sku => 'A1', idempotency_key => :'idempotency_key') returns r-17
SELECT durable_commit(:task_id, :fence, '{"reservation": "r-17"}', step => 'reserve', expected_version => :version);

-- step 2, charge (queryable): started, and worker-1 dies during the call
SELECT version FROM durable_step(:task_id, :fence, 'charge', 'queryable', '{"amount": 1999}') \gset
SELECT durable_step_start(:task_id, :fence, 'charge', :version);
SELECT pg_sleep(1.1);

-- the reconciler (or any claim) finds the lease expired: a queryable step
-- with no receipt is looked up, never resent blindly
SELECT action FROM durable_reconcile() r
WHERE (SELECT t.queue_name FROM durable.tasks t WHERE t.task_id = r.task_id) IN ('orders');
SELECT state, run_at = 'infinity' AS awaiting_lookup FROM durable.tasks WHERE task_id = :task_id;

-- a reconcile handler looks the charge up by its idempotency key
SELECT fence AS handler_fence, step, idempotency_key AS charge_key
FROM durable_claim_reconcile('orders', 'charge-checker') \gset
--   payments.find(idempotency_key => :'charge_key') finds charge ch_1
SELECT durable_record_receipt(:task_id, :handler_fence, 'charge', 'succeeded',
                              effect_id => 'ch_1', evidence => '{"charge": "ch_1"}');

-- worker-2 resumes: committed steps come back with their results, so it skips them
SELECT fence FROM durable_claim('orders', 'worker-2') \gset
SELECT state, result FROM durable_step(:task_id, :fence, 'reserve', 'idempotent', '{"sku": "A1"}');
SELECT state, result FROM durable_step(:task_id, :fence, 'charge', 'queryable', '{"amount": 1999}');

-- step 3, email (unsafe): sent once, by worker-2
SELECT version FROM durable_step(:task_id, :fence, 'email', 'unsafe', '{"to": "ada@example.com"}') \gset
SELECT durable_step_start(:task_id, :fence, 'email', :version) AS version \gset
SELECT durable_commit(:task_id, :fence, '{"message_id": "m-1"}', step => 'email', expected_version => :version);
SELECT durable_commit(:task_id, :fence, '{"status": "confirmed"}');

-- worker-1 wakes up and tries to record its charge: fenced off
SELECT durable_commit(:task_id, 1, '{"charge": "ch_2"}', step => 'charge', expected_version => 2);

SELECT step, state, attempt, receipt, effect_id FROM durable.steps WHERE task_id = :task_id ORDER BY ordinal;
SELECT seq, kind, step, state, fence, actor FROM durable.events WHERE task_id = :task_id ORDER BY seq;

-- had worker-2 died while sending the email, nobody could know whether it
-- went out: the task would rest in review, never resent
SELECT durable_enqueue('orders', '{"order": 43}') AS task_id \gset
SELECT fence FROM durable_claim('orders', 'worker-3') \gset
SELECT version FROM durable_step(:task_id, :fence, 'email', 'unsafe', '{"to": "bob@example.com"}') \gset
SELECT durable_step_start(:task_id, :fence, 'email', :version);
SELECT pg_sleep(1.1);
SELECT action FROM durable_reconcile() r
WHERE (SELECT t.queue_name FROM durable.tasks t WHERE t.task_id = r.task_id) IN ('orders');
SELECT t.state AS task, s.state AS email FROM durable.tasks t JOIN durable.steps s USING (partition_key, task_id)
WHERE task_id = :task_id;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'orders'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
