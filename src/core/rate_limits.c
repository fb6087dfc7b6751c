/*-------------------------------------------------------------------------
 *
 * rate_limits.c
 *	  Rate limits: their definitions, and the units a task names of them
 *	  at enqueue.  What a claim takes of them is rate_buckets.c's.
 *
 * A task names the units it takes of each limit ({"llm-tokens": 1200});
 * a name prefix:key uses the definition of prefix, with a bucket of its
 * own per key.  A limit's definition is read by every claim that takes a
 * task naming it, so a change takes effect at the next claim; the units
 * already taken stay in the buckets.
 *
 *-------------------------------------------------------------------------
 */
#include "core/rate_limits.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

/* a limit, by name */
static const DurableParam name_params[1] = {
	{"name", TEXTOID},
};

/* a limit's definition */
enum
{
	DEF_NAME,
	DEF_RATE,
	DEF_PER,
	DEF_PER_US,
	DEF_BURST,
	DEF_NOW,
	DEF_NPARAMS
};
static const DurableParam definition_params[DEF_NPARAMS] = {
	[DEF_NAME] = {"name", TEXTOID},
	[DEF_RATE] = {"rate", INT4OID},
	[DEF_PER] = {"per", INTERVALOID},
	[DEF_PER_US] = {"per_us", INT8OID},
	[DEF_BURST] = {"burst", INT4OID},
	[DEF_NOW] = {"now", TIMESTAMPTZOID},
};

static DurableStatement definition_set = {
	.name = "rate_limit_set",
	.sql = "INSERT INTO durable.rate_limit_definitions"
	" (limit_name, rate, per, per_us, burst, updated_at)"
	" VALUES ($name, $rate, $per, $per_us, $burst, $now)"
	" ON CONFLICT (limit_name) DO UPDATE SET rate = excluded.rate,"
	" per = excluded.per, per_us = excluded.per_us, burst = excluded.burst,"
	" updated_at = excluded.updated_at",
	DURABLE_PARAMS(definition_params),
};

static DurableStatement definition_drop = {
	.name = "rate_limit_drop",
	.sql = "DELETE FROM durable.rate_limit_definitions WHERE limit_name = $name",
	DURABLE_PARAMS(name_params),
};

/* a limit's buckets, of every key: prefix:key names prefix's */
static DurableStatement buckets_drop = {
	.name = "rate_limit_buckets_drop",
	.sql = "DELETE FROM durable.rate_limit_buckets WHERE limit_name = $name",
	DURABLE_PARAMS(name_params),
};

enum
{
	DEFINED_RATE,
	DEFINED_PER_US,
	DEFINED_BURST,
	DEFINED_NCOLUMNS
};
static const DurableColumn defined_columns[DEFINED_NCOLUMNS] = {
	[DEFINED_RATE] = {"rate", INT4OID},
	[DEFINED_PER_US] = {"per_us", INT8OID},
	[DEFINED_BURST] = {"burst", INT4OID},
};

static DurableStatement definition_get = {
	.name = "rate_limit_get",
	.sql = "SELECT rate, per_us, burst FROM durable.rate_limit_definitions"
	" WHERE limit_name = $name",
	DURABLE_PARAMS(name_params),
	DURABLE_COLUMNS(defined_columns),
};

/* the same on one server, by its primary key */
static DurableKeyRead definition_read = {
	.table = {.schema = "durable", .name = "rate_limit_definitions",
	DURABLE_COLUMNS(defined_columns)},
	.keys = {.nkeys = 1},
};

/* a limit name: a definition's, or prefix:key */
static void
split_name(DurableRateUse *use, const char *name, int len)
{
	const char *colon = memchr(name, ':', len);

	use->name = pnstrdup(name, len);
	if (colon == NULL)
	{
		use->prefix = use->name;
		use->key = "";
		return;
	}
	use->prefix = pnstrdup(name, colon - name);
	use->key = use->name + (colon - name) + 1;
}

/* a limit's units: a non-negative integer */
static int64
units_of(const DurableRateUse *use, const JsonbValue *v)
{
	const char *digits = "";

	if (v->type == jbvNumeric)
		digits = DatumGetCString(DirectFunctionCall1(numeric_out,
													 NumericGetDatum(v->val.numeric)));
	/* no sign, no fraction, no more than any burst */
	if (digits[0] == '\0' || strspn(digits, "0123456789") != strlen(digits) ||
		strlen(digits) > 12)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("the units of rate limit \"%s\" must be a non-negative integer",
					   use->name),
				errdetail("The value given was %s.", digits[0] ? digits : "not a number"));
	return strtoll(digits, NULL, 10);
}

/*
 * DurableRateUsesParse
 *		The limits a task names (limits: its rate_limits), into uses, in
 *		the order of its jsonb object (by name); 22023 for a value that is
 *		not a non-negative integer, for more than
 *		DURABLE_MAX_TASK_RATE_LIMITS, or for another JSON value.  Returns
 *		how many.
 */
int
DurableRateUsesParse(Jsonb *limits, DurableRateUse *uses)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			n = 0;

	if (!JB_ROOT_IS_OBJECT(limits) || JB_ROOT_IS_SCALAR(limits))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("rate_limits must be a JSON object of limit names and units"),
				errhint("For example {\"llm-requests\": 1, \"llm-tokens\": 1200}."));
	it = JsonbIteratorInit(&limits->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		DurableRateUse    *use;

		if (tok != WJB_KEY)
			continue;
		if (n == DURABLE_MAX_TASK_RATE_LIMITS)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("a task may name at most %d rate limits",
						   DURABLE_MAX_TASK_RATE_LIMITS));
		use = &uses[n++];
		split_name(use, v.val.string.val, v.val.string.len);
		tok = JsonbIteratorNext(&it, &v, true);
		Assert(tok == WJB_VALUE);
		use->units = units_of(use, &v);
	}
	return n;
}

