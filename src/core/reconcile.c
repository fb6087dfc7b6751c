/*-------------------------------------------------------------------------
 *
 * reconcile.c
 *	  Settling expired leases through the recovery table.
 *
 * One routine serves durable_reconcile(), the claims that find expired
 * leases in their partition, and the background worker.  It works
 * partition by partition, taking a bounded batch of expired leases with
 * FOR NO KEY UPDATE SKIP LOCKED: two reconcilers, or a reconciler and a
 * late commit, never both win, since the commit's fenced UPDATE re-checks
 * the fence after waiting for the reconciler's row lock, and a reconciler
 * skips a row that a commit holds.
 *
 * Every decision revokes the lease (increments the fence) and appends an
 * event with the action and its evidence.  Nothing is deleted to recover.
 * An operator can end one lease before its time (durable_expire_lease);
 * it is settled here by the same rules.
 *
 * Stuck alarms are raised here too, partition by partition.  The tick that
 * runs both, with retention and the schedules, is tick.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "core/sql.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

enum
{
	EXPIRED_TASK_ID,
	EXPIRED_FENCE,
	EXPIRED_ATTEMPT,
	EXPIRED_MAX_ATTEMPTS,
	EXPIRED_CLASS,
	EXPIRED_OWNER,
	EXPIRED_LEASE_UNTIL,
	EXPIRED_RETRY_BASE,
	EXPIRED_RETRY_CAP,
	EXPIRED_QUEUE,
	EXPIRED_RETRY_LIMITED,
	EXPIRED_STEPS_IN_DOUBT,
	EXPIRED_RUN_AT,
	EXPIRED_SPENDS,
	EXPIRED_NCOLUMNS
};
static const DurableColumn expired_columns[EXPIRED_NCOLUMNS] = {
	[EXPIRED_TASK_ID] = {"task_id", INT8OID},
	[EXPIRED_FENCE] = {"fence", INT8OID},
	[EXPIRED_ATTEMPT] = {"attempt", INT4OID},
	[EXPIRED_MAX_ATTEMPTS] = {"max_attempts", INT4OID},
	[EXPIRED_CLASS] = {"class", TEXTOID},
	[EXPIRED_OWNER] = {"owner", TEXTOID},
	[EXPIRED_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID},
	[EXPIRED_RETRY_BASE] = {"retry_base", INT4OID},
	[EXPIRED_RETRY_CAP] = {"retry_cap", INT4OID},
	[EXPIRED_QUEUE] = {"queue_name", TEXTOID},
	[EXPIRED_RETRY_LIMITED] = {"retry_limited", BOOLOID},
	[EXPIRED_STEPS_IN_DOUBT] = {"steps_in_doubt", INT4OID},
	[EXPIRED_RUN_AT] = {"run_at", TIMESTAMPTZOID},
	[EXPIRED_SPENDS] = {"spends", BOOLOID},
};
/* the statements that look for leases to settle in one partition */
enum
{
	FIND_PARTITION,
	FIND_NOW,
	FIND_BATCH,
	FIND_QUEUE,
	FIND_NPARAMS
};
static const DurableParam find_params[FIND_NPARAMS] = {
	[FIND_PARTITION] = {"partition", INT4OID},
	[FIND_NOW] = {"now", TIMESTAMPTZOID},
	[FIND_BATCH] = {"batch", INT4OID},
	[FIND_QUEUE] = {"queue", TEXTOID},
};
static DurableStatement expired = {
	.name = "expired",
	.sql = "SELECT t.task_id, t.fence, t.attempt, t.max_attempts, t.class::text,"
	" t.owner, t.lease_until, q.retry_base, q.retry_cap, t.queue_name,"
	" q.retry_capacity IS NOT NULL AS retry_limited, t.steps_in_doubt,"
	" t.run_at, t.budgets IS NOT NULL AS spends"
	" FROM durable.live_tasks t"
	" JOIN durable.queues q ON q.queue_name = t.queue_name"
	" WHERE t.partition_key = $partition"
	" AND t.state = 'running'"
	" AND t.lease_until < $now"
	" AND ($queue::text IS NULL OR t.queue_name = $queue)"
	" ORDER BY t.lease_until LIMIT $batch"
	" FOR NO KEY UPDATE OF t SKIP LOCKED",
	DURABLE_PARAMS(find_params),
	DURABLE_COLUMNS(expired_columns),
};

