/*-------------------------------------------------------------------------
 *
 * fuzz_decisions.c
 *	  libFuzzer target for durable's pure C code: the retry delay, both
 *	  decision tables, interval arithmetic, the parsing of class, receipt
 *	  and error-class names, and cron expressions with their next
 *	  occurrence on the wall clock.
 *
 * The target links src/retry.c, src/decision.c, src/digest.c and
 * src/cron.c, built
 * with the sanitizers, outside the server, with libpgcommon's frontend
 * palloc; ereport is replaced below by a longjmp back to the target, so
 * that an ERROR a function raises on bad input is an expected outcome (and
 * what it allocated is not freed: tools/fuzz turns leak detection off),
 * while a crash, an overflow, undefined behaviour or a broken invariant is
 * a finding.
 * Built and run by tools/fuzz.
 *
 *-------------------------------------------------------------------------
 */
#include "pure/pure.h"

#include <math.h>
#include <setjmp.h>

/* ---- the few backend services the code under test needs ---- */

static sigjmp_buf on_error;
static int	error_level;

/* may the call under test raise an ERROR for this input? */
static bool error_allowed;

bool
errstart(int elevel, const char *domain)
{
	error_level = elevel;
	return true;
}

bool
errstart_cold(int elevel, const char *domain)
{
	return errstart(elevel, domain);
}

void
errfinish(const char *filename, int lineno, const char *funcname)
{
	if (error_level >= ERROR)
		siglongjmp(on_error, 1);
}

int
errcode(int sqlerrcode)
{
	return 0;
}

int
errmsg(const char *fmt,...)
{
	return 0;
}

int
errmsg_internal(const char *fmt,...)
{
	return 0;
}

int
errdetail(const char *fmt,...)
{
	return 0;
}

int
errhint(const char *fmt,...)
{
	return 0;
}

/* the SQL-callable wrappers are not fuzzed here: reaching these is a bug */
void
DurableRequireArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	abort();
}

char *
JsonbToCString(StringInfo out, JsonbContainer *in, int estimated_len)
{
	abort();
}

text *
cstring_to_text(const char *s)
{
	abort();
}

char *
text_to_cstring(const text *t)
{
	abort();
}

struct varlena *
pg_detoast_datum_packed(struct varlena *datum)
{
	abort();
}

/* the request hash of digest.c walks jsonb in the server only */
struct varlena *
pg_detoast_datum(struct varlena *datum)
{
	abort();
}

JsonbIterator *
JsonbIteratorInit(JsonbContainer *container)
{
	abort();
}

JsonbIteratorToken
JsonbIteratorNext(JsonbIterator **it, JsonbValue *val, bool skipNested)
{
	abort();
}

JsonbValue *
pushJsonbValue(JsonbParseState **pstate, JsonbIteratorToken seq,
			   JsonbValue *jbval)
{
	abort();
}

Jsonb *
JsonbValueToJsonb(JsonbValue *val)
{
	abort();
}

Datum
DirectFunctionCall1Coll(PGFunction func, Oid collation, Datum arg1)
{
	abort();
}

Datum		numeric_trim_scale(PG_FUNCTION_ARGS);

Datum
numeric_trim_scale(PG_FUNCTION_ARGS)
{
	abort();
}

/* ---- reading the input ---- */

typedef struct Input
{
	const uint8 *data;
	size_t		len;
} Input;

static uint32
take32(Input *in)
{
	uint32		v = 0;

	for (int i = 0; i < 4; i++)
	{
		v = (v << 8) | (in->len ? *in->data : 0);
		if (in->len)
		{
			in->data++;
			in->len--;
		}
	}
	return v;
}

static int64
take64(Input *in)
{
	uint64		hi = take32(in);

	return (int64) ((hi << 32) | take32(in));
}

/* ---- the targets ---- */

static void
fuzz_retry_delay(Input *in)
{
	int32		attempt = (int32) (take32(in) & 0x7fffffff);
	int32		base = (int32) (take32(in) & 0x7fffffff);
	int32		cap = (int32) (take32(in) & 0x7fffffff);
	long double ceiling;
	int32		delay;

	attempt = Max(attempt, 1);
	base = Max(base, 1);
	cap = Max(cap, 1);
	delay = DurableRetryDelay((const char *) in->data, in->len, attempt, base, cap);

	ceiling = attempt - 1 >= 64 ? (long double) cap :
		fminl((long double) cap, (long double) base * ldexpl(1.0L, attempt - 1));
	if (delay < 1 || delay > cap || (long double) delay > fmaxl(ceiling, 1.0L) ||
		(long double) delay < floorl(ceiling * 0.5L))
		abort();
	/* deterministic */
	if (delay != DurableRetryDelay((const char *) in->data, in->len, attempt, base, cap))
		abort();
}

