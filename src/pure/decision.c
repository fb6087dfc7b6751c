/*-------------------------------------------------------------------------
 *
 * decision.c
 *	  The decision tables of durable: what to do after a failed attempt,
 *	  and what to do with an expired or questioned activity.
 *
 * Same evidence, same decision: both are pure functions of their
 * arguments, exposed in SQL and used by the C code that applies them (the
 * reconciler, durable_fail), so tests and recovery can never disagree.
 *
 *-------------------------------------------------------------------------
 */
#include "pure/pure.h"

#include "common/int.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

static const char *const next_action_names[] = {
	[DURABLE_NEXT_SCHEDULE_RETRY] = "schedule_retry",
	[DURABLE_NEXT_FAIL_PERMANENT] = "fail_permanent",
	[DURABLE_NEXT_MANUAL_REVIEW] = "manual_review",
	[DURABLE_NEXT_DEADLINE_EXCEEDED] = "deadline_exceeded",
	[DURABLE_NEXT_ATTEMPTS_EXHAUSTED] = "attempts_exhausted",
};

static const char *const recovery_action_names[] = {
	[DURABLE_RECOVERY_WAIT] = "wait",
	[DURABLE_RECOVERY_RECORD_COMPLETION] = "record_completion",
	[DURABLE_RECOVERY_RECORD_FAILURE] = "record_failure",
	[DURABLE_RECOVERY_RECONCILE] = "reconcile",
	[DURABLE_RECOVERY_MANUAL_REVIEW] = "manual_review",
	[DURABLE_RECOVERY_EXHAUSTED] = "exhausted",
	[DURABLE_RECOVERY_RETRY_SAME_ACTIVITY] = "retry_same_activity",
};

const char *
DurableNextActionName(DurableNextAction action)
{
	return next_action_names[action];
}

const char *
DurableRecoveryActionName(DurableRecoveryAction action)
{
	return recovery_action_names[action];
}

/*
 * DurableParseActivityClass
 *		'pure' | 'idempotent' | 'queryable' | 'unsafe'; anything else is 22023.
 */
DurableActivityClass
DurableParseActivityClass(const char *name)
{
	if (strcmp(name, "pure") == 0)
		return DURABLE_CLASS_PURE;
	if (strcmp(name, "idempotent") == 0)
		return DURABLE_CLASS_IDEMPOTENT;
	if (strcmp(name, "queryable") == 0)
		return DURABLE_CLASS_QUERYABLE;
	if (strcmp(name, "unsafe") == 0)
		return DURABLE_CLASS_UNSAFE;
	ereport(ERROR,
			errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			errmsg("unknown activity class \"%s\"", name),
			errhint("The class must be \"pure\", \"idempotent\", \"queryable\" or \"unsafe\"."));
	pg_unreachable();
}

/*
 * DurableParseErrorClass
 *		'transient' | 'permanent' | 'unknown'; anything else is 22023.
 */
DurableErrorClass
DurableParseErrorClass(const char *name)
{
	if (strcmp(name, "transient") == 0)
		return DURABLE_ERROR_TRANSIENT;
	if (strcmp(name, "permanent") == 0)
		return DURABLE_ERROR_PERMANENT;
	if (strcmp(name, "unknown") == 0)
		return DURABLE_ERROR_UNKNOWN;
	ereport(ERROR,
			errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			errmsg("unknown error class \"%s\"", name),
			errhint("The error class must be \"transient\", \"permanent\" or \"unknown\"."));
	pg_unreachable();
}

/*
 * DurableParseReceipt
 *		NULL, 'succeeded', 'failed_permanent' or 'not_executed'; else 22023.
 */
DurableReceipt
DurableParseReceipt(const char *name)
{
	if (name == NULL)
		return DURABLE_RECEIPT_NONE;
	if (strcmp(name, "succeeded") == 0)
		return DURABLE_RECEIPT_SUCCEEDED;
	if (strcmp(name, "failed_permanent") == 0)
		return DURABLE_RECEIPT_FAILED_PERMANENT;
	if (strcmp(name, "not_executed") == 0)
		return DURABLE_RECEIPT_NOT_EXECUTED;
	ereport(ERROR,
			errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			errmsg("unknown receipt \"%s\"", name),
			errhint("A receipt must be \"succeeded\", \"failed_permanent\" or \"not_executed\"."));
	pg_unreachable();
}

/*
 * DurableIntervalMicroseconds
 *		An interval as microseconds, counting a day as 24 hours and a month
 *		as 30 days, as interval comparison does.  Out of range (and an error
 *		naming the argument "what") when its months and days alone, or the
 *		whole, do not fit in 64 bits.
 */