/* the values of expired and stuck */
static void
find_args(Datum *args, char *nulls, int32 partition, const char *queue,
		  TimestampTz now, int batch)
{
	memset(nulls, ' ', FIND_NPARAMS);
	args[FIND_PARTITION] = Int32GetDatum(partition);
	args[FIND_NOW] = TimestampTzGetDatum(now);
	args[FIND_BATCH] = Int32GetDatum(batch);
	args[FIND_QUEUE] = queue ? CStringGetTextDatum(queue) : (Datum) 0;
	nulls[FIND_QUEUE] = queue ? ' ' : 'n';
}

/* an expired lease, row of a result of expired */
static void
read_expired(DurableResult res, uint64 row, DurableTask *task, int32 partition)
{
	bool		isnull;

	task->partition = partition;
	task->task_id = DurableGetInt64(res, row, EXPIRED_TASK_ID);
	task->state = DURABLE_TASK_RUNNING;
	task->fence = DurableGetInt64(res, row, EXPIRED_FENCE);
	task->attempt = DurableGetInt32(res, row, EXPIRED_ATTEMPT);
	task->max_attempts = DurableGetInt32(res, row, EXPIRED_MAX_ATTEMPTS);
	task->created_at = 0;
	task->deadline = DURABLE_NO_DEADLINE;
	task->class = DurableGetText(res, row, EXPIRED_CLASS);
	task->owner = DurableGetText(res, row, EXPIRED_OWNER);
	task->lease_until = DatumGetTimestampTz(DurableGetDatum(res, row, EXPIRED_LEASE_UNTIL, &isnull));
	task->retry_base = DurableGetInt32(res, row, EXPIRED_RETRY_BASE);
	task->retry_cap = DurableGetInt32(res, row, EXPIRED_RETRY_CAP);
	task->queue = DurableGetText(res, row, EXPIRED_QUEUE);
	task->retry_limited = DurableGetBool(res, row, EXPIRED_RETRY_LIMITED);
	task->steps_in_doubt = DurableGetInt32(res, row, EXPIRED_STEPS_IN_DOUBT);
	task->run_at = DatumGetTimestampTz(DurableGetDatum(res, row, EXPIRED_RUN_AT, &isnull));
	task->version = 0;			/* not needed: events number themselves */
	task->checkpoint_version = 0;
	task->restricted = false;	/* the reconciler acts for every role */
	task->spends = DurableGetBool(res, row, EXPIRED_SPENDS);
}

/*
 * give_back_unbegun
 *		The expiry of a lease whose task never began (begin.c): the task is
 *		ready again at once, its attempt given back and its lease revoked,
 *		with an event that says so.  Returns the pseudo-action reported for
 *		it, DURABLE_NOT_BEGUN.
 */
static const char *
give_back_unbegun(DurableTask *task, TimestampTz now, const char *actor,
				  const char *reason, int32 returned)
{
	DurableMove move = {0};
	DurableDetail detail;

	DurableDetailInit(&detail);
	DurableDetailText(&detail, "action", DURABLE_NOT_BEGUN);
	DurableDetailText(&detail, "owner", task->owner);
	DurableDetailTime(&detail, "lease_until", task->lease_until);
	DurableDetailInt(&detail, "attempt_given_back", task->attempt);
	DurableDetailInt(&detail, "unbegun_expiries", returned);
	if (reason != NULL)
	{
		DurableDetailText(&detail, "reason", reason);
		DurableDetailText(&detail, "expired_by", actor);
	}
	move.from_state = DURABLE_TASK_RUNNING;
	move.fence = task->fence;
	move.to_state = DURABLE_TASK_READY;
	move.run_at = now;
	move.revoke = true;
	move.give_back_attempt = true;
	move.kind = "lease_expired";
	move.actor = actor;
	move.detail = DurableDetailFinish(&detail);
	DurableMoveLockedTask(task, &move, now);
	DurableCount(task->queue, DURABLE_COUNT_LEASES_EXPIRED, 1);
	return DURABLE_NOT_BEGUN;
}

/*
 * settle_expired
 *		Decide and apply the recovery of one expired lease, whose row the
 *		caller holds locked.  A task that never began under it goes back
 *		for nothing (begin.c).  Otherwise every step in doubt is judged and
 *		settled, and the task takes the most cautious action of them
 *		(recovery.c); with no step in doubt, the task's own class and
 *		attempts decide.  actor is the reconciler, or the operator who
 *		ended the lease, for reason.  Returns the name of the action taken.
 */
