/*-------------------------------------------------------------------------
 *
 * spend.c
 *	  Spend budgets: amounts that the steps of the tasks naming them
 *	  reserve before their calls and settle after (docs/design.md §17).
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
 * settlements it sees into it.  durable.budgets adds those not folded yet.
 * A settlement that was not committed when a reserve looked is folded by
 * a later one: until then the budget looks more used, never less.
 *
 * With a period, a budget's spending starts again at each period's start
 * on the UTC calendar (pure/period.c); a reservation outlives its period,
 * and what is spent counts in the period it was settled in.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

/* a budget, by its name, with what changes it */
enum
{
	BUDGET_NAME,
	BUDGET_AMOUNT,
	BUDGET_PERIOD,
	BUDGET_PERIOD_START,
	BUDGET_NOW,
	BUDGET_NPARAMS
};
static const DurableParam budget_params[BUDGET_NPARAMS] = {
	[BUDGET_NAME] = {"name", TEXTOID},
	[BUDGET_AMOUNT] = {"amount", NUMERICOID},
	[BUDGET_PERIOD] = {"period", INTERVALOID},
	[BUDGET_PERIOD_START] = {"period_start", TIMESTAMPTZOID},
	[BUDGET_NOW] = {"now", TIMESTAMPTZOID},
};

static DurableStatement budget_create = {
	.name = "spend_budget_create",
	.sql = "INSERT INTO durable.spend_budgets"
	" (budget_name, amount, period, period_start, created_at, updated_at)"
	" VALUES ($name, $amount, $period, $period_start, $now, $now)"
	" ON CONFLICT (budget_name) DO NOTHING",
	DURABLE_PARAMS(budget_params),
};

/* a new period starts the budget's spending in the period it names */
static DurableStatement budget_alter = {
	.name = "spend_budget_alter",
	.sql = "UPDATE durable.spend_budgets"
	" SET amount = coalesce($amount, amount), period = coalesce($period, period),"
	" period_start = CASE WHEN $period::interval IS NULL THEN period_start"
	"  ELSE $period_start END, updated_at = $now"
	" WHERE budget_name = $name",
	DURABLE_PARAMS(budget_params),
};

/* a budget by its name alone */
static const DurableParam name_params[] = {
	{"name", TEXTOID},
};

static DurableStatement budget_drop = {
	.name = "spend_budget_drop",
	.sql = "WITH s AS (DELETE FROM durable.spend_settlements WHERE budget_name = $name)"
	" DELETE FROM durable.spend_budgets WHERE budget_name = $name",
	DURABLE_PARAMS(name_params),
};

/* a budget's period, its row locked for a reserve */
enum
{
	LOCKED_PERIOD,
	LOCKED_NCOLUMNS
};
static const DurableColumn locked_columns[LOCKED_NCOLUMNS] = {
	[LOCKED_PERIOD] = {"period", INTERVALOID},
};
static DurableStatement budget_lock = {
	.name = "spend_budget_lock",
	.sql = "SELECT period FROM durable.spend_budgets WHERE budget_name = $name FOR UPDATE",
	DURABLE_PARAMS(name_params),
	DURABLE_COLUMNS(locked_columns),
};

/* the first of names that is no budget */
enum
{
	NAMES_NAMES,
	NAMES_NPARAMS
};
static const DurableParam names_params[NAMES_NPARAMS] = {
	[NAMES_NAMES] = {"names", TEXTARRAYOID},
};
static const DurableColumn missing_columns[] = {
	{"name", TEXTOID},
};
static DurableStatement budget_missing = {
	.name = "spend_budget_missing",
	.sql = "SELECT n AS name FROM pg_catalog.unnest($names) n"
	" WHERE NOT EXISTS (SELECT FROM durable.spend_budgets b WHERE b.budget_name = n)"
	" LIMIT 1",
	DURABLE_PARAMS(names_params),
	DURABLE_COLUMNS(missing_columns),
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

/* the budgets of a task just enqueued */
enum
{
	SET_PARTITION,
	SET_TASK_ID,
	SET_BUDGETS,
	SET_NPARAMS
};
static const DurableParam set_params[SET_NPARAMS] = {
	[SET_PARTITION] = {"partition", INT4OID},
	[SET_TASK_ID] = {"task_id", INT8OID},
	[SET_BUDGETS] = {"budgets", TEXTARRAYOID},
};
static DurableStatement task_set_budgets = {
	.name = "spend_task_set_budgets",
	.sql = "UPDATE durable.live_tasks SET budgets = $budgets"
	" WHERE partition_key = $partition AND task_id = $task_id",
	DURABLE_PARAMS(set_params),
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

/*
 * DurableCheckAmount
 *		An amount, finite and not negative (22023); what names it in errors.
 */
void
DurableCheckAmount(Numeric amount, const char *what)
{
	if (numeric_is_nan(amount) || numeric_is_inf(amount) ||
		DatumGetBool(DirectFunctionCall2(numeric_lt, NumericGetDatum(amount),
										 DirectFunctionCall1(int4_numeric,
															 Int32GetDatum(0)))))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must be finite and not negative", what));
}

static bool
amount_is_zero(Numeric amount)
{
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(amount),
											 DirectFunctionCall1(int4_numeric,
																 Int32GetDatum(0)))) == 0;
}

