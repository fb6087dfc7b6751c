/*-------------------------------------------------------------------------
 *
 * args.c
 *	  Checking the arguments of the SQL API.
 *
 * Every bad argument is an ERROR before anything is written: 22004 for a
 * NULL that means nothing, 22023 for a value out of its domain, 54000 for
 * a payload over durable.max_payload_size, 42704 for an id that names
 * nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "utils/numeric.h"

#include "access/xact.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

void
DurableRequireArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("%s must not be null", name));
}

/*
 * DurableNameArg
 *		A queue or worker name: not NULL, not empty, at most
 *		DURABLE_MAX_NAME_LEN bytes, no control characters.
 */
char *
DurableNameArg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	char	   *name;
	size_t		len;

	DurableRequireArg(fcinfo, argno, what);
	name = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	len = strlen(name);
	if (len == 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must not be empty", what));
	if (len > DURABLE_MAX_NAME_LEN)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s \"%s\" is too long", what, DurableClipName(name, 20)),
				errdetail("It has %zu bytes; the limit is %d.",
						  len, DURABLE_MAX_NAME_LEN));
	for (size_t i = 0; i < len; i++)
		if ((unsigned char) name[i] < 0x20 || name[i] == 0x7f)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("%s must not contain control characters", what));
	return name;
}

/* context of an error in check_interval_range */
static void
interval_range_context(void *arg)
{
	const char *name = (const char *) arg;

	errcontext("%s added to or subtracted from the current time", name);
}

/*
 * check_interval_range
 *		Every interval durable stores or uses is added to a time (a lease's
 *		end, a lock's, a key's expiry), or subtracted from one (the stuck
 *		alarm's cutoff, in the reconciler's every tick): both must stay in
 *		the timestamp range, or the interval is 22008 now, rather than every
 *		call or tick that uses it later.
 */
static void
check_interval_range(Interval *span, const char *name)
{
	ErrorContextCallback context;
	Datum		now = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());

	context.callback = interval_range_context;
	context.arg = (void *) name;
	context.previous = error_context_stack;
	error_context_stack = &context;
	/* on the UTC calendar, as DurableTimePlus adds */
	(void) DirectFunctionCall2(timestamp_pl_interval, now, IntervalPGetDatum(span));
	(void) DirectFunctionCall2(timestamp_mi_interval, now, IntervalPGetDatum(span));
	error_context_stack = context.previous;
}

/*
 * check_interval_signs
 *		An interval's parts must not have different signs: a month or a day
 *		is not always the same length, so '-10 mon 300 days 1 second', which
 *		compares as one second, ends ten months minus 300 days earlier when
 *		it is added to a time, i.e. in the past.  With no negative part,
 *		what it adds is positive whatever the date.
 */
static void
check_interval_signs(Interval *span, const char *name)
{
	if ((span->month < 0 || span->day < 0 || span->time < 0) &&
		(span->month > 0 || span->day > 0 || span->time > 0))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must not mix positive and negative parts", name),
				errdetail("The value given was \"%s\"; how long it lasts would depend on the date it is added to.",
						  DatumGetCString(DirectFunctionCall1(interval_out,
															  PointerGetDatum(span)))),
				errhint("Give it in one unit, or in parts that are all positive."));
}

/*
 * interval_arg
 *		An interval argument that must be given, not mix positive and
 *		negative parts, stay in the timestamp range when added to a time,
 *		and be greater than zero (positive) or at least zero.
 */
static Interval *
interval_arg(FunctionCallInfo fcinfo, int argno, const char *name, bool positive)
{
	Interval   *span;
	int64		usecs;

	DurableRequireArg(fcinfo, argno, name);
	span = PG_GETARG_INTERVAL_P(argno);
	check_interval_signs(span, name);
	usecs = DurableIntervalMicroseconds(span, name);
	if (positive ? usecs <= 0 : usecs < 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				positive ? errmsg("%s must be greater than zero", name) :
				errmsg("%s must not be negative", name),
				errdetail("The value given was \"%s\".",
						  DatumGetCString(DirectFunctionCall1(interval_out,
															  PointerGetDatum(span)))));
	check_interval_range(span, name);
	return span;
}

/*
 * DurablePositiveIntervalArg
 *		An interval argument that must be given, be greater than zero and
 *		not mix positive and negative parts.
 */
Interval *
DurablePositiveIntervalArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	return interval_arg(fcinfo, argno, name, true);
}

/*
 * DurableNonNegativeIntervalArg
 *		As DurablePositiveIntervalArg, but zero is allowed.
 */
Interval *
DurableNonNegativeIntervalArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	return interval_arg(fcinfo, argno, name, false);
}

