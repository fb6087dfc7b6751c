--
-- Several steps in doubt (docs/design.md section 3): each is judged with its own
-- class, receipt and attempts, the task takes the most cautious action of
-- them, and it is handed out again only when none is in doubt.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 3000) AS first_id_counter;
SELECT durable_create_queue('doubt', lease => '1 ms', retry_base => 1, retry_cap => 1);
CREATE FUNCTION pg_temp.steps(t bigint) RETURNS TABLE (step text, state text, attempt int, receipt text)
LANGUAGE sql AS $$
    SELECT step, state::text, attempt, receipt FROM durable.steps WHERE task_id = t ORDER BY step
$$;

-- an unsafe step and an idempotent one started, then the lease expires:
-- manual review wins, the idempotent one is planned again, nothing is claimable
SELECT durable_enqueue('doubt', '{"n": 1}') AS t \gset
SELECT fence AS f FROM durable_claim('doubt', 'w1') \gset
SELECT state FROM durable_step(:t, :f, 'wire', 'unsafe', '{"amount": 10}');
SELECT durable_step_start(:t, :f, 'wire', 1) IS NOT NULL AS wire_started;
SELECT state FROM durable_step(:t, :f, 'mail', 'idempotent', '{"to": "a@example.com"}');
SELECT durable_step_start(:t, :f, 'mail', 1) IS NOT NULL AS mail_started;
SELECT pg_sleep(0.01);
SELECT task_id = :t AS same, action FROM durable_reconcile(queue => 'doubt');
SELECT state, steps_in_doubt FROM durable.tasks WHERE task_id = :t;
SELECT * FROM pg_temp.steps(:t);
SELECT count(*) AS claimed FROM durable_claim('doubt', 'w2');
SELECT d->>'action' AS action, jsonb_array_length(d->'steps') AS judged,
       (SELECT jsonb_agg(s->>'step' || ':' || (s->>'action') ORDER BY s->>'step') FROM jsonb_array_elements(d->'steps') s) AS steps
FROM (SELECT detail AS d FROM durable.events WHERE task_id = :t AND kind = 'lease_expired') e;
-- the recovery package lists it; review shows one row per step in doubt
SELECT durable_recovery_package(:t)->'recommended_action'->>'action' AS recommended,
       jsonb_array_length(durable_recovery_package(:t)->'unknown_side_effects') AS unknown;
SELECT step, step_state FROM durable.review_queue WHERE task_id = :t ORDER BY step;
-- resolving the unsafe step releases the task: nothing else is in doubt
SELECT durable_resolve(:t, 'mark_committed', 'ops', '{"bank": "paid"}');
SELECT * FROM pg_temp.steps(:t);
SELECT fence AS f FROM durable_claim('doubt', 'w1', lease => '1 minute') \gset
SELECT durable_commit(:t, :f);

-- two unsafe steps in doubt: a decision names its step; the task leaves
-- review only with the second decision
SELECT durable_enqueue('doubt', '{"n": 2}') AS t \gset
SELECT fence AS f FROM durable_claim('doubt', 'w1') \gset
SELECT state FROM durable_step(:t, :f, 'a', 'unsafe');
SELECT state FROM durable_step(:t, :f, 'b', 'unsafe');
SELECT durable_step_start(:t, :f, 'a', 1) + durable_step_start(:t, :f, 'b', 1) AS versions;
SELECT pg_sleep(0.01);
SELECT action FROM durable_reconcile(queue => 'doubt');
SELECT durable_resolve(:t, 'mark_committed', 'ops', '{}');
-- a retry is refused while a step is in doubt, named or not (55U04): it
-- settles no step
\set VERBOSITY sqlstate
SELECT durable_resolve(:t, 'retry', 'ops', '{}');
\set VERBOSITY default
SELECT durable_resolve(:t, 'retry', 'ops', '{}', step => 'a');
SELECT durable_resolve(:t, 'mark_committed', 'ops', '{}', step => 'nope');
SELECT durable_resolve(:t, 'mark_not_executed', 'ops', '{"checked": true}', step => 'a');
SELECT durable_resolve(:t, 'mark_committed', 'ops', '{}', step => 'a');
SELECT state, steps_in_doubt FROM durable.tasks WHERE task_id = :t;
SELECT count(*) AS claimed FROM durable_claim('doubt', 'w2', lease => '1 minute');
SELECT durable_resolve(:t, 'mark_committed', 'ops', '{"seen": "b"}', step => 'b');
SELECT * FROM pg_temp.steps(:t);
SELECT task_id = :t AS same, fence AS f FROM durable_claim('doubt', 'w2', lease => '1 minute') \gset
SELECT :'same' AS same, durable_commit(:t, :f);

