--
-- Steps: plan, start, commit, replay, unknown outcomes, receipts, failures
-- through the retry budget, checkpoints, compensation, reconcile handlers.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 2000) AS first_id_counter;
-- step keys mix in the installation's random id; this file pins it
UPDATE durable.installation SET installation_id = '00000000-0000-4000-8000-000000000001';
SELECT durable_create_queue('flows', lease => '1 minute', retry_base => 1, retry_cap => 1);
SELECT durable_enqueue('flows', '{"order": 42}') AS t \gset
SELECT fence FROM durable_claim('flows', 'w1') \gset

-- plan: the key is the logical operation's, and a replay returns the same row
SELECT state, version, attempt, idempotency_key = durable_idempotency_key('00000000-0000-4000-8000-000000000001', :t::text, 'reserve') AS stable_key,
       result, receipt
FROM durable_step(:t, :fence, 'reserve', 'idempotent', '{"sku": "A1", "qty": 2}');
SELECT state, version FROM durable_step(:t, :fence, 'reserve', 'idempotent', '{"qty": 2, "sku": "A1"}');
SELECT idempotency_key = durable_idempotency_key('00000000-0000-4000-8000-000000000001', :t::text, 'charge', 'stripe') AS key_with_target
FROM durable_step(:t, :fence, 'charge', 'queryable', '{"amount": 100}', target => 'stripe');
SELECT durable_step(:t, :fence, 'reserve', 'idempotent', '{"sku": "B2"}');
SELECT durable_step(:t, :fence, 'reserve', 'unsafe', '{"sku": "A1", "qty": 2}');
SELECT durable_step(:t, :fence, 'x', NULL);
SELECT durable_step(:t, :fence, 'x', 'sometimes');
SELECT durable_step(:t, :fence + 1, 'x', 'pure');

-- start and commit by compare-and-swap on the version
SELECT durable_step_start(:t, :fence, 'reserve', 1) AS reserve_version;
SELECT durable_step_start(:t, :fence, 'reserve', 2);
SELECT durable_commit(:t, :fence, '{"hold": "h-1"}', step => 'reserve', expected_version => 1);
SELECT durable_commit(:t, :fence, '{"hold": "h-1"}', step => 'reserve', expected_version => 2);
SELECT durable_commit(:t, :fence, '{"hold": "h-2"}', step => 'reserve', expected_version => 3);
SELECT durable_commit(:t, :fence, step => 'reserve');
SELECT durable_commit(:t, :fence, step => 'nope', expected_version => 1);
SELECT durable_step_start(:t, :fence, 'nope', 1);

-- a task with a started step cannot finish, nor fail as a whole
SELECT durable_step_start(:t, :fence, 'charge', 1) AS charge_version \gset
SELECT durable_commit(:t, :fence);
SELECT durable_fail(:t, :fence, 'transient');

-- the call timed out: unknown, never failed; commit needs evidence
SELECT durable_step_unknown(:t, :fence, 'charge', :charge_version, 'timeout after 30 s') AS charge_version \gset
SELECT durable_commit(:t, :fence, step => 'charge', expected_version => :charge_version);
SELECT durable_record_receipt(:t, :fence, 'charge', 'succeeded', effect_id => 'ch_1',
                              evidence => '{"charge": "ch_1"}');
SELECT step, state, receipt, effect_id, result FROM durable.steps WHERE task_id = :t ORDER BY ordinal;

-- a resumed worker: the lease is taken over, committed steps return their results
SELECT durable_checkpoint(:t, :fence, '{"after": "charge"}', 0);
SELECT durable_checkpoint(:t, :fence, '{"after": "charge"}', 0);
SELECT durable_commit(:t, :fence, '{"order": "done"}');

SELECT durable_create_queue('resume', lease => '1 minute', retry_base => 1, retry_cap => 1);
SELECT durable_enqueue('resume', '{"order": 43}') AS t2 \gset
SELECT fence AS f2 FROM durable_claim('resume', 'w2') \gset
SELECT (durable_step(:t2, :f2, 'reserve', 'idempotent')).state;
SELECT durable_step_start(:t2, :f2, 'reserve', 1) AS v \gset
SELECT durable_checkpoint(:t2, :f2, '{"reserved": true}', 0) AS checkpoint_version;
-- the worker dies here; the reconciler sends the idempotent step again with its key
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s' WHERE task_id = :t2;
SELECT action FROM durable_reconcile(queue => 'resume');
SELECT state, attempt, idempotency_key = durable_idempotency_key('00000000-0000-4000-8000-000000000001', :t2::text, 'reserve') AS same_key
FROM durable.steps WHERE task_id = :t2;
SELECT state FROM durable.tasks WHERE task_id = :t2;

