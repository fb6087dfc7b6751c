/*-------------------------------------------------------------------------
 *
 * spend_reserve.c
 *	  What the steps of a task reserve from its spend budgets before their
 *	  calls, and how leaving doubt settles it (docs/design.md §17).
 *
 * A step reserves in the transaction that starts it, from every budget
 * its task names, all or none: each budget's row is locked (in name order,
 * so that two reserves never deadlock), and a reserve that does not fit
 * what is left raises 55U05, which rolls the start back.  Concurrent
 * reserves of one budget take turns on its row, so they never overshoot.
 * What a step reserved is kept with it (durable.step_reservations) until
 * it leaves doubt: its commit settles it (what was spent is charged, the
 * reservation returned), its failure or replanning returns it, and a step
 * that goes unknown keeps it until it is resolved.
 *
 * Settling never waits on a budget's row: the reconciler settles the
 * steps of expired leases, and a worker's open transaction may hold the
 * row.  A settlement is appended to durable.spend_settlements instead, and
 * the next reserve of the budget, which holds the row anyway, folds the
 * settlements it sees into it (so does the tick, for a budget no reserve
 * comes to: spend.c).  durable.budgets adds those not folded yet.  A
 * settlement that was not committed when a reserve looked is folded by a
 * later one: until then the budget looks more used, never less.  A
 * reservation outlives its budget's period; what is spent counts in the
 * period it was settled in.
 *
 *-------------------------------------------------------------------------
 */
#include "core/spend.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

/* a budget's period, its row locked for a reserve */
enum
{
	LOCKED_PERIOD,
	LOCKED_NCOLUMNS
};
static const DurableColumn locked_columns[LOCKED_NCOLUMNS] = {
	[LOCKED_PERIOD] = {"period", INTERVALOID},
};
static const DurableParam lock_params[] = {
	{"name", TEXTOID},
};
static DurableStatement budget_lock = {
	.name = "spend_budget_lock",
	.sql = "SELECT period FROM durable.spend_budgets WHERE budget_name = $name FOR UPDATE",
	DURABLE_PARAMS(lock_params),
	DURABLE_COLUMNS(locked_columns),
};

/*
 * A reserve: the budget's settlements folded into its row, its spending
 * started again in a new period, and the reserve taken; whether it fits
 * what was left, and what was.
 */
enum
{
	RESERVE_NAME,
	RESERVE_PERIOD_START,
	RESERVE_AMOUNT,
	RESERVE_NOW,
	RESERVE_NPARAMS
};
static const DurableParam reserve_params[RESERVE_NPARAMS] = {
	[RESERVE_NAME] = {"name", TEXTOID},
	[RESERVE_PERIOD_START] = {"period_start", TIMESTAMPTZOID},
	[RESERVE_AMOUNT] = {"reserve", NUMERICOID},
	[RESERVE_NOW] = {"now", TIMESTAMPTZOID},
};
enum
{
	RESERVED_FITS,
	RESERVED_REMAINING,
	RESERVED_NCOLUMNS
};
static const DurableColumn reserved_columns[RESERVED_NCOLUMNS] = {
	[RESERVED_FITS] = {"fits", BOOLOID},
	[RESERVED_REMAINING] = {"remaining", TEXTOID},
};
static DurableStatement budget_reserve = {
	.name = "spend_budget_reserve",
	.sql = "WITH folded AS (DELETE FROM durable.spend_settlements WHERE budget_name = $name"
	"  RETURNING reserved, spent, period_start),"
	" f AS (SELECT coalesce(sum(reserved), 0) AS reserved,"
	"  coalesce(sum(spent) FILTER (WHERE period_start IS NOT DISTINCT FROM $period_start), 0)"
	"  AS spent FROM folded)"
	" UPDATE durable.spend_budgets b SET reserved = b.reserved + f.reserved + $reserve,"
	" spent = CASE WHEN b.period_start IS NOT DISTINCT FROM $period_start THEN b.spent"
	"  ELSE 0 END + f.spent,"
	" period_start = $period_start, updated_at = $now"
	" FROM f WHERE b.budget_name = $name"
	" RETURNING b.amount - b.reserved - b.spent >= 0 AS fits,"
	" (b.amount - b.reserved - b.spent + $reserve)::text AS remaining",
	DURABLE_PARAMS(reserve_params),
	DURABLE_COLUMNS(reserved_columns),
};

