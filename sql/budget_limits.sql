--
-- A task's own spend_limit (docs/design.md §17): a budget of its own,
-- task:<id>, which its children share (a child charges every budget its
-- ancestors charge) and which the reconciler drops once the task is no
-- longer live.  Names with a colon are the tasks' own.
--

-- the SQLSTATE and message of a call's error
CREATE FUNCTION pg_temp.fails(call text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'SELECT ' || call;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN regexp_replace(SQLSTATE || ': ' || SQLERRM, '(task[ :])[0-9]{6,}', '\1N', 'g');
END
$$;

SELECT durable_create_queue('sl_work', partitions => 1);
SELECT durable_create_queue('sl_kids', partitions => 1);
SELECT durable_create_budget('sl_tenant', 100);

-- a colon is for the tasks' own budgets; a limit is an amount (22023)
SELECT pg_temp.fails($$durable_create_budget('task:1', 10)$$);
SELECT pg_temp.fails($$durable_enqueue('sl_work', '{}', budgets => ARRAY['task:1'])$$);
SELECT pg_temp.fails($$durable_enqueue('sl_work', '{}', spend_limit => -1)$$);
SELECT count(*) AS tasks FROM durable.live_tasks WHERE queue_name = 'sl_work';

-- a run limited to 30, charging its tenant's budget too
SELECT durable_enqueue('sl_work', '{"run": 1}', budgets => ARRAY['sl_tenant'], spend_limit => 30) AS run \gset
SELECT budgets = ARRAY['sl_tenant', 'task:' || :run] AS charges FROM durable.live_tasks WHERE task_id = :run;
SELECT amount, period FROM durable.budgets WHERE name = 'task:' || :run;
SELECT fence AS fr FROM durable_claim('sl_work', 'w') \gset

-- its child charges what it charges
SELECT durable_spawn(:run, :fr, 'research', 'sl_kids', '{}') AS kid \gset
SELECT budgets = ARRAY['sl_tenant', 'task:' || :run] AS inherited FROM durable.live_tasks WHERE task_id = :kid;
SELECT fence AS fk FROM durable_claim('sl_kids', 'w') \gset
SELECT (durable_step(:kid, :fk, 'llm', 'idempotent')).state;
SELECT durable_step_start(:kid, :fk, 'llm', 1, reserve => 20);
SELECT CASE WHEN name = 'sl_tenant' THEN name ELSE 'the run''s own' END AS budget, reserved
FROM durable.budgets WHERE name IN ('sl_tenant', 'task:' || :run) ORDER BY name;

-- the run's own step finds 10 of its 30 left: refused, though its tenant
-- has 80
SELECT (durable_step(:run, :fr, 'llm', 'idempotent')).state;
SELECT pg_temp.fails($$durable_step_start($$ || :run || $$, $$ || :fr || $$, 'llm', 1, reserve => 15)$$);

-- the child spent 12 of its 20: the run has 18 left, enough for 15
SELECT durable_commit(:kid, :fk, '{}', step => 'llm', expected_version => 2, spent => 12);
SELECT durable_commit(:kid, :fk);
SELECT durable_step_start(:run, :fr, 'llm', 1, reserve => 15);
SELECT CASE WHEN name = 'sl_tenant' THEN name ELSE 'the run''s own' END AS budget,
       reserved, spent, remaining
FROM durable.budgets WHERE name IN ('sl_tenant', 'task:' || :run) ORDER BY name;

-- an operator may change a run's limit as any budget's
SELECT durable_alter_budget('task:' || :run, 40);
SELECT remaining FROM durable.budgets WHERE name = 'task:' || :run;

-- the run ends; the reconciler's next look drops its budget, not the tenant's
SELECT durable_commit(:run, :fr, '{}', step => 'llm', expected_version => 2, spent => 15);
SELECT durable_commit(:run, :fr);
DO $$ BEGIN PERFORM durable_reconcile(); END $$;  -- the tick runs; what it dropped is read below
SELECT count(*) AS run_budget_left FROM durable.spend_budgets WHERE budget_name = 'task:' || :run;
SELECT name, reserved, spent FROM durable.budgets WHERE name = 'sl_tenant';

SELECT durable_drop_budget('sl_tenant');
SELECT durable_drop_queue('sl_work', cascade => true);
SELECT durable_drop_queue('sl_kids', cascade => true);