static void
fuzz_next_action(Input *in)
{
	int32		attempts = (int32) take32(in);
	int32		max_attempts = (int32) take32(in);
	int64		elapsed = take64(in);
	int64		deadline = take64(in);
	int64		next_delay = take64(in);
	DurableErrorClass class = (DurableErrorClass) (take32(in) % 3);
	DurableNextAction action;

	action = DurableDecideNext(attempts, max_attempts, elapsed, deadline,
							   class, next_delay);
	if (class == DURABLE_ERROR_PERMANENT && action != DURABLE_NEXT_FAIL_PERMANENT)
		abort();
	if (class == DURABLE_ERROR_UNKNOWN && action != DURABLE_NEXT_MANUAL_REVIEW)
		abort();
	if (class == DURABLE_ERROR_TRANSIENT)
	{
		if (action == DURABLE_NEXT_SCHEDULE_RETRY &&
			(attempts >= max_attempts || elapsed > deadline))
			abort();
		if (action == DURABLE_NEXT_ATTEMPTS_EXHAUSTED && attempts < max_attempts)
			abort();
		if (deadline == DURABLE_NO_DEADLINE && action == DURABLE_NEXT_DEADLINE_EXCEEDED)
			abort();
	}
	(void) DurableNextActionName(action);
}

static void
fuzz_recovery_action(Input *in)
{
	uint32		flags = take32(in);
	int32		attempts = (int32) take32(in);
	int32		max_attempts = (int32) take32(in);
	DurableReceipt receipt = (DurableReceipt) ((flags >> 3) % 4);
	bool		expired = flags & 1;
	bool		retry_safe = flags & 2;
	bool		queryable = flags & 4;
	DurableRecoveryAction action;

	action = DurableDecideRecovery(expired, receipt, retry_safe, attempts,
								   max_attempts, queryable);
	if (!expired && action != DURABLE_RECOVERY_WAIT)
		abort();
	/* an outcome nobody knows is never retried */
	if (action == DURABLE_RECOVERY_RETRY_SAME_ACTIVITY && !retry_safe &&
		receipt != DURABLE_RECEIPT_NOT_EXECUTED)
		abort();
	if (receipt == DURABLE_RECEIPT_SUCCEEDED && expired &&
		action != DURABLE_RECOVERY_RECORD_COMPLETION)
		abort();
	(void) DurableRecoveryActionName(action);
}

static void
fuzz_interval(Input *in)
{
	Interval	span;
	__int128	expected;
	int64		got;

	span.month = (int32) take32(in);
	span.day = (int32) take32(in);
	span.time = take64(in);
	expected = ((__int128) span.month * DAYS_PER_MONTH + span.day) * USECS_PER_DAY;
	/* out of range: the months and days alone, or the whole */
	error_allowed = expected > PG_INT64_MAX || expected < PG_INT64_MIN;
	expected += span.time;
	error_allowed |= expected > PG_INT64_MAX || expected < PG_INT64_MIN;
	got = DurableIntervalMicroseconds(&span, "fuzz");
	/* it returned, so the value must have fitted */
	if ((__int128) got != expected)
		abort();
}

static void
fuzz_names(Input *in)
{
	char		name[64];
	size_t		n = Min(in->len, sizeof(name) - 1);
	static const char *const known[] = {
		"transient", "permanent", "unknown", "succeeded", "failed_permanent",
		"not_executed", "pure", "idempotent", "queryable", "unsafe"
	};
	int			which = n ? in->data[0] % 3 : 0;
	bool		is_known = false;

	memcpy(name, in->data, n);
	name[n] = '\0';
	for (int i = 0; i < (int) lengthof(known); i++)
		is_known |= strcmp(name, known[i]) == 0;
	error_allowed = true;		/* a known name of another kind is an error too */

	if (which == 0)
		(void) DurableParseErrorClass(name);
	else if (which == 1)
		(void) DurableParseReceipt(name);
	else
		(void) DurableParseActivityClass(name);
	/* it returned: the name must be one of the known ones */
	if (!is_known)
		abort();
}

/* a cron field's value is in its bit set */
static bool
cron_has(uint64 bits, int value)
{
	return (bits >> value) & 1;
}

static int
fuzz_days_in_month(int year, int month)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (month == 2 && ((year % 4 == 0 && year % 100 != 0) || year % 400 == 0))
		return 29;
	return days[month - 1];
}