-- fail a step: transient goes back to planned with the same key; permanent fails the task
SELECT durable_create_queue('failing', lease => '1 minute', retry_base => 1, retry_cap => 1);
SELECT durable_enqueue('failing', '{"order": 44}') AS t3 \gset
SELECT fence AS f3 FROM durable_claim('failing', 'w3') \gset
SELECT version AS v FROM durable_step(:t3, :f3, 'email', 'unsafe') \gset
SELECT durable_step_start(:t3, :f3, 'email', :v) AS v \gset
SELECT durable_fail(:t3, :f3, 'transient', '{"smtp": 451}', step => 'email');
SELECT s.state AS step_state, t.state AS task_state, s.error
FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id) WHERE task_id = :t3;
SELECT durable_fail(:t3, :f3, 'transient', step => 'email');
SELECT pg_sleep(1.1);
SELECT fence AS f3 FROM durable_claim('failing', 'w3') \gset
SELECT state, attempt, version AS v FROM durable_step(:t3, :f3, 'email', 'unsafe') \gset
\echo :state :attempt
SELECT durable_step_start(:t3, :f3, 'email', :v) AS v \gset
SELECT durable_fail(:t3, :f3, 'permanent', '{"smtp": 550}', step => 'email');
SELECT s.state AS step_state, t.state AS task_state, t.stop_code, s.attempt
FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id) WHERE task_id = :t3;
SELECT durable_fail(:t3, :f3, 'transient', step => 'email');

-- checkpoints come back with the next claim
SELECT durable_create_queue('pages', lease => '1 minute', retry_base => 1, retry_cap => 1);
SELECT durable_enqueue('pages', '{"order": 45}') AS t4 \gset
SELECT fence AS f4 FROM durable_claim('pages', 'w4') \gset
SELECT durable_checkpoint(:t4, :f4, '{"page": 1}', 0);
SELECT durable_checkpoint(:t4, :f4, '{"page": 2}', 1);
SELECT durable_checkpoint(:t4, :f4, '{"page": 3}', 1);
SELECT durable_checkpoint(:t4, :f4, NULL, 2);
SELECT durable_fail(:t4, :f4, 'transient', retry_after => '0 s');
SELECT pg_sleep(1.1);
SELECT task_id = :t4 AS same_task, checkpoint FROM durable_claim('pages', 'w5');

-- compensation: committed steps are undone newest first, once
SELECT durable_create_queue('trips');
SELECT durable_enqueue('trips', '{"trip": 7}') AS t5 \gset
SELECT fence AS f5 FROM durable_claim('trips', 'w6') \gset
SELECT (durable_step(:t5, :f5, 'flight', 'idempotent')).state;
SELECT durable_step_start(:t5, :f5, 'flight', 1);
SELECT durable_commit(:t5, :f5, '{"booked": "flight"}', step => 'flight', expected_version => 2);
SELECT (durable_step(:t5, :f5, 'hotel', 'idempotent')).state;
SELECT durable_step_start(:t5, :f5, 'hotel', 1);
SELECT durable_commit(:t5, :f5, '{"booked": "hotel"}', step => 'hotel', expected_version => 2);
SELECT (durable_step(:t5, :f5, 'car', 'idempotent')).state;
SELECT durable_step_start(:t5, :f5, 'car', 1);
SELECT durable_commit(:t5, :f5, '{"booked": "car"}', step => 'car', expected_version => 2);
SELECT step, compensates, state, version FROM durable_compensate(:t5, :f5);
SELECT step, compensates, state FROM durable_compensate(:t5, :f5);
SELECT count(*) AS compensation_steps FROM durable.steps WHERE task_id = :t5 AND compensates IS NOT NULL;
SELECT durable_step_start(:t5, :f5, 'compensate:car', 1);
SELECT durable_commit(:t5, :f5, step => 'compensate:car', expected_version => 2);
SELECT step, state FROM durable.steps WHERE task_id = :t5 ORDER BY ordinal;
SELECT step, state FROM durable_compensate(:t5, :f5);
SELECT durable_commit(:t5, :f5, step => 'compensate:car', expected_version => 3);

