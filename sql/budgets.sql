--
-- Spend budgets (docs/design.md §17): a step reserves from every budget
-- its task names, all or none, in the transaction that starts it; its
-- commit charges what it spent and returns the rest, a failure or a
-- replanning returns the reservation, a step in doubt keeps it.
--

-- the SQLSTATE and message of a call's error
CREATE FUNCTION pg_temp.fails(call text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'SELECT ' || call;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- the same, with its detail and hint, task ids left out
CREATE FUNCTION pg_temp.refusal(call text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    detail text;
    hint text;
BEGIN
    EXECUTE 'SELECT ' || call;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN regexp_replace(SQLSTATE || ': ' || SQLERRM, 'task [0-9]+', 'task N')
        || E'\n' || detail || E'\n' || hint;
END
$$;

-- what a budget shows
CREATE FUNCTION pg_temp.budget(budget text)
RETURNS TABLE(amount numeric, reserved numeric, spent numeric, remaining numeric)
LANGUAGE sql AS $$
    SELECT amount, reserved, spent, remaining FROM durable.budgets WHERE name = budget
$$;

-- bad budgets: 22023 (22004 for NULL, 42710 for a name taken, 42704 for
-- none), nothing written
SELECT pg_temp.fails($$durable_create_budget('sb_bad', -1)$$);
SELECT pg_temp.fails($$durable_create_budget('sb_bad', 'NaN')$$);
SELECT pg_temp.fails($$durable_create_budget('sb_bad', 'Infinity')$$);
SELECT pg_temp.fails($$durable_create_budget('sb_bad', 10, '0 days')$$);
SELECT pg_temp.fails($$durable_create_budget('sb_bad', 10, '-1 day')$$);
SELECT pg_temp.fails($$durable_create_budget('sb_bad', 10, '1 month 1 day')$$);
SELECT pg_temp.fails($$durable_create_budget('sb_bad', NULL)$$);
SELECT pg_temp.fails($$durable_create_budget(NULL, 10)$$);
SELECT pg_temp.fails($$durable_create_budget('', 10)$$);
SELECT pg_temp.fails($$durable_alter_budget('sb_nowhere', 10)$$);
SELECT pg_temp.fails($$durable_drop_budget('sb_nowhere')$$);
SELECT durable_create_budget('sb_taken', 10);
SELECT pg_temp.fails($$durable_create_budget('sb_taken', 20)$$);
SELECT pg_temp.fails($$durable_alter_budget('sb_taken', -5)$$);
SELECT amount FROM durable.budgets WHERE name = 'sb_taken';
SELECT durable_drop_budget('sb_taken');
SELECT count(*) AS budgets FROM durable.spend_budgets WHERE budget_name LIKE 'sb\_%';

-- a task names budgets that exist (each once, in name order); an unknown
-- one is 42704, a NULL one 22004, an empty one 22023, and no task is made
-- (a failed step's retry is due an hour later, not while the file runs:
-- under valgrind seconds pass, and a claim would take it instead)
SELECT durable_create_queue('sb_work', partitions => 1, retry_base => 3600, retry_cap => 3600);
SELECT durable_create_budget('sb_tenant', 100);
SELECT durable_create_budget('sb_account', 1000);
SELECT pg_temp.fails($$durable_enqueue('sb_work', '{}', budgets => ARRAY['sb_tenant', 'sb_nowhere'])$$);
SELECT pg_temp.fails($$durable_enqueue('sb_work', '{}', budgets => ARRAY['sb_tenant', NULL])$$);
SELECT pg_temp.fails($$durable_enqueue('sb_work', '{}', budgets => ARRAY[''])$$);
SELECT count(*) AS tasks FROM durable.live_tasks WHERE queue_name = 'sb_work';
SELECT durable_enqueue('sb_work', '{"n": 1}', budgets => ARRAY['sb_tenant', 'sb_account', 'sb_tenant']) AS t1 \gset
SELECT budgets FROM durable.live_tasks WHERE task_id = :t1;
SELECT durable_enqueue('sb_work', '{"n": 2}', budgets => ARRAY['sb_tenant']) AS t2 \gset

-- a step reserves 60 from both budgets
SELECT task_id = :t1 AS first, fence AS f1 FROM durable_claim('sb_work', 'w1') \gset
SELECT :'first' AS first_claimed;
SELECT (durable_step(:t1, :f1, 'llm', 'idempotent')).state;
SELECT durable_step_start(:t1, :f1, 'llm', 1, reserve => 60);
SELECT * FROM pg_temp.budget('sb_tenant');
SELECT * FROM pg_temp.budget('sb_account');
SELECT step, amount, budgets FROM durable.step_reservations WHERE task_id = :t1;
SELECT detail->>'reserved' AS reserved FROM durable.events
WHERE task_id = :t1 AND kind = 'step_started';

-- the other task's step cannot have 50 of the 40 left: 55U05, the step
-- stays planned, and no budget took anything
SELECT fence AS f2 FROM durable_claim('sb_work', 'w2') \gset
SELECT (durable_step(:t2, :f2, 'llm', 'idempotent')).state;
SELECT pg_temp.refusal($$durable_step_start($$ || :t2 || $$, $$ || :f2 || $$, 'llm', 1, reserve => 50)$$);
SELECT state, version FROM durable.steps WHERE task_id = :t2 AND step = 'llm';
SELECT * FROM pg_temp.budget('sb_tenant');
SELECT count(*) AS reservations FROM durable.step_reservations WHERE task_id = :t2;

-- 40 fits: the budget is used up to the last unit
SELECT durable_step_start(:t2, :f2, 'llm', 1, reserve => 40);
SELECT * FROM pg_temp.budget('sb_tenant');

-- the first step spent 25 of its 60: 35 come back, 25 are spent
SELECT durable_commit(:t1, :f1, '{"tokens": 25}', step => 'llm', expected_version => 2, spent => 25);
SELECT * FROM pg_temp.budget('sb_tenant');
SELECT * FROM pg_temp.budget('sb_account');
SELECT detail->>'returned' AS returned, detail->>'spent' AS spent FROM durable.events
WHERE task_id = :t1 AND kind = 'step_committed';
SELECT count(*) AS reservations FROM durable.step_reservations WHERE task_id = :t1;

-- the settlement waits in durable.spend_settlements; the next reserve
-- folds it into the budget's row
SELECT budget_name, reserved, spent FROM durable.spend_settlements
WHERE budget_name LIKE 'sb\_%' ORDER BY budget_name;
SELECT (durable_step(:t1, :f1, 'tool', 'idempotent')).state;
SELECT durable_step_start(:t1, :f1, 'tool', 1, reserve => 5);
SELECT count(*) AS unfolded FROM durable.spend_settlements WHERE budget_name = 'sb_tenant';
SELECT reserved, spent FROM durable.spend_budgets WHERE budget_name = 'sb_tenant';
SELECT * FROM pg_temp.budget('sb_tenant');

-- a commit without a figure spends the whole reservation
SELECT durable_commit(:t1, :f1, '{}', step => 'tool', expected_version => 2);
SELECT * FROM pg_temp.budget('sb_tenant');

-- a failed step spends nothing: its reservation comes back
SELECT durable_fail(:t2, :f2, 'transient', '{"e": "timeout"}', step => 'llm');
SELECT * FROM pg_temp.budget('sb_tenant');
SELECT state FROM durable.steps WHERE task_id = :t2 AND step = 'llm';

-- spent needs a step; amounts are finite and not negative (22023)
SELECT pg_temp.fails($$durable_commit($$ || :t1 || $$, $$ || :f1 || $$, '{}', spent => 1)$$);
SELECT (durable_step(:t1, :f1, 'neg', 'idempotent')).state;
SELECT pg_temp.fails($$durable_step_start($$ || :t1 || $$, $$ || :f1 || $$, 'neg', 1, reserve => -1)$$);
SELECT pg_temp.fails($$durable_step_start($$ || :t1 || $$, $$ || :f1 || $$, 'neg', 1, reserve => 'NaN')$$);
SELECT durable_step_start(:t1, :f1, 'neg', 1, reserve => 1);
SELECT pg_temp.fails($$durable_commit($$ || :t1 || $$, $$ || :f1 || $$, '{}', step => 'neg', expected_version => 2, spent => -3)$$);
SELECT durable_commit(:t1, :f1, '{}', step => 'neg', expected_version => 2, spent => 0);

-- a step without a reservation charges what it says it spent
SELECT (durable_step(:t1, :f1, 'free', 'idempotent')).state;
SELECT durable_step_start(:t1, :f1, 'free', 1);
SELECT durable_commit(:t1, :f1, '{}', step => 'free', expected_version => 2, spent => 7);
SELECT * FROM pg_temp.budget('sb_tenant');

-- a step in doubt keeps its reservation; the receipt that commits it
-- charges all of it (no figure comes with a receipt)
SELECT (durable_step(:t1, :f1, 'pay', 'queryable')).state;
SELECT durable_step_start(:t1, :f1, 'pay', 1, reserve => 10);
SELECT durable_step_unknown(:t1, :f1, 'pay', 2, 'timed out');
SELECT * FROM pg_temp.budget('sb_tenant');
SELECT durable_record_receipt(:t1, :f1, 'pay', 'succeeded');
SELECT * FROM pg_temp.budget('sb_tenant');

-- a lease lost while a step runs: recovery replans the idempotent step and
-- returns its reservation (the reconciler never waits for a budget's row)
SELECT (durable_step(:t1, :f1, 'again', 'idempotent')).state;
SELECT durable_step_start(:t1, :f1, 'again', 1, reserve => 4);
SELECT * FROM pg_temp.budget('sb_tenant');
SELECT durable_expire_lease(:t1, 'worker gone');
SELECT state FROM durable.steps WHERE task_id = :t1 AND step = 'again';
SELECT * FROM pg_temp.budget('sb_tenant');

-- an unsafe step in doubt sends its task to review with its reservation;
-- the operator's decision settles it with the operator's figure (spent
-- only with mark_committed of a step: 22023 otherwise)
SELECT durable_create_budget('sb_review', 50);
SELECT durable_enqueue('sb_work', '{"n": 6}', budgets => ARRAY['sb_review']) AS t6 \gset
SELECT fence AS f6 FROM durable_claim('sb_work', 'w6') WHERE task_id = :t6 \gset
SELECT (durable_step(:t6, :f6, 'wire', 'unsafe')).state;
SELECT durable_step_start(:t6, :f6, 'wire', 1, reserve => 20);
SELECT durable_expire_lease(:t6, 'worker gone');
SELECT * FROM pg_temp.budget('sb_review');
SELECT r->>'step' AS step, r->>'amount' AS amount, r->'budgets' AS budgets
FROM jsonb_array_elements(durable_recovery_package(:t6)->'reservations') r;
SELECT pg_temp.fails($$durable_resolve($$ || :t6 || $$, 'mark_not_executed', 'ops', '{}', 'wire', spent => 1)$$);
SELECT durable_resolve(:t6, 'mark_committed', 'ops', '{"bank": "sent"}', 'wire', spent => 12);
SELECT * FROM pg_temp.budget('sb_review');
SELECT durable_drop_budget('sb_review');
SELECT durable_cancel(:t6, 'reviewed');

-- a task cancelled while its step reserves: the step may have spent it,
-- so all of it is charged
SELECT durable_enqueue('sb_work', '{"n": 4}', budgets => ARRAY['sb_tenant']) AS t4 \gset
SELECT fence AS f4 FROM durable_claim('sb_work', 'w4') WHERE task_id = :t4 \gset
SELECT (durable_step(:t4, :f4, 'mail', 'unsafe')).state;
SELECT durable_step_start(:t4, :f4, 'mail', 1, reserve => 6);
SELECT durable_cancel(:t4, 'tenant left');
SELECT * FROM pg_temp.budget('sb_tenant');
SELECT count(*) AS reservations FROM durable.step_reservations WHERE task_id = :t4;

-- a budget dropped: the task's steps no longer reserve from it, and what
-- they had reserved there is settled nowhere
SELECT durable_enqueue('sb_work', '{"n": 5}', budgets => ARRAY['sb_tenant', 'sb_account']) AS t5 \gset
SELECT fence AS f5 FROM durable_claim('sb_work', 'w5') WHERE task_id = :t5 \gset
SELECT (durable_step(:t5, :f5, 'llm', 'idempotent')).state;
SELECT durable_step_start(:t5, :f5, 'llm', 1, reserve => 3);
SELECT durable_drop_budget('sb_tenant');
SELECT durable_commit(:t5, :f5, '{}', step => 'llm', expected_version => 2);
SELECT name, reserved, spent FROM durable.budgets WHERE name LIKE 'sb\_%' ORDER BY name;
SELECT count(*) AS settlements FROM durable.spend_settlements WHERE budget_name = 'sb_tenant';
SELECT (durable_step(:t5, :f5, 'next', 'idempotent')).state;
SELECT durable_step_start(:t5, :f5, 'next', 1, reserve => 2);
SELECT budgets FROM durable.step_reservations WHERE task_id = :t5;

-- a task without budgets: a reserve takes nothing
SELECT durable_enqueue('sb_work', '{"n": 3}') AS t3 \gset
SELECT fence AS f3 FROM durable_claim('sb_work', 'w3') \gset
SELECT (durable_step(:t3, :f3, 'llm', 'idempotent')).state;
SELECT durable_step_start(:t3, :f3, 'llm', 1, reserve => 1000000);
SELECT count(*) AS reservations FROM durable.step_reservations WHERE task_id = :t3;

-- periods start on the UTC calendar, whatever the session's time zone
SET TimeZone = 'Pacific/Chatham';
SELECT p, durable.budget_period_start(p::interval, '2026-12-05 13:20:00+00') AT TIME ZONE 'UTC' AS starts
FROM unnest(ARRAY['1 day', '1 hour', '90 minutes', '7 days', '1 month', '3 months', '1 year']) p;
RESET TimeZone;
SELECT pg_temp.fails($$durable.budget_period_start('1 month 2 days', now())$$);

-- a budget with a period starts spending again at each period's start:
-- spent in this one, then the same spending moved to yesterday's (the
-- row's and the settlements' alike), and this period has all of it again.
-- In one transaction, so that no midnight falls inside it: now() stays.
-- (Yesterday is a constant: Citus writes a reference table with no
-- function of a column.)
BEGIN;
SELECT durable_create_budget('sb_daily', 50, '1 day');
SELECT durable_enqueue('sb_work', '{"n": 8}', budgets => ARRAY['sb_daily']) AS t8 \gset
SELECT fence AS f8 FROM durable_claim('sb_work', 'w8') WHERE task_id = :t8 \gset
SELECT (durable_step(:t8, :f8, 'llm', 'idempotent')).state;
SELECT durable_step_start(:t8, :f8, 'llm', 1, reserve => 20);
SELECT durable_commit(:t8, :f8, '{}', step => 'llm', expected_version => 2, spent => 15);
SELECT period_start = durable.budget_period_start('1 day', now()) AS this_period,
       reserved, spent, remaining
FROM durable.budgets WHERE name = 'sb_daily';
SELECT durable.budget_period_start('1 day', now()) - interval '1 day' AS yesterday \gset
UPDATE durable.spend_budgets SET period_start = :'yesterday' WHERE budget_name = 'sb_daily';
UPDATE durable.spend_settlements SET period_start = :'yesterday' WHERE budget_name = 'sb_daily';
SELECT reserved, spent, remaining FROM durable.budgets WHERE name = 'sb_daily';
COMMIT;

-- the budgets in durable_metrics_prometheus()
SELECT line FROM regexp_split_to_table(durable_metrics_prometheus(), E'\n') line
WHERE line LIKE 'durable\_budget\_%{budget="sb\_account"}%';

SELECT durable_drop_budget(b) FROM unnest(ARRAY['sb_account', 'sb_daily']) b;
SELECT durable_cancel(t, 'test') FROM unnest(ARRAY[:t1, :t2, :t3, :t5, :t8]::bigint[]) t;
SELECT durable_drop_queue('sb_work', cascade => true);