/* the budgets a task names */
enum
{
	TASK_PARTITION,
	TASK_TASK_ID,
	TASK_STEP,
	TASK_AMOUNT,
	TASK_BUDGETS,
	TASK_NOW,
	TASK_NPARAMS
};
static const DurableParam task_params[TASK_NPARAMS] = {
	[TASK_PARTITION] = {"partition", INT4OID},
	[TASK_TASK_ID] = {"task_id", INT8OID},
	[TASK_STEP] = {"step", TEXTOID},
	[TASK_AMOUNT] = {"amount", NUMERICOID},
	[TASK_BUDGETS] = {"budgets", TEXTARRAYOID},
	[TASK_NOW] = {"now", TIMESTAMPTZOID},
};
/* a task, and one of its steps, by their keys */
static const DurableParam task_key_params[] = {
	{"partition", INT4OID},
	{"task_id", INT8OID},
};
static const DurableParam step_key_params[] = {
	{"partition", INT4OID},
	{"task_id", INT8OID},
	{"step", TEXTOID},
};
static const DurableColumn budgets_columns[] = {
	{"budgets", TEXTARRAYOID},
};
static DurableStatement task_budgets = {
	.name = "spend_task_budgets",
	.sql = "SELECT budgets FROM durable.live_tasks"
	" WHERE partition_key = $partition AND task_id = $task_id",
	DURABLE_PARAMS(task_key_params),
	DURABLE_COLUMNS(budgets_columns),
};

static DurableStatement reservation_insert = {
	.name = "spend_reservation_insert",
	.sql = "INSERT INTO durable.step_reservations"
	" (partition_key, task_id, step, amount, budgets, reserved_at)"
	" VALUES ($partition, $task_id, $step, $amount, $budgets, $now)",
	DURABLE_PARAMS(task_params),
};

/* a step's reservation, taken away to be settled */
enum
{
	RESERVATION_AMOUNT,
	RESERVATION_BUDGETS,
	RESERVATION_NCOLUMNS
};
static const DurableColumn reservation_columns[RESERVATION_NCOLUMNS] = {
	[RESERVATION_AMOUNT] = {"amount", NUMERICOID},
	[RESERVATION_BUDGETS] = {"budgets", TEXTARRAYOID},
};
static DurableStatement reservation_delete = {
	.name = "spend_reservation_delete",
	.sql = "DELETE FROM durable.step_reservations"
	" WHERE partition_key = $partition AND task_id = $task_id AND step = $step"
	" RETURNING amount, budgets",
	DURABLE_PARAMS(step_key_params),
	DURABLE_COLUMNS(reservation_columns),
};

/* the reservations of a task that finishes, taken away to be settled */
static DurableStatement reservations_of_task = {
	.name = "spend_reservations_of_task",
	.sql = "DELETE FROM durable.step_reservations"
	" WHERE partition_key = $partition AND task_id = $task_id"
	" RETURNING amount, budgets",
	DURABLE_PARAMS(task_key_params),
	DURABLE_COLUMNS(reservation_columns),
};

/* a settlement of each budget of names that still exists */
enum
{
	SETTLE_BUDGETS,
	SETTLE_RESERVED,
	SETTLE_SPENT,
	SETTLE_NOW,
	SETTLE_NPARAMS
};
static const DurableParam settle_params[SETTLE_NPARAMS] = {
	[SETTLE_BUDGETS] = {"budgets", TEXTARRAYOID},
	[SETTLE_RESERVED] = {"reserved", NUMERICOID},
	[SETTLE_SPENT] = {"spent", NUMERICOID},
	[SETTLE_NOW] = {"now", TIMESTAMPTZOID},
};
static DurableStatement settlement_insert = {
	.name = "spend_settlement_insert",
	.sql = "INSERT INTO durable.spend_settlements"
	" (budget_name, reserved, spent, period_start, settled_at)"
	" SELECT b.budget_name, $reserved, $spent,"
	" durable.budget_period_start(b.period, $now), $now"
	" FROM durable.spend_budgets b WHERE b.budget_name = ANY ($budgets)",
	DURABLE_PARAMS(settle_params),
};

static bool
amount_is_zero(Numeric amount)
{
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(amount),
											 DirectFunctionCall1(int4_numeric,
																 Int32GetDatum(0)))) == 0;
}

/* the args of a task's statements */
static void
task_args(Datum *args, char *nulls, const DurableTask *task, const char *step,
		  TimestampTz now)
{
	memset(nulls, ' ', TASK_NPARAMS);
	args[TASK_PARTITION] = Int32GetDatum(task->partition);
	args[TASK_TASK_ID] = Int64GetDatum(task->task_id);
	args[TASK_STEP] = CStringGetTextDatum(step);
	args[TASK_NOW] = TimestampTzGetDatum(now);
	nulls[TASK_AMOUNT] = nulls[TASK_BUDGETS] = 'n';
}

