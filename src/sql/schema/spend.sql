--
-- Spend budgets (src/core/spend.c): an amount that the steps of the tasks
-- naming the budget reserve before their calls and settle after; with a
-- period it starts again each period on the UTC calendar.  Reserving
-- locks the budget's row, so that concurrent reserves never overshoot;
-- settling never does (the reconciler settles too, and must not wait on a
-- worker's open transaction): it appends to durable.spend_settlements,
-- which the next reserve folds into the row.  On Citus a reference table.
--
CREATE TABLE durable.spend_budgets (
    budget_name  text COLLATE "C" PRIMARY KEY,
    amount       numeric NOT NULL CHECK (amount >= 0),
    period       interval,
    period_start timestamptz,
    reserved     numeric NOT NULL DEFAULT 0,
    spent        numeric NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
COMMENT ON TABLE durable.spend_budgets IS 'spend budgets (durable_create_budget); reserved and spent as of the last reserve, before the settlements not yet folded in (durable.budgets adds them)';
COMMENT ON COLUMN durable.spend_budgets.period_start IS 'the start of the period spent counts in (NULL without a period)';
SELECT pg_catalog.pg_extension_config_dump('durable.spend_budgets', '');
REVOKE ALL ON durable.spend_budgets FROM PUBLIC;
GRANT SELECT ON durable.spend_budgets TO durable_operator;

--
-- What settling a step changed of a budget, until a reserve folds it into
-- the budget's row: the reservation returned (negative) and the amount
-- spent, in the period it was spent in.
--
CREATE TABLE durable.spend_settlements (
    budget_name  text COLLATE "C" NOT NULL,
    reserved     numeric NOT NULL,
    spent        numeric NOT NULL,
    period_start timestamptz,
    settled_at   timestamptz NOT NULL
);
CREATE INDEX spend_settlements_budget ON durable.spend_settlements (budget_name);
COMMENT ON TABLE durable.spend_settlements IS 'settlements of steps not yet folded into their budget''s row by a reserve';
SELECT pg_catalog.pg_extension_config_dump('durable.spend_settlements', '');
REVOKE ALL ON durable.spend_settlements FROM PUBLIC;
GRANT SELECT ON durable.spend_settlements TO durable_operator;

--
-- A started step's reservation, from its start until it is settled: the
-- amount and the budgets it was taken from.  A row only for a step that
-- reserved; on Citus with its task.
--
CREATE TABLE durable.step_reservations (
    partition_key int NOT NULL,
    task_id       bigint NOT NULL,
    step          text COLLATE "C" NOT NULL,
    amount        numeric NOT NULL CHECK (amount >= 0),
    budgets       text[] COLLATE "C" NOT NULL,
    reserved_at   timestamptz NOT NULL,
    PRIMARY KEY (partition_key, task_id, step)
);
COMMENT ON TABLE durable.step_reservations IS 'what a started or unknown step reserved (durable_step_start(reserve => ...)), until its commit, failure or replanning settles it';
SELECT pg_catalog.pg_extension_config_dump('durable.step_reservations', '');
REVOKE ALL ON durable.step_reservations FROM PUBLIC;
GRANT SELECT ON durable.step_reservations TO durable_operator;
