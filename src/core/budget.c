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
 * A queue's bucket is split over its partitions (see take_tokens): a
 * queue of one partition on one server keeps it in its row, the others in
 * durable.retry_buckets, a row per partition, which on Citus is on the
 * node of the partition's tasks.
 *
 * Locking: the bucket lives in a row, which taking a token locks (and the
 * queue's row too, on one server), and a row lock lasts until the end of
 * the transaction whatever the statement that took it.  So what matters is where in a
 * transaction the bucket is taken: as late as possible.  durable_fail takes
 * it as its last act (a worker then commits; enqueues and claims do not
 * conflict with it).  The reconciler's tick used to take it at its first
 * retry and hold it through the rest of the tick -- the other leases,
 * stuck alarms, retention -- so every failure in that queue waited for the
 * whole tick.  Within a tick (DurableBeginRetryTokens .. DurableTakeOwedTokens)
 * a retry is scheduled at its own delay and the token is owed; at the end
 * of the tick the owed tokens of each queue are taken in one go, in the
 * order the retries were scheduled, and a retry whose token comes later
 * than its delay is deferred then, with an event that says so.  The bucket
 * is then locked only from the end of the tick to its commit.  Each queue
 * is a part of the tick of its own (part.c).
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include <math.h>

#include "access/xact.h"
#include "common/int.h"
#include "nodes/pg_list.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* a queue's retry-token bucket */
enum
{
	TOKENS_CAPACITY,
	TOKENS_RATE,
	TOKENS_LEVEL,
	TOKENS_AT,
	TOKENS_PARTITIONS,
	TOKENS_NCOLUMNS
};

static const DurableColumn tokens_columns[TOKENS_NCOLUMNS] = {
	[TOKENS_CAPACITY] = {"retry_capacity", INT4OID},
	[TOKENS_RATE] = {"retry_refill_rate", FLOAT8OID},
	[TOKENS_LEVEL] = {"retry_tokens", FLOAT8OID},
	[TOKENS_AT] = {"retry_tokens_at", TIMESTAMPTZOID},
	[TOKENS_PARTITIONS] = {"partitions", INT4OID},
};

/* the statements of a queue by its name */
enum
{
	QUEUE_QUEUE,
	QUEUE_NPARAMS
};
static const DurableParam queue_params[QUEUE_NPARAMS] = {
	[QUEUE_QUEUE] = {"queue", TEXTOID},
};

#define QUEUE_TOKENS \
	"SELECT retry_capacity, retry_refill_rate, retry_tokens, retry_tokens_at," \
	" partitions FROM durable.queues WHERE queue_name = $queue"

static DurableStatement queue_tokens_lock = {
	.name = "queue_tokens_lock",
	.sql = QUEUE_TOKENS " FOR NO KEY UPDATE",
	DURABLE_PARAMS(queue_params),
	DURABLE_COLUMNS(tokens_columns),
};

/* the tick's: a queue's row another transaction holds is not waited for */
static DurableStatement queue_tokens_lock_nowait = {
	.name = "queue_tokens_lock_nowait",
	.sql = QUEUE_TOKENS " FOR NO KEY UPDATE NOWAIT",
	DURABLE_PARAMS(queue_params),
	DURABLE_COLUMNS(tokens_columns),
};

/* on Citus the queue's row is on every node: read, not locked */
static DurableStatement queue_tokens_read = {
	.name = "queue_tokens_read",
	.sql = QUEUE_TOKENS,
	DURABLE_PARAMS(queue_params),
	DURABLE_COLUMNS(tokens_columns),
};

/* a partition's bucket, locked; made full ($tokens) on first use */
enum
{
	BUCKET_TOKENS,
	BUCKET_AT,
	BUCKET_NCOLUMNS
};

static const DurableColumn bucket_columns[BUCKET_NCOLUMNS] = {
	[BUCKET_TOKENS] = {"tokens", FLOAT8OID},
	[BUCKET_AT] = {"tokens_at", TIMESTAMPTZOID},
};

enum
{
	PBUCKET_PARTITION,
	PBUCKET_QUEUE,
	PBUCKET_TOKENS,
	PBUCKET_TOKENS_AT,
	PBUCKET_NPARAMS
};
static const DurableParam bucket_params[PBUCKET_NPARAMS] = {
	[PBUCKET_PARTITION] = {"partition", INT4OID},
	[PBUCKET_QUEUE] = {"queue", TEXTOID},
	[PBUCKET_TOKENS] = {"tokens", FLOAT8OID},
	[PBUCKET_TOKENS_AT] = {"tokens_at", TIMESTAMPTZOID},
};

static DurableStatement bucket_lock = {
	.name = "retry_bucket_lock",
	.sql = "INSERT INTO durable.retry_buckets AS b"
	" (partition_key, queue_name, tokens, tokens_at)"
	" VALUES ($partition, $queue, $tokens, $tokens_at)"
	" ON CONFLICT (partition_key, queue_name) DO UPDATE SET tokens = b.tokens"
	" RETURNING b.tokens, b.tokens_at",
	DURABLE_PARAMS(bucket_params),
	DURABLE_COLUMNS(bucket_columns),
};

static DurableStatement bucket_set = {
	.name = "retry_bucket_set",
	.sql = "UPDATE durable.retry_buckets"
	" SET tokens = $tokens, tokens_at = $tokens_at"
	" WHERE partition_key = $partition AND queue_name = $queue",
	DURABLE_PARAMS(bucket_params),
};

/* a queue's bucket in its row (one partition on one server) */
enum
{
	QTOKENS_QUEUE,
	QTOKENS_TOKENS,
	QTOKENS_AT,
	QTOKENS_NPARAMS
};
static const DurableParam queue_tokens_set_params[QTOKENS_NPARAMS] = {
	[QTOKENS_QUEUE] = {"queue", TEXTOID},
	[QTOKENS_TOKENS] = {"tokens", FLOAT8OID},
	[QTOKENS_AT] = {"tokens_at", TIMESTAMPTZOID},
};

static DurableStatement queue_tokens_set = {
	.name = "queue_tokens_set",
	.sql = "UPDATE durable.queues SET retry_tokens = $tokens,"
	" retry_tokens_at = $tokens_at"
	" WHERE queue_name = $queue",
	DURABLE_PARAMS(queue_tokens_set_params),
};

enum
{
	DEFER_PARTITION,
	DEFER_TASK_ID,
	DEFER_RUN_AT,
	DEFER_NPARAMS
};
static const DurableParam task_defer_params[DEFER_NPARAMS] = {
	[DEFER_PARTITION] = {"partition", INT4OID},
	[DEFER_TASK_ID] = {"task_id", INT8OID},
	[DEFER_RUN_AT] = {"run_at", TIMESTAMPTZOID},
};

static DurableStatement task_defer = {
	.name = "task_defer",
	.sql = "UPDATE durable.live_tasks SET run_at = $run_at"
	" WHERE partition_key = $partition AND task_id = $task_id"
	" AND state = 'waiting' AND run_at < $run_at",
	DURABLE_PARAMS(task_defer_params),
};

static DurableStatement buckets_forget = {
	.name = "retry_buckets_forget",
	.sql = "DELETE FROM durable.retry_buckets WHERE queue_name = $queue",
	DURABLE_PARAMS(queue_params),
};

/*
 * DurableForgetRetryBuckets
 *		Remove the partitions' buckets of a queue dropped, or whose bucket
 *		was removed.
 */
void
DurableForgetRetryBuckets(const char *queue)
{
	Datum		args[QUEUE_NPARAMS];

	args[QUEUE_QUEUE] = CStringGetTextDatum(queue);
	DurableRun(&buckets_forget, args, NULL, SPI_OK_DELETE, 0);
}

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
 * take_tokens
 *		Take n tokens from the bucket of a queue's partition, one after the
 *		other, and set times[i] to when the i-th is (or will be) there: now,
 *		or the time the bucket refills to it.  Returns false, taking
 *		nothing, when the queue has no bucket (any more).  task_ids name the
 *		retries in errors.
 *
 *		A queue's bucket is split evenly over its partitions: each holds
 *		retry_capacity / partitions tokens and refills retry_refill_rate /
 *		partitions a second, in durable.retry_buckets, so that on Citus a
 *		retry writes its task's node only.  A queue of one partition on one
 *		server keeps its bucket in its row, as it always did.  The queue's
 *		row is locked on one server (an alteration waits), read on Citus;
 *		with nowait (the tick), a row another transaction holds (a
 *		durable_fail not yet committed) fails with 55P03 instead of being
 *		waited for.  Every taker locks the queue's row before the bucket's,
 *		so on one server the bucket is then free too.
 */
static bool
take_tokens(const char *queue, int32 partition, TimestampTz now, int n,
			const int64 *task_ids, TimestampTz *times, bool nowait)
{
	DurableResult res;
	Datum		queue_args[QUEUE_NPARAMS];
	Datum		bucket_args[PBUCKET_NPARAMS];
	Datum		set_args[QTOKENS_NPARAMS];
	bool		isnull;
	double		capacity;
	double		rate;
	double		tokens;
	TimestampTz at;
	int32		partitions;
	bool		split;

	queue_args[QUEUE_QUEUE] = CStringGetTextDatum(queue);
	res = DurableRun(DurableDistributed() ? &queue_tokens_read :
					 nowait ? &queue_tokens_lock_nowait : &queue_tokens_lock,
					 queue_args, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 0)
		return false;			/* queue dropped under us: nothing to limit */

	capacity = DatumGetInt32(DurableGetDatum(res, 0, TOKENS_CAPACITY, &isnull));
	if (isnull)
		return false;			/* the bucket was removed meanwhile */
	rate = DatumGetFloat8(DurableGetDatum(res, 0, TOKENS_RATE, &isnull));
	tokens = DatumGetFloat8(DurableGetDatum(res, 0, TOKENS_LEVEL, &isnull));
	at = DatumGetTimestampTz(DurableGetDatum(res, 0, TOKENS_AT, &isnull));
	partitions = DurableGetInt32(res, 0, TOKENS_PARTITIONS);
	split = partitions > 1 || DurableDistributed();
	if (split)
	{
		capacity /= partitions;
		rate /= partitions;
		bucket_args[PBUCKET_PARTITION] = Int32GetDatum(partition);
		bucket_args[PBUCKET_QUEUE] = queue_args[QUEUE_QUEUE];
		bucket_args[PBUCKET_TOKENS] = Float8GetDatum(capacity);
		bucket_args[PBUCKET_TOKENS_AT] = TimestampTzGetDatum(now);
		res = DurableRun(&bucket_lock, bucket_args, NULL, SPI_OK_INSERT_RETURNING, 0);
		tokens = DatumGetFloat8(DurableGetDatum(res, 0, BUCKET_TOKENS, &isnull));
		at = DatumGetTimestampTz(DurableGetDatum(res, 0, BUCKET_AT, &isnull));
	}

	/* transaction start times of concurrent retries need not be in order */
	if (now > at)
	{
		tokens += (double) (now - at) / USECS_PER_SEC * rate;
		at = now;
	}
	tokens = Min(tokens, capacity);
	for (int i = 0; i < n; i++)
	{
		times[i] = now;
		if (tokens < 1.0)
		{
			/*
			 * In double first: a deep deficit, or a rate stored before rates
			 * were checked, can reach past the timestamp range, and
			 * converting such a value to int64 is undefined.
			 */
			double		wait = ceil((1.0 - tokens) / rate * USECS_PER_SEC);

			if (!(wait < (double) (END_TIMESTAMP - at)))
				ereport(ERROR,
						errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
						errmsg("retry of task %lld would be deferred past the timestamp range",
							   (long long) task_ids[i]),
						errdetail("Queue \"%s\" has %.0f retry tokens and refills %g a second.",
								  queue, tokens, rate),
						errhint("Raise the queue's retry_refill_rate or retry_capacity with durable_alter_queue()."));
			times[i] = at + (TimestampTz) wait;
		}
		tokens -= 1.0;
	}

	if (split)
	{
		bucket_args[PBUCKET_TOKENS] = Float8GetDatum(tokens);
		bucket_args[PBUCKET_TOKENS_AT] = TimestampTzGetDatum(at);
		DurableRun(&bucket_set, bucket_args, NULL, SPI_OK_UPDATE, 0);
		return true;
	}
	set_args[QTOKENS_QUEUE] = queue_args[QUEUE_QUEUE];
	set_args[QTOKENS_TOKENS] = Float8GetDatum(tokens);
	set_args[QTOKENS_AT] = TimestampTzGetDatum(at);
	DurableRun(&queue_tokens_set, set_args, NULL, SPI_OK_UPDATE, 0);
	return true;
}

/*
 * DurableTakeRetryToken
 *		Take a token from the task's queue and return when it is (or will
 *		be) there: now, or the time the bucket refills to it.
 */
TimestampTz
DurableTakeRetryToken(const DurableTask *task, TimestampTz now)
{
	TimestampTz available;

	if (!task->retry_limited ||
		!take_tokens(task->queue, DURABLE_TASK_PARTITION(task->task_id), now, 1,
					 &task->task_id, &available, false))
		return now;
	return available;
}

/* a token owed by a retry scheduled within a tick */
typedef struct OwedToken
{
	int64		task_id;
	char	   *queue;
	TimestampTz run_at;			/* when the retry starts without a deferral */
	SubTransactionId subxid;	/* the subtransaction that scheduled it */
} OwedToken;

/*
 * The retries of the tick under way, valid only in the transaction that
 * began it and while the subtransaction that began it lives.  Each part of
 * a tick runs in a subtransaction of its own (part.c): the retries a part
 * scheduled go when it is rolled back, as its moves of their tasks do, and
 * a tick that failed in between, even with its error caught, leaves
 * nothing owing behind.
 */
static List *owed_tokens = NIL;
static LocalTransactionId owed_lxid = InvalidLocalTransactionId;
static SubTransactionId owed_subxid = InvalidSubTransactionId;

static bool
owing_tokens(void)
{
	return owed_lxid != InvalidLocalTransactionId &&
		owed_lxid == DURABLE_MY_LXID &&
		owed_subxid != InvalidSubTransactionId;
}

/* what a subtransaction's end does to the tokens owed */
static void
owed_tokens_subxact(SubXactEvent event, SubTransactionId subxid,
					SubTransactionId parent, void *arg)
{
	ListCell   *lc;

	if (!owing_tokens())
		return;
	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, owed_tokens)
		{
			OwedToken  *t = (OwedToken *) lfirst(lc);

			if (t->subxid == subxid)
				t->subxid = parent;
		}
		if (owed_subxid == subxid)
			owed_subxid = parent;
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		foreach(lc, owed_tokens)
		{
			OwedToken  *t = (OwedToken *) lfirst(lc);

			if (t->subxid == subxid)
				owed_tokens = foreach_delete_current(owed_tokens, lc);
		}
		if (owed_subxid == subxid)
			owed_subxid = InvalidSubTransactionId;
	}
}