static bool
cron_matches(const DurableCron *cron, const DurableWallTime *t)
{
	return cron_has(cron->minutes, t->minute) && cron_has(cron->hours, t->hour) &&
		DurableCronMatchesDay(cron, t->year, t->month, t->day);
}

static int
wall_compare(const DurableWallTime *a, const DurableWallTime *b)
{
	const int	x[5] = {a->year, a->month, a->day, a->hour, a->minute};
	const int	y[5] = {b->year, b->month, b->day, b->hour, b->minute};

	for (int i = 0; i < 5; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return 0;
}

/* one minute on, by the calendar */
static void
wall_step(DurableWallTime *t)
{
	if (++t->minute < 60)
		return;
	t->minute = 0;
	if (++t->hour < 24)
		return;
	t->hour = 0;
	if (++t->day <= fuzz_days_in_month(t->year, t->month))
		return;
	t->day = 1;
	if (++t->month <= 12)
		return;
	t->month = 1;
	t->year++;
}

/*
 * Parse any text as a cron expression (an ERROR is a fine answer); for one
 * that parses, the next occurrence after a random wall-clock time must be
 * later, must match, and no minute in between may match (checked minute by
 * minute for the first three days); the previous one before that next
 * occurrence must be at or before the start, match, and lead to it again.
 */
static void
fuzz_cron(Input *in)
{
	DurableWallTime start;
	DurableWallTime next;
	DurableWallTime walk;
	DurableCron cron;
	char		text[128];
	size_t		n;

	start.year = 2000 + (int) (take32(in) % 100);
	start.month = 1 + (int) (take32(in) % 12);
	start.day = 1 + (int) (take32(in) % fuzz_days_in_month(start.year, start.month));
	start.hour = (int) (take32(in) % 24);
	start.minute = (int) (take32(in) % 60);
	n = Min(in->len, sizeof(text) - 1);
	memcpy(text, in->data, n);
	text[n] = '\0';

	error_allowed = true;
	DurableCronParse(text, &cron);
	error_allowed = false;

	next = start;
	if (!DurableCronNextWall(&cron, &next))
	{
		/* only a leap day can be years away, and never past 9999 */
		if (start.year < 9990)
			abort();
		return;
	}
	if (wall_compare(&next, &start) <= 0 || !cron_matches(&cron, &next) ||
		next.day > fuzz_days_in_month(next.year, next.month) ||
		next.month < 1 || next.month > 12 || next.hour > 23 || next.minute > 59)
		abort();
	walk = start;
	for (int i = 0; i < 3 * 24 * 60; i++)
	{
		wall_step(&walk);
		if (wall_compare(&walk, &next) >= 0)
			break;
		if (cron_matches(&cron, &walk))
			abort();
	}

	/*
	 * Back from the next occurrence: the latest one before it is at or
	 * before the start, matches, and the next after it is that next one
	 * again; inclusive, the next occurrence itself.
	 */
	walk = next;
	if (!DurableCronPrevWall(&cron, &walk, true) || wall_compare(&walk, &next) != 0)
		abort();
	if (DurableCronPrevWall(&cron, &walk, false))
	{
		DurableWallTime again = walk;

		if (wall_compare(&walk, &start) > 0 || !cron_matches(&cron, &walk) ||
			walk.day > fuzz_days_in_month(walk.year, walk.month) ||
			walk.month < 1 || walk.hour < 0 || walk.minute < 0)
			abort();
		if (!DurableCronNextWall(&cron, &again) || wall_compare(&again, &next) != 0)
			abort();
	}
	else if (start.year > 10)
		abort();				/* only a leap day can be years back */
}

int			LLVMFuzzerTestOneInput(const uint8 *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	Input		in = {data, size};
	uint32		target;

	if (size == 0)
		return 0;
	target = *in.data % 6;
	in.data++;
	in.len--;

	error_allowed = false;
	if (sigsetjmp(on_error, 0) != 0)
	{
		/* an ERROR was raised: only where the input deserved one */
		if (!error_allowed)
			abort();
	}
	else
	{
		switch (target)
		{
			case 0:
				fuzz_retry_delay(&in);
				break;
			case 1:
				fuzz_next_action(&in);
				break;
			case 2:
				fuzz_recovery_action(&in);
				break;
			case 3:
				fuzz_interval(&in);
				break;
			case 4:
				fuzz_names(&in);
				break;
			case 5:
				fuzz_cron(&in);
				break;
		}
	}
	return 0;
}