static const char *
settle_expired(DurableTask *task, TimestampTz now, const char *actor,
			   const char *reason)
{
	DurableVerdict verdict;
	bool		has_step = false;
	const char *class_name = task->class;
	const char *receipt = NULL;
	int32		attempt = task->attempt;
	DurableMove move = {0};
	DurableDetail detail;
	int32		left_in_doubt = task->steps_in_doubt;
	int32		returned;

	if (task->steps_in_doubt == 0 &&
		DurableCountUnbegunExpiry(task, &returned))
		return give_back_unbegun(task, now, actor, reason, returned);
	DurableDetailInit(&detail);
	if (task->steps_in_doubt > 0)
		has_step = DurableJudgeSteps(task, NULL, true, actor, now, &detail,
									 &verdict);
	if (has_step)
	{
		const DurableStep *step = &verdict.deciding;

		class_name = step->class;
		receipt = step->receipt;
		attempt = step->attempt;
		DurableDetailText(&detail, "step", step->name);
		DurableDetailText(&detail, "step_state", DurableStepStateName(step->state));
		DurableDetailText(&detail, "idempotency_key", step->idempotency_key);
	}
	else
	{
		DurableJudgeTask(task, &verdict);
		DurableDetailText(&detail, "step", NULL);
	}
	DurableDetailText(&detail, "action", DurableRecoveryActionName(verdict.action));
	DurableDetailText(&detail, "owner", task->owner);
	DurableDetailTime(&detail, "lease_until", task->lease_until);
	DurableDetailText(&detail, "class", class_name);
	DurableDetailText(&detail, "receipt", receipt);
	DurableDetailInt(&detail, "attempt", attempt);
	DurableDetailInt(&detail, "max_attempts", task->max_attempts);
	if (reason != NULL)
	{
		DurableDetailText(&detail, "reason", reason);
		DurableDetailText(&detail, "expired_by", actor);
	}

	move.from_state = DURABLE_TASK_RUNNING;
	move.fence = task->fence;
	move.revoke = true;
	move.allow_doubt = true;
	move.kind = "lease_expired";
	move.actor = actor;
	DurableVerdictMove(task, &verdict, now, &detail, &move);
	move.detail = DurableDetailFinish(&detail);

	DurableMoveLockedTask(task, &move, now);
	DurableCount(task->queue, DURABLE_COUNT_LEASES_EXPIRED, 1);
	if (left_in_doubt > 0)
		DurableCount(task->queue, DURABLE_COUNT_STEPS_LEFT_IN_DOUBT,
					 left_in_doubt);
	return DurableRecoveryActionName(verdict.action);
}

/*
 * DurableReconcilePartition
 *		Settle up to batch expired leases of one partition, of queue only
 *		when it is not NULL.  Returns how many were settled; callback, when
 *		given, hears of each.
 */
uint64
DurableReconcilePartition(int32 partition, const char *queue, TimestampTz now,
						  int batch, DurableSettledCallback callback, void *arg)
{
	Datum		args[FIND_NPARAMS];
	char		nulls[FIND_NPARAMS];
	DurableResult res;
	uint64		n;
	DurableTask *tasks;

	find_args(args, nulls, partition, queue, now, batch);
	res = DurableRun(&expired, args, nulls, SPI_OK_SELECT, 0);
	n = res.rows;
	if (n == 0)
		return 0;

	/* every row first: settling one runs statements of its own */
	tasks = palloc(sizeof(DurableTask) * n);
	for (uint64 i = 0; i < n; i++)
		read_expired(res, i, &tasks[i], partition);

	for (uint64 i = 0; i < n; i++)
	{
		const char *action = settle_expired(&tasks[i], now,
											DURABLE_RECONCILER_ACTOR, NULL);

		if (callback)
			callback(tasks[i].task_id, action, arg);
	}
	pfree(tasks);
	return n;
}

/*
 * DurableExpireLease
 *		End a running task's lease now, for an operator who gives a reason
 *		(a hung worker, a test of a worker's recovery), and settle it as the
 *		reconciler settles an expired one: the lease is revoked, so the old
 *		holder's next write is refused, and the steps it left in doubt are
 *		judged as they would be an interval later.  Returns the action
 *		taken.  42704 for no such task, 55U04 for one that is not running.
 */
const char *
DurableExpireLease(int64 task_id, const char *reason, const char *actor)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;

	DurableTaskFetchOrError(task_id, true, &task);
	DurableTaskRequireRunning(&task);
	return settle_expired(&task, now, actor, reason);
}

