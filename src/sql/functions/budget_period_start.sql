--
-- The start of a budget's period that holds a time, on the UTC calendar
-- (src/pure/period.c), for the view durable.budgets: NULL without a period.
--
CREATE OR REPLACE FUNCTION durable.budget_period_start(period interval, at timestamptz)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'durable_budget_period_start'
LANGUAGE C IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION durable.budget_period_start(interval, timestamptz) IS
  'the start of the budget period that holds at, on the UTC calendar (NULL without a period)';
REVOKE ALL ON FUNCTION durable.budget_period_start(interval, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION durable.budget_period_start(interval, timestamptz) TO durable_operator;