/* the budgets of the task in args (task_args), or NULL */
static ArrayType *
budgets_of(Datum *args, char *nulls)
{
	DurableResult res = DurableRun(&task_budgets, args, nulls, SPI_OK_SELECT, 1);
	bool		isnull = true;
	Datum		d = res.rows > 0 ? DurableGetDatum(res, 0, 0, &isnull) : (Datum) 0;

	return isnull ? NULL : DatumGetArrayTypeP(d);
}

/*
 * DurableTaskBudgets
 *		The budgets task charges (its own limit's among them), or NULL.
 */
ArrayType *
DurableTaskBudgets(const DurableTask *task)
{
	Datum		args[TASK_NPARAMS];
	char		nulls[TASK_NPARAMS];

	if (!task->spends)
		return NULL;
	task_args(args, nulls, task, "", 0);
	return budgets_of(args, nulls);
}

/*
 * DurableSpendReserve
 *		For a step of task started at now: take reserve from every budget
 *		the task names, or raise 55U05 for the first that has too little
 *		left (the caller's transaction then writes nothing).  The
 *		reservation is kept with the step, and said in detail.
 */
void
DurableSpendReserve(const DurableTask *task, const char *step, Numeric reserve,
					TimestampTz now, DurableDetail *detail)
{
	Datum		args[TASK_NPARAMS];
	char		nulls[TASK_NPARAMS];
	ArrayType  *budgets;
	Datum	   *names;
	int			n;
	int			nreserved = 0;

	DurableCheckAmount(reserve, "a step's reserve");
	if (!task->spends)
		return;
	task_args(args, nulls, task, step, now);
	budgets = budgets_of(args, nulls);
	if (budgets == NULL)
		return;
	deconstruct_array(budgets, TEXTOID, -1, false, TYPALIGN_INT, &names, NULL, &n);
	for (int i = 0; i < n; i++)
	{
		Datum		bargs[RESERVE_NPARAMS];
		char		bnulls[RESERVE_NPARAMS];
		DurableResult res;
		bool		isnull;
		Datum		period;

		res = DurableRun(&budget_lock, &names[i], NULL, SPI_OK_SELECT, 1);
		if (res.rows == 0)
			continue;			/* dropped since the enqueue */
		names[nreserved++] = names[i];
		period = DurableGetDatum(res, 0, LOCKED_PERIOD, &isnull);

		memset(bnulls, ' ', sizeof(bnulls));
		bargs[RESERVE_NAME] = names[i];
		bargs[RESERVE_PERIOD_START] =
			DurableBudgetPeriodStartArg(isnull ? NULL : DatumGetIntervalP(period), now,
										&bnulls[RESERVE_PERIOD_START]);
		bargs[RESERVE_AMOUNT] = NumericGetDatum(reserve);
		bargs[RESERVE_NOW] = TimestampTzGetDatum(now);
		res = DurableRun(&budget_reserve, bargs, bnulls, SPI_OK_UPDATE_RETURNING, 1);
		if (!DurableGetBool(res, 0, RESERVED_FITS))
			ereport(ERROR,
					errcode(ERRCODE_DURABLE_BUDGET_EXHAUSTED),
					errmsg("step \"%s\" of task %lld cannot reserve from spend budget \"%s\"",
						   step, (long long) task->task_id, TextDatumGetCString(names[i])),
					errdetail("Budget \"%s\" has %s left; the step's reserve is %s.",
							  TextDatumGetCString(names[i]),
							  DurableGetText(res, 0, RESERVED_REMAINING),
							  DatumGetCString(DirectFunctionCall1(numeric_out,
																  NumericGetDatum(reserve)))),
					errhint("The step stays planned: wait for the budget to start again, or raise it with durable_alter_budget()."));
	}
	/* the budgets reserved from, which its settlement returns it to */
	if (nreserved == 0)
		return;
	args[TASK_AMOUNT] = NumericGetDatum(reserve);
	nulls[TASK_AMOUNT] = ' ';
	args[TASK_BUDGETS] = PointerGetDatum(construct_array(names, nreserved, TEXTOID, -1,
														 false, TYPALIGN_INT));
	nulls[TASK_BUDGETS] = ' ';
	(void) DurableRun(&reservation_insert, args, nulls, SPI_OK_INSERT, 0);
	DurableDetailNumeric(detail, "reserved", reserve);
}

/*
 * A settlement of each of budgets that still exists: reserved (or nothing)
 * returned, spent (or nothing) charged.
 */