/*
 * DurableDelayArg
 *		An interval argument given (argno not null) as a delay: zero or
 *		more, in parts of one sign, as microseconds.
 */
int64
DurableDelayArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	Interval   *span = PG_GETARG_INTERVAL_P(argno);
	int64		delay;

	check_interval_signs(span, name);
	delay = DurableIntervalMicroseconds(span, name);
	if (delay < 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must not be negative", name));
	return delay;
}

int32
DurableIntArgAtLeast(FunctionCallInfo fcinfo, int argno, const char *name,
					 int32 min)
{
	int32		value;

	DurableRequireArg(fcinfo, argno, name);
	value = PG_GETARG_INT32(argno);
	if (value < min)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must be at least %d", name, min),
				errdetail("The value given was %d.", value));
	return value;
}

/* a batch size: from 1 to DURABLE_MAX_BATCH */
int32
DurableBatchArg(FunctionCallInfo fcinfo, int argno)
{
	int32		batch = DurableIntArgAtLeast(fcinfo, argno, "batch", 1);

	if (batch > DURABLE_MAX_BATCH)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("batch must be at most %d", DURABLE_MAX_BATCH),
				errdetail("The value given was %d.", batch));
	return batch;
}

/*
 * DurableTaskIdArg
 *		A task id argument: NULL is 22004; an id no enqueue can have made is
 *		reported like any unknown task.
 */
int64
DurableTaskIdArg(FunctionCallInfo fcinfo, int argno)
{
	int64		task_id;

	DurableRequireArg(fcinfo, argno, "task_id");
	task_id = PG_GETARG_INT64(argno);
	if (task_id <= 0)
		ereport(ERROR,
				errcode(ERRCODE_UNDEFINED_OBJECT),
				errmsg("task %lld does not exist", (long long) task_id));
	return task_id;
}

int64
DurableFenceArg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("fence must not be null"),
				errhint("Pass the fence that durable_claim returned with the task."));
	return PG_GETARG_INT64(argno);
}

/*
 * DurableJsonbArg
 *		A jsonb argument, or NULL; one larger than durable.max_payload_size
 *		is 54000, before anything is stored.
 */
Jsonb *
DurableJsonbArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	Jsonb	   *value;

	if (PG_ARGISNULL(argno))
		return NULL;
	value = PG_GETARG_JSONB_P(argno);
	DurableCheckPayloadSize(VARSIZE(value), name);
	return value;
}

/*
 * DurableNumericArg
 *		An optional amount, or NULL when NULL or not passed (a call of an
 *		older signature, which the library still serves).
 */
Numeric
DurableNumericArg(FunctionCallInfo fcinfo, int argno)
{
	if (argno >= PG_NARGS() || PG_ARGISNULL(argno))
		return NULL;
	return PG_GETARG_NUMERIC(argno);
}

/*
 * DurableTextArg
 *		A free-form text argument (a reason, a version, a recovery point), or
 *		NULL; like a payload, one larger than durable.max_payload_size is
 *		54000 before anything is stored.
 */
text *
DurableTextArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	text	   *value;

	if (PG_ARGISNULL(argno))
		return NULL;
	value = PG_GETARG_TEXT_PP(argno);
	DurableCheckPayloadSize(VARSIZE_ANY_EXHDR(value), name);
	return value;
}

/* the same as a C string, or NULL */
char *
DurableTextArgCString(FunctionCallInfo fcinfo, int argno, const char *name)
{
	text	   *value = DurableTextArg(fcinfo, argno, name);

	return value ? text_to_cstring(value) : NULL;
}

/*
 * DurableReasonArg
 *		An operator's reason for what a call does to a task, which its
 *		event keeps: not NULL, not empty; hint says what it is for.
 */
char *
DurableReasonArg(FunctionCallInfo fcinfo, int argno, const char *hint)
{
	char	   *reason;

	DurableRequireArg(fcinfo, argno, "reason");
	reason = DurableTextArgCString(fcinfo, argno, "reason");
	if (reason[0] == '\0')
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("reason must not be empty"),
				errhint("%s", hint));
	return reason;
}

/*
 * DurableArrayArg
 *		The elements of a one-dimensional array argument of elemtype (a
 *		deeper array is 2202E: its elements would be taken in storage
 *		order, whatever their rows meant).  Returns how many there are.
 */
int
DurableArrayArg(FunctionCallInfo fcinfo, int argno, Oid elemtype,
				const char *name, Datum **elems, bool **elnulls)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(argno);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			n;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				errmsg("%s must be a one-dimensional array", name));
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(array, elemtype, typlen, typbyval, typalign,
					  elems, elnulls, &n);
	return n;
}