-- a queryable step with an unknown outcome goes to a reconcile handler
SELECT durable_create_queue('step_payments', lease => '1 minute');
SELECT durable_enqueue('step_payments', '{"pay": 1}') AS t6 \gset
SELECT fence AS f6 FROM durable_claim('step_payments', 'w7') \gset
SELECT version AS v FROM durable_step(:t6, :f6, 'charge', 'queryable', '{"amount": 5}') \gset
SELECT durable_step_start(:t6, :f6, 'charge', :v) AS v \gset
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s' WHERE task_id = :t6;
SELECT action FROM durable_reconcile(queue => 'step_payments');
SELECT t.state, t.run_at = 'infinity' AS awaiting_handler, s.state AS step_state
FROM durable.tasks t JOIN durable.steps s USING (partition_key, task_id) WHERE task_id = :t6;
SELECT count(*) AS regular_claims_skip_it FROM durable_claim('step_payments', 'w8');
SELECT task_id = :t6 AS is_t6, fence AS fh, step, idempotency_key = durable_idempotency_key('00000000-0000-4000-8000-000000000001', :t6::text, 'charge') AS key, request
FROM durable_claim_reconcile('step_payments', 'handler-1') \gset
\echo :is_t6 :step :key
SELECT durable_record_receipt(:t6, :fh, 'charge', 'not_executed', evidence => '{"lookup": "no charge"}');
SELECT t.state, t.run_at <= now() AS ready_now, s.state AS step_state, s.receipt, s.attempt
FROM durable.tasks t JOIN durable.steps s USING (partition_key, task_id) WHERE task_id = :t6;
-- the worker resumes and sends the same request with the same key
SELECT fence AS f6 FROM durable_claim('step_payments', 'w9') \gset
SELECT state, attempt, version AS v FROM durable_step(:t6, :f6, 'charge', 'queryable', '{"amount": 5}') \gset
\echo :state :attempt
SELECT durable_step_start(:t6, :f6, 'charge', :v) AS v \gset
SELECT durable_commit(:t6, :f6, '{"charge": "ch_9"}', step => 'charge', expected_version => :v);
SELECT durable_commit(:t6, :f6, '{"paid": true}');
SELECT state FROM durable.tasks WHERE task_id = :t6;

-- receipts: only for started or unknown steps, and only known receipts
SELECT durable_record_receipt(:t6, :f6, 'charge', 'succeeded');
SELECT durable_enqueue('step_payments', '{"pay": 2}') AS t7 \gset
SELECT fence AS f7 FROM durable_claim('step_payments', 'w10') \gset
SELECT (durable_step(:t7, :f7, 'charge', 'queryable')).state;
SELECT durable_record_receipt(:t7, :f7, 'charge', 'succeeded');
SELECT durable_step_start(:t7, :f7, 'charge', 1) AS v \gset
SELECT durable_record_receipt(:t7, :f7, 'charge', 'probably');
SELECT durable_record_receipt(:t7, :f7, 'charge', NULL);
-- a receipt on a started step is evidence the reconciler uses if the worker dies
SELECT durable_record_receipt(:t7, :f7, 'charge', 'succeeded', 'ch_7', '{"id": "ch_7"}');
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s' WHERE task_id = :t7;
SELECT action FROM durable_reconcile(queue => 'step_payments');
SELECT t.state, s.state AS step_state, s.result FROM durable.tasks t
JOIN durable.steps s USING (partition_key, task_id) WHERE task_id = :t7;

-- an unsafe step whose worker vanished rests in review
SELECT durable_create_queue('step_mail');
SELECT durable_enqueue('step_mail', '{"mail": 1}') AS t8 \gset
SELECT fence AS f8 FROM durable_claim('step_mail', 'w11') \gset
SELECT (durable_step(:t8, :f8, 'email', 'unsafe')).state;
SELECT durable_step_start(:t8, :f8, 'email', 1);
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s' WHERE task_id = :t8;
SELECT action FROM durable_reconcile(queue => 'step_mail');
SELECT t.state, s.state AS step_state FROM durable.tasks t
JOIN durable.steps s USING (partition_key, task_id) WHERE task_id = :t8;

-- every step event, for one task
SELECT seq, kind, step, state, detail->>'from' AS "from", detail->>'to' AS "to"
FROM durable.events WHERE task_id = :t6 ORDER BY seq;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'failing,flows,step_mail,pages,step_payments,resume,trips'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