static void
settle(ArrayType *budgets, Numeric reserved, Numeric spent, TimestampTz now)
{
	Datum		args[SETTLE_NPARAMS];
	Datum		zero = DirectFunctionCall1(int4_numeric, Int32GetDatum(0));

	if ((reserved == NULL || amount_is_zero(reserved)) &&
		(spent == NULL || amount_is_zero(spent)))
		return;
	args[SETTLE_BUDGETS] = PointerGetDatum(budgets);
	args[SETTLE_RESERVED] = reserved ?
		DirectFunctionCall1(numeric_uminus, NumericGetDatum(reserved)) : zero;
	args[SETTLE_SPENT] = spent ? NumericGetDatum(spent) : zero;
	args[SETTLE_NOW] = TimestampTzGetDatum(now);
	(void) DurableRun(&settlement_insert, args, NULL, SPI_OK_INSERT, 0);
}

/*
 * DurableSpendSettle
 *		For a step of task leaving doubt at now: return its reservation,
 *		and when it completed, charge what it spent (its reservation when
 *		spent is NULL) to the budgets it reserved from, or without a
 *		reservation to those the task names.  Said in detail.
 */
void
DurableSpendSettle(const DurableTask *task, const char *step, bool completed,
				   Numeric spent, TimestampTz now, DurableDetail *detail)
{
	Datum		args[TASK_NPARAMS];
	char		nulls[TASK_NPARAMS];
	DurableResult res;
	bool		isnull;
	Numeric		reserved = NULL;
	ArrayType  *budgets = NULL;

	if (spent)
		DurableCheckAmount(spent, "what a step spent");
	if (!task->spends)
		return;
	task_args(args, nulls, task, step, now);
	res = DurableRun(&reservation_delete, args, nulls, SPI_OK_DELETE_RETURNING, 0);
	if (res.rows > 0)
	{
		reserved = DatumGetNumeric(DurableGetDatum(res, 0, RESERVATION_AMOUNT, &isnull));
		budgets = DatumGetArrayTypeP(DurableGetDatum(res, 0, RESERVATION_BUDGETS, &isnull));
	}
	else if (completed && spent)
		budgets = budgets_of(args, nulls);
	if (budgets == NULL)
		return;
	if (!completed)
		spent = NULL;
	else if (spent == NULL)
		spent = reserved;
	if (spent == NULL && reserved == NULL)
		return;

	settle(budgets, reserved, spent, now);
	if (reserved)
		DurableDetailNumeric(detail, "returned", reserved);
	if (spent)
		DurableDetailNumeric(detail, "spent", spent);
}

/*
 * DurableSpendSettleTask
 *		For a task that finished at now with steps still reserving (one
 *		cancelled while a step was started or unknown): each reservation is
 *		charged in full, since its step may have spent it.
 */
void
DurableSpendSettleTask(const DurableTask *task, TimestampTz now)
{
	Datum		args[TASK_NPARAMS];
	char		nulls[TASK_NPARAMS];
	DurableResult res;

	if (!task->spends)
		return;
	task_args(args, nulls, task, "", now);
	res = DurableRun(&reservations_of_task, args, nulls, SPI_OK_DELETE_RETURNING, 0);
	for (uint64 row = 0; row < res.rows; row++)
	{
		bool		isnull;
		Numeric		reserved = DatumGetNumeric(DurableGetDatum(res, row, RESERVATION_AMOUNT,
															   &isnull));

		settle(DatumGetArrayTypeP(DurableGetDatum(res, row, RESERVATION_BUDGETS, &isnull)),
			   reserved, reserved, now);
	}
}

/*
 * DurableBudgetFold
 *		Fold the settlements of a budget (of period, NULL for none) into its
 *		row, as a reserve of nothing at now does.  The caller holds the row.
 */
void
DurableBudgetFold(const char *name, const Interval *period, TimestampTz now)
{
	Datum		args[RESERVE_NPARAMS];
	char		nulls[RESERVE_NPARAMS];

	memset(nulls, ' ', sizeof(nulls));
	args[RESERVE_NAME] = CStringGetTextDatum(name);
	args[RESERVE_PERIOD_START] = DurableBudgetPeriodStartArg(period, now,
															 &nulls[RESERVE_PERIOD_START]);
	args[RESERVE_AMOUNT] = DirectFunctionCall1(int4_numeric, Int32GetDatum(0));
	args[RESERVE_NOW] = TimestampTzGetDatum(now);
	(void) DurableRun(&budget_reserve, args, nulls, SPI_OK_UPDATE_RETURNING, 1);
}
