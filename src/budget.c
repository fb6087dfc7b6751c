/*-------------------------------------------------------------------------
 *
 * budget.c
 *	  When a retry may start: its own delay, the server's Retry-After, and
 *	  the queue's retry-token bucket.
 *
 * Only retries take tokens; first attempts never wait for one, so they keep
 * their share when retries are throttled.  With no token left a retry is
 * deferred, never dropped: it waits until the time its token will exist.
 * Tokens taken ahead of time leave the bucket below zero, so a storm of
 * failures is spread over the refill rate instead of waking up together.
 *
 * Locking: the bucket lives in the queue's row, which a retry locks FOR NO
 * KEY UPDATE for the rest of the transaction (claims and enqueues do not
 * lock it).
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include <math.h>

#include "common/int.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* columns of STMT_QUEUE_TOKENS_LOCK */
enum
{
	TOKENS_CAPACITY = 1,
	TOKENS_RATE,
	TOKENS_LEVEL,
	TOKENS_AT
};

/*
 * DurableRetryWaitFor
 *		Microseconds before the next attempt of an activity of a task (the
 *		task itself, or one of its steps): the later of its deterministic
 *		retry delay under the queue's policy and the server's Retry-After
 *		(0 for none).
 */
int64
DurableRetryWaitFor(const DurableTask *task, const char *activity_id,
					int32 attempt, int64 retry_after)
{
	int32		delay;

	delay = DurableRetryDelay(activity_id, strlen(activity_id), Max(attempt, 1),
							  task->retry_base, task->retry_cap);
	return Max((int64) delay * USECS_PER_SEC, retry_after);
}

/* the wait before the task's own next attempt; its id is the activity id */
int64
DurableRetryWait(const DurableTask *task, int64 retry_after)
{
	char		activity_id[32];

	snprintf(activity_id, sizeof(activity_id), INT64_FORMAT, task->task_id);
	return DurableRetryWaitFor(task, activity_id, task->attempt, retry_after);
}

/*
 * DurableTakeRetryToken
 *		Take a token from the task's queue and return when it is (or will
 *		be) there: now, or the time the bucket refills to it.
 */
TimestampTz
DurableTakeRetryToken(const DurableTask *task, TimestampTz now)
{
	Datum		args[3];
	bool		isnull;
	double		capacity;
	double		rate;
	double		tokens;
	TimestampTz at;
	TimestampTz available = now;

	if (!task->retry_limited)
		return now;

	args[0] = CStringGetTextDatum(task->queue);
	if (DurableExecute(STMT_QUEUE_TOKENS_LOCK, args, NULL, SPI_OK_SELECT, 1) == 0)
		return now;				/* queue dropped under us: nothing to limit */

	capacity = DatumGetInt32(DurableResultDatum(0, TOKENS_CAPACITY, &isnull));
	if (isnull)
		return now;				/* the bucket was removed meanwhile */
	rate = DatumGetFloat8(DurableResultDatum(0, TOKENS_RATE, &isnull));
	tokens = DatumGetFloat8(DurableResultDatum(0, TOKENS_LEVEL, &isnull));
	at = DatumGetTimestampTz(DurableResultDatum(0, TOKENS_AT, &isnull));

	/* transaction start times of concurrent retries need not be in order */
	if (now > at)
	{
		tokens += (double) (now - at) / USECS_PER_SEC * rate;
		at = now;
	}
	tokens = Min(tokens, capacity);
	if (tokens < 1.0)
	{
		/*
		 * In double first: a deep deficit, or a rate stored before rates
		 * were checked, can reach past the timestamp range, and converting
		 * such a value to int64 is undefined.
		 */
		double		wait = ceil((1.0 - tokens) / rate * USECS_PER_SEC);

		if (!(wait < (double) (END_TIMESTAMP - at)))
			ereport(ERROR,
					errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					errmsg("retry of task %lld would be deferred past the timestamp range",
						   (long long) task->task_id),
					errdetail("Queue \"%s\" has %.0f retry tokens and refills %g a second.",
							  task->queue, tokens, rate),
					errhint("Raise the queue's retry_refill_rate or retry_capacity with durable_alter_queue()."));
		available = at + (TimestampTz) wait;
	}
	tokens -= 1.0;

	args[1] = Float8GetDatum(tokens);
	args[2] = TimestampTzGetDatum(at);
	DurableExecute(STMT_QUEUE_TOKENS_SET, args, NULL, SPI_OK_UPDATE, 0);
	return available;
}

/*
 * DurableScheduleRetry
 *		The time a retry of the task starts, given the wait before it; takes
 *		a retry token and records the delay, and any deferral with its
 *		reason, in detail.
 */
TimestampTz
DurableScheduleRetry(const DurableTask *task, TimestampTz now, int64 wait,
					 DurableDetail *detail)
{
	TimestampTz run_at;
	TimestampTz token_at;

	if (pg_add_s64_overflow(now, wait, &run_at) || !IS_VALID_TIMESTAMP(run_at))
		ereport(ERROR,
				errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				errmsg("retry of task %lld would start out of the timestamp range",
					   (long long) task->task_id));
	DurableDetailInt(detail, "wait_ms", wait / 1000);

	token_at = DurableTakeRetryToken(task, now);
	if (token_at > run_at)
	{
		DurableDetailTime(detail, "deferred_until", token_at);
		DurableDetailText(detail, "deferral_reason",
						  "the queue's retry-token bucket is empty");
		run_at = token_at;
	}
	DurableDetailTime(detail, "run_at", run_at);
	return run_at;
}
