/*-------------------------------------------------------------------------
 *
 * spend.c
 *	  Spend budgets: amounts that the steps of the tasks naming them
 *	  reserve before their calls and settle after (docs/design.md §17).
 *	  Here the budgets themselves, the budgets a task names (a child's
 *	  parent's, a task's own spend_limit), and the tick's part for them;
 *	  what a step reserves and settles is spend_reserve.c's.
 *
 * With a period, a budget's spending starts again at each period's start
 * on the UTC calendar (pure/period.c).  A budget named task:<id> is a
 * task's own limit: a colon names no other, so that an application can
 * name one only by the task's spend_limit.  A task names its budgets each
 * once and in name order, the order reserves lock them in.
 *
 *-------------------------------------------------------------------------
 */
#include "core/spend.h"

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
	args[BUDGET_PERIOD_START] = DurableBudgetPeriodStartArg(period, now, &nulls[BUDGET_PERIOD_START]);
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
		bool		isnull;
		Datum		period = DurableGetDatum(res, r, UNFOLDED_PERIOD, &isnull);

		DurableBudgetFold(DurableGetText(res, r, UNFOLDED_NAME),
						  isnull ? NULL : DatumGetIntervalP(period), work->now);
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