enum
{
	STUCK_TASK_ID,
	STUCK_PROGRESS,
	STUCK_PROGRESS_AT,
	STUCK_OWNER,
	STUCK_PROGRESS_TIMEOUT,
	STUCK_NCOLUMNS
};
static const DurableColumn stuck_columns[STUCK_NCOLUMNS] = {
	[STUCK_TASK_ID] = {"task_id", INT8OID},
	[STUCK_PROGRESS] = {"progress", TEXTOID},
	[STUCK_PROGRESS_AT] = {"progress_at", TIMESTAMPTZOID},
	[STUCK_OWNER] = {"owner", TEXTOID},
	[STUCK_PROGRESS_TIMEOUT] = {"progress_timeout", INTERVALOID},
};
static DurableStatement stuck = {
	.name = "stuck",
	/* the timeout as DurableGetText writes it, whatever IntervalStyle */
	.sql = "SELECT t.task_id, t.progress, t.progress_at, t.owner, q.progress_timeout"
	" FROM durable.live_tasks t"
	" JOIN durable.queues q ON q.queue_name = t.queue_name"
	" WHERE t.partition_key = $partition AND t.state = 'running'"
	" AND q.progress_timeout IS NOT NULL"
	" AND t.progress_at < " UTC_PLUS("$now", "-", "q.progress_timeout")
	" AND (t.stuck_alarm_at IS NULL OR t.stuck_alarm_at < t.progress_at)"
	" AND ($queue::text IS NULL OR t.queue_name = $queue)"
	" ORDER BY t.lease_until LIMIT $batch"
	" FOR NO KEY UPDATE OF t SKIP LOCKED",
	DURABLE_PARAMS(find_params),
	DURABLE_COLUMNS(stuck_columns),
};

enum
{
	MARK_PARTITION,
	MARK_TASK_ID,
	MARK_NOW,
	MARK_NPARAMS
};
static const DurableParam stuck_mark_params[MARK_NPARAMS] = {
	[MARK_PARTITION] = {"partition", INT4OID},
	[MARK_TASK_ID] = {"task_id", INT8OID},
	[MARK_NOW] = {"now", TIMESTAMPTZOID},
};
static DurableStatement stuck_mark = {
	.name = "stuck_mark",
	.sql = "UPDATE durable.live_tasks SET stuck_alarm_at = $now"
	" WHERE partition_key = $partition AND task_id = $task_id",
	DURABLE_PARAMS(stuck_mark_params),
};

/*
 * DurableRaiseStuckAlarms
 *		A lease that keeps being renewed while its progress does not move
 *		for longer than the queue's progress_timeout gets one alarm per
 *		episode: an event, NOTIFY durable_stuck '<task_id>', and the mark
 *		that the stuck_tasks view counts.  Nothing else changes: a heartbeat
 *		is not progress, but neither is it a failure.  Of one partition,
 *		and of queue only when it is not NULL.
 */
uint64
DurableRaiseStuckAlarms(int32 partition, const char *queue, TimestampTz now,
						int batch, DurableSettledCallback callback, void *arg)
{
	DurableResult res;
	Datum		args[FIND_NPARAMS];
	char		nulls[FIND_NPARAMS];
	uint64		n;
	int64	   *ids;
	Jsonb	  **details;

	find_args(args, nulls, partition, queue, now, batch);
	res = DurableRun(&stuck, args, nulls, SPI_OK_SELECT, 0);
	n = res.rows;
	if (n == 0)
		return 0;

	ids = palloc(sizeof(int64) * n);
	details = palloc(sizeof(Jsonb *) * n);
	for (uint64 i = 0; i < n; i++)
	{
		DurableDetail detail;
		bool		isnull;

		ids[i] = DurableGetInt64(res, i, STUCK_TASK_ID);
		DurableDetailInit(&detail);
		DurableDetailText(&detail, "progress", DurableGetText(res, i, STUCK_PROGRESS));
		DurableDetailTime(&detail, "progress_at",
						  DatumGetTimestampTz(DurableGetDatum(res, i, STUCK_PROGRESS_AT, &isnull)));
		DurableDetailText(&detail, "owner", DurableGetText(res, i, STUCK_OWNER));
		DurableDetailText(&detail, "progress_timeout",
						  DurableGetText(res, i, STUCK_PROGRESS_TIMEOUT));
		details[i] = DurableDetailFinish(&detail);
	}

	for (uint64 i = 0; i < n; i++)
	{
		DurableTask task = {0};
		Datum		mark[MARK_NPARAMS];
		char		payload[32];

		task.task_id = ids[i];
		mark[MARK_PARTITION] = Int32GetDatum(partition);
		mark[MARK_TASK_ID] = Int64GetDatum(ids[i]);
		mark[MARK_NOW] = TimestampTzGetDatum(now);
		DurableRun(&stuck_mark, mark, NULL, SPI_OK_UPDATE, 0);
		DurableAppendEvent(&task, now, "stuck", DURABLE_RECONCILER_ACTOR,
						   details[i], NULL, 0);
		snprintf(payload, sizeof(payload), INT64_FORMAT, ids[i]);
		Async_Notify(DURABLE_STUCK_CHANNEL, payload);
		if (callback)
			callback(ids[i], "stuck_alarm", arg);
	}
	return n;
}