/*
 * DurableBeginRetryTokens
 *		From now to DurableTakeOwedTokens, in this (sub)transaction and the
 *		subtransactions it begins, retries owe their tokens instead of
 *		taking them.
 */
void
DurableBeginRetryTokens(void)
{
	static bool registered = false;

	if (!registered)
	{
		RegisterSubXactCallback(owed_tokens_subxact, NULL);
		registered = true;
	}
	owed_tokens = NIL;
	owed_lxid = DURABLE_MY_LXID;
	owed_subxid = GetCurrentSubTransactionId();
}

/* the retries of one queue that owe their tokens */
typedef struct QueueTokens
{
	const char *queue;
	OwedToken **owed;
	int64	   *task_ids;
	int			n;
	TimestampTz now;
} QueueTokens;

/*
 * take_queue_tokens
 *		Take the tokens the retries of one queue owe, in the order they were
 *		scheduled, and defer each retry whose token comes after its own
 *		delay: its run_at moves on, and an event ("retry_deferred") records
 *		until when and why.  The tasks are still locked by this
 *		transaction, which moved them.
 */
static uint64
take_queue_tokens(void *arg)
{
	QueueTokens *q = (QueueTokens *) arg;
	TimestampTz *times = palloc(sizeof(TimestampTz) * q->n);
	uint64		deferred = 0;

	bool	   *taken = palloc0(sizeof(bool) * q->n);
	int64	   *ids = palloc(sizeof(int64) * q->n);
	int		   *positions = palloc(sizeof(int) * q->n);
	TimestampTz *partition_times = palloc(sizeof(TimestampTz) * q->n);

	/* partition by partition, each in the order its retries were scheduled */
	for (int first = 0; first < q->n; first++)
	{
		int32		partition = DURABLE_TASK_PARTITION(q->task_ids[first]);
		int			m = 0;

		if (taken[first])
			continue;
		for (int i = first; i < q->n; i++)
			if (!taken[i] && DURABLE_TASK_PARTITION(q->task_ids[i]) == partition)
			{
				taken[i] = true;
				positions[m] = i;
				ids[m++] = q->task_ids[i];
			}
		if (!take_tokens(q->queue, partition, q->now, m, ids, partition_times,
						 true))
			return 0;
		for (int k = 0; k < m; k++)
			times[positions[k]] = partition_times[k];
	}
	for (int i = 0; i < q->n; i++)
	{
		DurableTask task = {0};
		DurableDetail detail;
		Datum		args[DEFER_NPARAMS];

		if (times[i] <= q->owed[i]->run_at)
			continue;
		task.task_id = q->owed[i]->task_id;
		args[DEFER_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task.task_id));
		args[DEFER_TASK_ID] = Int64GetDatum(task.task_id);
		args[DEFER_RUN_AT] = TimestampTzGetDatum(times[i]);
		if (DurableRun(&task_defer, args, NULL, SPI_OK_UPDATE, 0).rows != 1)
			continue;			/* no longer waiting: nothing to defer */
		DurableDetailInit(&detail);
		DurableDetailTime(&detail, "deferred_until", times[i]);
		DurableDetailText(&detail, "deferral_reason",
						  "the queue's retry-token bucket is empty");
		DurableDetailTime(&detail, "run_at", times[i]);
		(void) DurableAppendEvent(&task, q->now, "retry_deferred", NULL,
								  DurableDetailFinish(&detail), NULL, 0);
		deferred++;
	}
	pfree(times);
	return deferred;
}