/* the start of the period of a budget that holds now, or 0 without one */
static Datum
period_start(const Interval *period, TimestampTz now, char *isnull)
{
	*isnull = period ? ' ' : 'n';
	return period ? TimestampTzGetDatum(DurableBudgetPeriodStart(now, period)) : (Datum) 0;
}

static void
budget_args(Datum *args, char *nulls, const char *name, Numeric amount,
			const Interval *period)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();

	memset(nulls, ' ', BUDGET_NPARAMS);
	args[BUDGET_NAME] = CStringGetTextDatum(name);
	args[BUDGET_AMOUNT] = NumericGetDatum(amount);
	nulls[BUDGET_AMOUNT] = amount ? ' ' : 'n';
	if (period)
		DurableCheckBudgetPeriod(period);
	args[BUDGET_PERIOD] = IntervalPGetDatum(period);
	nulls[BUDGET_PERIOD] = period ? ' ' : 'n';
	args[BUDGET_PERIOD_START] = period_start(period, now, &nulls[BUDGET_PERIOD_START]);
	args[BUDGET_NOW] = TimestampTzGetDatum(now);
	if (amount)
		DurableCheckAmount(amount, "a budget's amount");
}

static void
report_missing(const char *name)
{
	ereport(ERROR,
			errcode(ERRCODE_UNDEFINED_OBJECT),
			errmsg("spend budget \"%s\" does not exist", name));
}

/*
 * A name with a colon is a task's own budget (task:<id>, its spend_limit):
 * an application names one by the task's limit, never by its name.
 */
static void
check_not_a_task_budget(const char *name)
{
	if (strchr(name, ':') != NULL)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("budget name \"%s\" must not contain a colon", name),
				errdetail("A name with a colon is a task's own budget, task:<id>, made by its spend_limit."));
}

/*
 * DurableCreateBudget
 *		A new budget of amount, starting again each period when one is
 *		given; 42710 when one of the name exists.
 */
void
DurableCreateBudget(const char *name, Numeric amount, const Interval *period)
{
	Datum		args[BUDGET_NPARAMS];
	char		nulls[BUDGET_NPARAMS];

	check_not_a_task_budget(name);
	budget_args(args, nulls, name, amount, period);
	if (DurableRun(&budget_create, args, nulls, SPI_OK_INSERT, 0).rows == 0)
		ereport(ERROR,
				errcode(ERRCODE_DUPLICATE_OBJECT),
				errmsg("spend budget \"%s\" already exists", name),
				errhint("Change it with durable_alter_budget()."));
}

/*
 * DurableAlterBudget
 *		A budget's new amount or period (NULL: unchanged); what is reserved
 *		and spent stays.  42704 for no such budget.
 */
void
DurableAlterBudget(const char *name, Numeric amount, const Interval *period)
{
	Datum		args[BUDGET_NPARAMS];
	char		nulls[BUDGET_NPARAMS];

	budget_args(args, nulls, name, amount, period);
	if (DurableRun(&budget_alter, args, nulls, SPI_OK_UPDATE, 0).rows == 0)
		report_missing(name);
}

/*
 * DurableDropBudget
 *		Drop a budget and its settlements: the steps of tasks that name it
 *		no longer reserve from it.  42704 for no such budget.
 */
void
DurableDropBudget(const char *name)
{
	Datum		args[1];

	args[0] = CStringGetTextDatum(name);
	if (DurableRun(&budget_drop, args, NULL, SPI_OK_DELETE, 0).rows == 0)
		report_missing(name);
}