int64
DurableIntervalMicroseconds(const Interval *span, const char *what)
{
	int64		days;
	int64		result;

	if (pg_mul_s64_overflow((int64) span->month, DAYS_PER_MONTH, &days) ||
		pg_add_s64_overflow(days, (int64) span->day, &days) ||
		pg_mul_s64_overflow(days, USECS_PER_DAY, &result) ||
		pg_add_s64_overflow(result, span->time, &result))
		ereport(ERROR,
				errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				errmsg("%s is out of range", what));
	return result;
}

/*
 * DurableDecideNext
 *		The retry budget after a failed attempt (docs/design.md section 3).
 *
 * Times are microseconds; deadline is DURABLE_NO_DEADLINE when there is
 * none.  Only a transient error reaches the budget lines.
 */
DurableNextAction
DurableDecideNext(int32 attempts, int32 max_attempts, int64 elapsed,
				  int64 deadline, DurableErrorClass error_class,
				  int64 next_delay)
{
	int64		next_start;

	if (error_class == DURABLE_ERROR_PERMANENT)
		return DURABLE_NEXT_FAIL_PERMANENT;
	if (error_class == DURABLE_ERROR_UNKNOWN)
		return DURABLE_NEXT_MANUAL_REVIEW;

	if (deadline != DURABLE_NO_DEADLINE)
	{
		/* a retry that would start after the deadline is already too late */
		if (pg_add_s64_overflow(elapsed, next_delay, &next_start))
			next_start = PG_INT64_MAX;
		if (elapsed > deadline || next_start > deadline)
			return DURABLE_NEXT_DEADLINE_EXCEEDED;
	}
	if (attempts >= max_attempts)
		return DURABLE_NEXT_ATTEMPTS_EXHAUSTED;
	return DURABLE_NEXT_SCHEDULE_RETRY;
}

/*
 * DurableDecideRecovery
 *		What to do with an expired or questioned activity (docs/design.md section 3).
 *
 * A 'not_executed' receipt proves that the attempt had no effect, so that
 * attempt is safe to retry whatever the class.  A queryable activity with
 * no receipt yet is looked up before anything else is decided.
 */
DurableRecoveryAction
DurableDecideRecovery(bool lease_expired, DurableReceipt receipt,
					  bool retry_safe, int32 attempts, int32 max_attempts,
					  bool queryable)
{
	if (!lease_expired)
		return DURABLE_RECOVERY_WAIT;
	if (receipt == DURABLE_RECEIPT_SUCCEEDED)
		return DURABLE_RECOVERY_RECORD_COMPLETION;
	if (receipt == DURABLE_RECEIPT_FAILED_PERMANENT)
		return DURABLE_RECOVERY_RECORD_FAILURE;
	if (receipt == DURABLE_RECEIPT_NOT_EXECUTED)
		retry_safe = true;
	else if (queryable)
		return DURABLE_RECOVERY_RECONCILE;
	if (!retry_safe)
		return DURABLE_RECOVERY_MANUAL_REVIEW;
	if (attempts >= max_attempts)
		return DURABLE_RECOVERY_EXHAUSTED;
	return DURABLE_RECOVERY_RETRY_SAME_ACTIVITY;
}

/*
 * DurableMostCautious
 *		Of two recovery actions, the one a task with both steps in doubt
 *		takes (docs/design.md section 3, several steps in doubt): a person decides
 *		before anything is looked up, a look-up comes before any failure or
 *		retry is settled, a failure ends what a retry would continue, and a
 *		retry is more cautious than taking the work as done.  Of a recorded
 *		failure and exhausted attempts, the recorded failure names the cause.
 */
DurableRecoveryAction
DurableMostCautious(DurableRecoveryAction a, DurableRecoveryAction b)
{
	static const int caution[] = {
		[DURABLE_RECOVERY_WAIT] = 0,
		[DURABLE_RECOVERY_RECORD_COMPLETION] = 1,
		[DURABLE_RECOVERY_RETRY_SAME_ACTIVITY] = 2,
		[DURABLE_RECOVERY_EXHAUSTED] = 3,
		[DURABLE_RECOVERY_RECORD_FAILURE] = 4,
		[DURABLE_RECOVERY_RECONCILE] = 5,
		[DURABLE_RECOVERY_MANUAL_REVIEW] = 6,
	};

	return caution[b] > caution[a] ? b : a;
}