/*
 * DurableTakeOwedTokens
 *		Take the tokens the retries since DurableBeginRetryTokens owe, each
 *		queue a part of the tick of its own (part.c): a queue whose bucket
 *		cannot be brought up to date (a deficit past the timestamp range),
 *		or whose bucket another transaction holds (a durable_fail not yet
 *		committed: never waited for), is skipped and shown, and its
 *		retries start at their own delays.  Like any failing part it runs
 *		again at the next tick whose retries owe it tokens.
 */
void
DurableTakeOwedTokens(TimestampTz now)
{
	List	   *owed;
	ListCell   *lc;

	if (!owing_tokens())
		return;
	owed = owed_tokens;
	owed_tokens = NIL;
	owed_lxid = InvalidLocalTransactionId;
	owed_subxid = InvalidSubTransactionId;

	foreach(lc, owed)
	{
		OwedToken  *first = (OwedToken *) lfirst(lc);
		QueueTokens q;
		ListCell   *lc2;
		char	   *part;

		if (first->queue == NULL)
			continue;			/* taken with an earlier queue */
		q.queue = first->queue;
		q.owed = palloc(sizeof(OwedToken *) * list_length(owed));
		q.task_ids = palloc(sizeof(int64) * list_length(owed));
		q.n = 0;
		q.now = now;
		for_each_cell(lc2, owed, lc)
		{
			OwedToken  *t = (OwedToken *) lfirst(lc2);

			if (t->queue != NULL && strcmp(t->queue, first->queue) == 0)
			{
				q.task_ids[q.n] = t->task_id;
				q.owed[q.n++] = t;
			}
		}
		part = psprintf("retry tokens: %s", q.queue);
		(void) DurableRunPart(part, take_queue_tokens, &q, NULL);
		for (int i = 0; i < q.n; i++)
			q.owed[i]->queue = NULL;
		pfree(part);
		pfree(q.owed);
		pfree(q.task_ids);
	}
	list_free_deep(owed);
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
	DurableCount(task->queue, DURABLE_COUNT_RETRIED, 1);

	if (task->retry_limited && owing_tokens())
	{
		MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
		OwedToken  *owed = palloc(sizeof(OwedToken));

		/* the token is taken at the end of the tick, and any deferral then */
		owed->task_id = task->task_id;
		owed->queue = pstrdup(task->queue);
		owed->run_at = run_at;
		owed->subxid = GetCurrentSubTransactionId();
		owed_tokens = lappend(owed_tokens, owed);
		MemoryContextSwitchTo(old);
		DurableDetailText(detail, "retry_token", "owed until the end of the tick");
		DurableDetailTime(detail, "run_at", run_at);
		return run_at;
	}
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

/*
 * DurableNextActionMove
 *		Where the retry budget's decision after a failed attempt sends the
 *		task: schedule_retry WAITING until the retry, wait microseconds from
 *		now at the earliest (taking a token, recorded in detail);
 *		manual_review NEEDS_REVIEW; the failures FAILED with the action as
 *		stop code.  Fills in to_state, run_at, stop_code and kind of move.
 */
void
DurableNextActionMove(const DurableTask *task, DurableNextAction action,
					  TimestampTz now, int64 wait, DurableDetail *detail,
					  DurableMove *move)
{
	DurableCount(task->queue, DURABLE_COUNT_FAILED, 1);
	switch (action)
	{
		case DURABLE_NEXT_SCHEDULE_RETRY:
			move->to_state = DURABLE_TASK_WAITING;
			move->kind = "retry_scheduled";
			move->run_at = DurableScheduleRetry(task, now, wait, detail);
			break;
		case DURABLE_NEXT_MANUAL_REVIEW:
			move->to_state = DURABLE_TASK_NEEDS_REVIEW;
			move->kind = "needs_review";
			break;
		case DURABLE_NEXT_FAIL_PERMANENT:
		case DURABLE_NEXT_ATTEMPTS_EXHAUSTED:
		case DURABLE_NEXT_DEADLINE_EXCEEDED:
			move->to_state = DURABLE_TASK_FAILED;
			move->stop_code = DurableNextActionName(action);
			move->kind = "failed";
			break;
	}
}