/* names in order, for sorting */
static int
compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* n names (sorted in place), each once, as a text[] */
static ArrayType *
sorted_names(char **names, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	int			kept = 0;

	qsort(names, n, sizeof(char *), compare_names);
	for (int i = 0; i < n; i++)
		if (kept == 0 || strcmp(names[kept - 1], names[i]) != 0)
		{
			names[kept] = names[i];
			elems[kept++] = CStringGetTextDatum(names[i]);
		}
	return construct_array(elems, kept, TEXTOID, -1, false, TYPALIGN_INT);
}


/*
 * DurableBudgetsCheck
 *		The budgets an enqueue names, each once and in name order (the
 *		order reserves lock them in), or NULL for none; 22004 for a NULL
 *		name, 22023 for an empty one, 42704 for one that is no budget.
 */
ArrayType *
DurableBudgetsCheck(ArrayType *budgets)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	char	  **names;
	Datum		args[NAMES_NPARAMS];
	DurableResult res;
	ArrayType  *result;

	deconstruct_array(budgets, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		return NULL;
	names = palloc(sizeof(char *) * n);
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					errmsg("budget name must not be null"));
		names[i] = TextDatumGetCString(elems[i]);
		if (names[i][0] == '\0')
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("budget name must not be empty"));
		check_not_a_task_budget(names[i]);
	}
	result = sorted_names(names, n);

	args[NAMES_NAMES] = PointerGetDatum(result);
	res = DurableRun(&budget_missing, args, NULL, SPI_OK_SELECT, 1);
	if (res.rows > 0)
		report_missing(DurableGetText(res, 0, 0));
	return result;
}

/* add the names of a text[] (or NULL) to names */
static int
add_names(char **names, int n, ArrayType *array)
{
	Datum	   *elems;
	int			count;

	if (array == NULL)
		return n;
	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elems, NULL, &count);
	for (int i = 0; i < count; i++)
		names[n++] = TextDatumGetCString(elems[i]);
	return n;
}

/*
 * DurableSetTaskBudgets
 *		Give a task just enqueued what it charges: the budgets
 *		DurableBudgetsCheck returned, its parent's (a child's spend counts
 *		against every budget and limit of its ancestors), and with a
 *		spend_limit a budget of its own, task:<id>, which lives as long as
 *		the task (DurableMaintainBudgets).  A statement of its own: the
 *		enqueue's insert has no parameter left, and most tasks charge none.
 */