-- two queryable steps in doubt: both are offered to the reconcile handler,
-- and the first receipt does not release the task
SELECT durable_enqueue('doubt', '{"n": 3}') AS t \gset
SELECT fence AS f FROM durable_claim('doubt', 'w1') \gset
SELECT state FROM durable_step(:t, :f, 'charge', 'queryable');
SELECT state FROM durable_step(:t, :f, 'refund', 'queryable');
SELECT durable_step_start(:t, :f, 'charge', 1) + durable_step_start(:t, :f, 'refund', 1) AS versions;
SELECT pg_sleep(0.01);
SELECT action FROM durable_reconcile(queue => 'doubt');
SELECT state, run_at = 'infinity' AS awaiting_reconcile FROM durable.tasks WHERE task_id = :t;
SELECT * FROM pg_temp.steps(:t);
SELECT count(*) AS offered, min(fence) AS fh FROM durable_claim_reconcile('doubt', 'handler', lease => '1 minute') \gset
SELECT :offered AS offered;
SELECT durable_record_receipt(:t, :fh, 'charge', 'succeeded', evidence => '{"charge": "ch_1"}');
SELECT state, steps_in_doubt FROM durable.tasks WHERE task_id = :t;
SELECT count(*) AS claimed FROM durable_claim('doubt', 'w2');
SELECT durable_record_receipt(:t, :fh, 'refund', 'not_executed');
SELECT state, steps_in_doubt FROM durable.tasks WHERE task_id = :t;
SELECT * FROM pg_temp.steps(:t);
SELECT fence AS f FROM durable_claim('doubt', 'w1', lease => '1 minute') \gset
SELECT durable_commit(:t, :f);

-- a receipt of failure and a step to look up: the look-up comes first, and
-- when it is done the task fails, for the failed step
SELECT durable_enqueue('doubt', '{"n": 4}') AS t \gset
SELECT fence AS f FROM durable_claim('doubt', 'w1') \gset
SELECT state FROM durable_step(:t, :f, 'hold', 'queryable');
SELECT state FROM durable_step(:t, :f, 'ship', 'queryable');
SELECT durable_step_start(:t, :f, 'hold', 1) + durable_step_start(:t, :f, 'ship', 1) AS versions;
SELECT durable_record_receipt(:t, :f, 'hold', 'failed_permanent');
SELECT pg_sleep(0.01);
SELECT action FROM durable_reconcile(queue => 'doubt');
SELECT * FROM pg_temp.steps(:t);
SELECT min(fence) AS fh FROM durable_claim_reconcile('doubt', 'handler', lease => '1 minute') \gset
SELECT durable_record_receipt(:t, :fh, 'ship', 'succeeded');
SELECT state, stop_code FROM durable.tasks WHERE task_id = :t;

-- a worker fails one step while another is in doubt: the other is judged
-- as after a lost lease, and the more cautious action is the task's
SELECT durable_enqueue('doubt', '{"n": 5}') AS t \gset
SELECT fence AS f FROM durable_claim('doubt', 'w1', lease => '1 minute') \gset
SELECT state FROM durable_step(:t, :f, 'fetch', 'idempotent');
SELECT state FROM durable_step(:t, :f, 'post', 'unsafe');
SELECT durable_step_start(:t, :f, 'fetch', 1) + durable_step_start(:t, :f, 'post', 1) AS versions;
SELECT durable_fail(:t, :f, 'transient', step => 'fetch');
SELECT state FROM durable.tasks WHERE task_id = :t;
SELECT * FROM pg_temp.steps(:t);
-- and with a retry-safe one, the retry waits for both
SELECT durable_enqueue('doubt', '{"n": 6}') AS t \gset
SELECT fence AS f FROM durable_claim('doubt', 'w1', lease => '1 minute') \gset
SELECT state FROM durable_step(:t, :f, 'left', 'idempotent');
SELECT state FROM durable_step(:t, :f, 'right', 'pure');
SELECT durable_step_start(:t, :f, 'left', 1) + durable_step_start(:t, :f, 'right', 1) AS versions;
SELECT durable_fail(:t, :f, 'transient', step => 'left');
SELECT state, steps_in_doubt FROM durable.tasks WHERE task_id = :t;
SELECT * FROM pg_temp.steps(:t);

SELECT * FROM durable_verify();

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'doubt'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