/*
 * DurableRateUseDefinition
 *		Read the definition of a use's limit into it; false (and use not
 *		defined) when it has none.  On one server by its key.
 */
bool
DurableRateUseDefinition(DurableRateUse *use)
{
	Datum		name = CStringGetTextDatum(use->prefix);
	DurableResult res;

	if (!DurableDistributed())
	{
		Datum		values[DEFINED_NCOLUMNS];
		bool		isnull[DEFINED_NCOLUMNS];

		use->defined = DurableReadByKey(&definition_read, &name, values, isnull);
		if (use->defined)
		{
			use->rate = DatumGetInt32(values[DEFINED_RATE]);
			use->per_us = DatumGetInt64(values[DEFINED_PER_US]);
			use->burst = DatumGetInt32(values[DEFINED_BURST]);
		}
		return use->defined;
	}
	res = DurableRun(&definition_get, &name, NULL, SPI_OK_SELECT, 1);
	use->defined = res.rows == 1;
	if (use->defined)
	{
		use->rate = DurableGetInt32(res, 0, DEFINED_RATE);
		use->per_us = DurableGetInt64(res, 0, DEFINED_PER_US);
		use->burst = DurableGetInt32(res, 0, DEFINED_BURST);
	}
	return use->defined;
}

/*
 * DurableCheckRateLimitName
 *		22023 unless a limit's name has 1 to DURABLE_MAX_KEY_LEN bytes and
 *		no colon (which separates a limit from a key of it).
 */
void
DurableCheckRateLimitName(const char *name)
{
	DurableCheckKey(name, "rate limit name");
	if (strchr(name, ':') != NULL)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("rate limit name \"%s\" must not contain \":\"", name),
				errdetail("A task names prefix:key to take from the limit prefix separately for each key."));
}

/*
 * DurableRateLimitsCheck
 *		Check the limits a task names at enqueue: a JSON object of at most
 *		DURABLE_MAX_TASK_RATE_LIMITS names of defined limits (42704 for
 *		another) or prefix:key with a key of 1 to DURABLE_MAX_KEY_LEN bytes,
 *		each to a non-negative integer of units no greater than the limit's
 *		burst (22023 otherwise, as units that could never be taken).
 *		Returns the name whose key places the task (its first), or NULL for
 *		an empty object.
 */
const char *
DurableRateLimitsCheck(Jsonb *limits)
{
	DurableRateUse		uses[DURABLE_MAX_TASK_RATE_LIMITS];
	int			n = DurableRateUsesParse(limits, uses);

	for (int i = 0; i < n; i++)
	{
		DurableRateUse    *use = &uses[i];

		if (use->key != NULL && use->prefix != use->name)
			DurableCheckKey(use->key, "rate limit key");
		if (!DurableRateUseDefinition(use))
			ereport(ERROR,
					errcode(ERRCODE_UNDEFINED_OBJECT),
					errmsg("rate limit \"%s\" does not exist", use->prefix),
					errhint("Define it with durable_set_rate_limit()."));
		if (use->units > use->burst)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("%lld units of rate limit \"%s\" exceed its burst of %d",
						   (long long) use->units, use->name, use->burst),
					errdetail("A claim could never take them."));
	}
	return n > 0 ? uses[0].name : NULL;
}

static DurableStatement queue_rate_limited = {
	.name = "queue_rate_limited",
	.sql = "UPDATE durable.queues SET rate_limited = true"
	" WHERE queue_name = $name AND NOT rate_limited",
	DURABLE_PARAMS(name_params),
};

/*
 * DurableMakeQueueRateLimited
 *		Make the claims of the queue read into settings check the limits of
 *		the tasks they take, unless they did.
 */
void
DurableMakeQueueRateLimited(const char *queue, const DurableQueue *settings)
{
	Datum		name;

	if (settings->rate_limited)
		return;
	name = CStringGetTextDatum(queue);
	(void) DurableRun(&queue_rate_limited, &name, NULL, SPI_OK_UPDATE, 0);
}

/*
 * DurableSetRateLimit
 *		Create or replace a limit: burst units at once, rate per per after
 *		that.  Buckets keep their state: units taken stay taken.
 */
void
DurableSetRateLimit(const char *name, int32 rate, const Interval *per, int32 burst)
{
	Datum		args[DEF_NPARAMS];

	args[DEF_NAME] = CStringGetTextDatum(name);
	args[DEF_RATE] = Int32GetDatum(rate);
	args[DEF_PER] = IntervalPGetDatum(per);
	args[DEF_PER_US] = Int64GetDatum(DurableIntervalMicroseconds(per, "per"));
	args[DEF_BURST] = Int32GetDatum(burst);
	args[DEF_NOW] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	(void) DurableRun(&definition_set, args, NULL, SPI_OK_INSERT, 0);
}

/*
 * DurableDropRateLimit
 *		Drop a limit and its buckets; 42704 when there is none.  Tasks that
 *		name it are no longer held back by it.
 */
void
DurableDropRateLimit(const char *name)
{
	Datum		args[1];

	args[0] = CStringGetTextDatum(name);
	if (DurableRun(&definition_drop, args, NULL, SPI_OK_DELETE, 0).rows == 0)
		ereport(ERROR,
				errcode(ERRCODE_UNDEFINED_OBJECT),
				errmsg("rate limit \"%s\" does not exist", name));
	(void) DurableRun(&buckets_drop, args, NULL, SPI_OK_DELETE, 0);
}