void
DurableSetTaskBudgets(int64 task_id, ArrayType *budgets, ArrayType *inherited,
					  Numeric spend_limit)
{
	Datum		args[SET_NPARAMS];
	int			max = 1 + (budgets ? ArrayGetNItems(ARR_NDIM(budgets), ARR_DIMS(budgets)) : 0) +
		(inherited ? ArrayGetNItems(ARR_NDIM(inherited), ARR_DIMS(inherited)) : 0);
	char	  **names = palloc(sizeof(char *) * max);
	int			n = add_names(names, add_names(names, 0, budgets), inherited);

	if (spend_limit != NULL)
	{
		char	   *own = psprintf("task:" INT64_FORMAT, task_id);
		Datum		bargs[BUDGET_NPARAMS];
		char		bnulls[BUDGET_NPARAMS];

		budget_args(bargs, bnulls, own, spend_limit, NULL);
		(void) DurableRun(&budget_create, bargs, bnulls, SPI_OK_INSERT, 0);
		names[n++] = own;
	}
	if (n == 0)
		return;
	args[SET_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[SET_TASK_ID] = Int64GetDatum(task_id);
	args[SET_BUDGETS] = PointerGetDatum(sorted_names(names, n));
	(void) DurableRun(&task_set_budgets, args, NULL, SPI_OK_UPDATE, 0);
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

/* the budgets task names, or NULL */
static ArrayType *
budgets_of(const DurableTask *task, Datum *args, char *nulls)
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
	return budgets_of(task, args, nulls);
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
	budgets = budgets_of(task, args, nulls);
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
			period_start(isnull ? NULL : DatumGetIntervalP(period), now,
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
		budgets = budgets_of(task, args, nulls);
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

/* the budgets with settlements to fold that no reserve holds, some of them */
enum
{
	UNFOLDED_NAME,
	UNFOLDED_PERIOD,
	UNFOLDED_NCOLUMNS
};
static const DurableColumn unfolded_columns[UNFOLDED_NCOLUMNS] = {
	[UNFOLDED_NAME] = {"budget_name", TEXTOID},
	[UNFOLDED_PERIOD] = {"period", INTERVALOID},
};
static const DurableParam batch_params[] = {
	{"batch", INT4OID},
};
static DurableStatement budgets_unfolded = {
	.name = "spend_budgets_unfolded",
	.sql = "SELECT budget_name, period FROM durable.spend_budgets b"
	" WHERE EXISTS (SELECT FROM durable.spend_settlements s"
	"  WHERE s.budget_name = b.budget_name)"
	" ORDER BY budget_name LIMIT $batch FOR UPDATE SKIP LOCKED",
	DURABLE_PARAMS(batch_params),
	DURABLE_COLUMNS(unfolded_columns),
};

/* the task of a budget task:<id> */
#define BUDGET_TASK_ID "pg_catalog.substr(b.budget_name, 6)::pg_catalog.int8"

/* the budgets of tasks no longer live (and their settlements), some of them */
static DurableStatement task_budgets_retire = {
	.name = "spend_task_budgets_retire",
	.sql = "WITH gone AS (SELECT budget_name FROM durable.spend_budgets b"
	"  WHERE b.budget_name LIKE 'task:%' AND NOT EXISTS (SELECT FROM durable.live_tasks t"
	"   WHERE t.partition_key = (" BUDGET_TASK_ID " & "
	CppAsString2(DURABLE_PARTITION_MASK) ")::pg_catalog.int4"
	"   AND t.task_id = " BUDGET_TASK_ID ")"
	"  ORDER BY budget_name LIMIT $batch FOR UPDATE SKIP LOCKED),"
	" s AS (DELETE FROM durable.spend_settlements x USING gone g"
	"  WHERE x.budget_name = g.budget_name)"
	" DELETE FROM durable.spend_budgets b USING gone g WHERE b.budget_name = g.budget_name",
	DURABLE_PARAMS(batch_params),
};

/* how often the tick looks after the budgets */
#define DURABLE_BUDGETS_EVERY_MS 10000

typedef struct BudgetWork
{
	TimestampTz now;
	int			batch;
} BudgetWork;

/* fold the settlements of budgets no reserve came to, retire task budgets */
static uint64
maintain_budgets(void *arg)
{
	BudgetWork *work = arg;
	Datum		args[1] = {Int32GetDatum(work->batch)};
	DurableResult res = DurableRun(&budgets_unfolded, args, NULL, SPI_OK_SELECT, 0);
	uint64		done = res.rows;

	for (uint64 r = 0; r < res.rows; r++)
	{
		Datum		fold[RESERVE_NPARAMS];
		char		nulls[RESERVE_NPARAMS];
		bool		isnull;
		Datum		period = DurableGetDatum(res, r, UNFOLDED_PERIOD, &isnull);

		memset(nulls, ' ', sizeof(nulls));
		fold[RESERVE_NAME] = CStringGetTextDatum(DurableGetText(res, r, UNFOLDED_NAME));
		fold[RESERVE_PERIOD_START] = period_start(isnull ? NULL : DatumGetIntervalP(period),
												  work->now, &nulls[RESERVE_PERIOD_START]);
		fold[RESERVE_AMOUNT] = DirectFunctionCall1(int4_numeric, Int32GetDatum(0));
		fold[RESERVE_NOW] = TimestampTzGetDatum(work->now);
		(void) DurableRun(&budget_reserve, fold, nulls, SPI_OK_UPDATE_RETURNING, 1);
	}
	done += DurableRun(&task_budgets_retire, args, NULL, SPI_OK_DELETE, 0).rows;
	return done;
}

/*
 * DurableMaintainBudgets
 *		The tick's part for the spend budgets, every
 *		DURABLE_BUDGETS_EVERY_MS: up to batch budgets whose settlements no
 *		reserve folded get them folded (so that a budget only charged keeps
 *		no growing list of them), and up to batch budgets of tasks no longer
 *		live (a spend_limit lives as long as its task) are dropped.  A
 *		budget a reserve holds is left for the next time, never waited for.
 *		Not on Citus yet.  Returns how many budgets it changed.
 */
uint64
DurableMaintainBudgets(TimestampTz now, int batch)
{
	static TimestampTz last_look = 0;
	BudgetWork	work = {now, batch};
	uint64		done = 0;

	if (DurableDistributed() ||
		(last_look != 0 && !TimestampDifferenceExceeds(last_look, now, DURABLE_BUDGETS_EVERY_MS)))
		return 0;
	last_look = now;
	(void) DurableRunPart("spend budgets", maintain_budgets, &work, &done);
	return done;
}
