/*-------------------------------------------------------------------------
 *
 * spend.c
 *	  Spend budgets: durable_create_budget, durable_alter_budget,
 *	  durable_drop_budget, and the start of a budget's period that the
 *	  view durable.budgets reads.  What steps reserve and spend comes
 *	  with durable_step_start and durable_commit (steps.c, tasks.c).
 *
 * Each checks its arguments, connects to SPI and calls the core
 * (core/spend.c).
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "utils/numeric.h"
#include "utils/timestamp.h"

/* a budget's period, or NULL (checked by the core) */
static Interval *
period_arg(FunctionCallInfo fcinfo, int argno)
{
	return PG_ARGISNULL(argno) ? NULL : PG_GETARG_INTERVAL_P(argno);
}

/*
 * durable_create_budget(name text, amount numeric, period interval = NULL)
 *		RETURNS void
 *
 * A new spend budget of amount; with a period it starts again at each
 * period's start on the UTC calendar.  22023 for a negative or infinite
 * amount or a period that is not positive or mixes months and days, 42710
 * for a name taken.
 */
PG_FUNCTION_INFO_V1(durable_create_budget);
Datum
durable_create_budget(PG_FUNCTION_ARGS)
{
	char	   *name = DurableNameArg(fcinfo, 0, "budget name");
	Numeric		amount;

	DurableRequireArg(fcinfo, 1, "amount");
	amount = PG_GETARG_NUMERIC(1);

	SPI_connect();
	DurableCreateBudget(name, amount, period_arg(fcinfo, 2));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_alter_budget(name text, amount numeric = NULL,
 *		period interval = NULL) RETURNS void
 *
 * A budget's new amount or period (NULL leaves it); 42704 for no budget.
 */
PG_FUNCTION_INFO_V1(durable_alter_budget);
Datum
durable_alter_budget(PG_FUNCTION_ARGS)
{
	char	   *name = DurableNameArg(fcinfo, 0, "budget name");
	Numeric		amount = DurableNumericArg(fcinfo, 1);

	SPI_connect();
	DurableAlterBudget(name, amount, period_arg(fcinfo, 2));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_drop_budget(name text) RETURNS void
 *
 * Drops a budget; the steps of the tasks that name it no longer reserve
 * from it.  42704 for no budget.
 */
PG_FUNCTION_INFO_V1(durable_drop_budget);
Datum
durable_drop_budget(PG_FUNCTION_ARGS)
{
	char	   *name = DurableNameArg(fcinfo, 0, "budget name");

	SPI_connect();
	DurableDropBudget(name);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable.budget_period_start(period interval, at timestamptz)
 *		RETURNS timestamptz
 *
 * The start of the period that holds at (pure/period.c), NULL without a
 * period or a time.
 */
PG_FUNCTION_INFO_V1(durable_budget_period_start);
Datum
durable_budget_period_start(PG_FUNCTION_ARGS)
{
	Interval   *period;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	period = PG_GETARG_INTERVAL_P(0);
	DurableCheckBudgetPeriod(period);
	PG_RETURN_TIMESTAMPTZ(DurableBudgetPeriodStart(PG_GETARG_TIMESTAMPTZ(1), period));
}
