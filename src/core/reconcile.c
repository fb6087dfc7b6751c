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
 *
 * Stuck alarms are raised here too, partition by partition.  The tick that
 * runs both, with retention and the schedules, is tick.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "commands/async.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* columns of STMT_EXPIRED */
enum
{
	EXPIRED_TASK_ID = 1,
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
	EXPIRED_RUN_AT
};

#define DURABLE_RECONCILER_ACTOR "durable reconciler"

/* copy an expired lease out of the SPI result, which the next statement replaces */
static void
read_expired(uint64 row, DurableTask *task, int32 partition)
{
	bool		isnull;

	task->partition = partition;
	task->task_id = DurableResultInt64(row, EXPIRED_TASK_ID);
	task->state = "running";
	task->fence = DurableResultInt64(row, EXPIRED_FENCE);
	task->attempt = (int32) DurableResultInt64(row, EXPIRED_ATTEMPT);
	task->max_attempts = (int32) DurableResultInt64(row, EXPIRED_MAX_ATTEMPTS);
	task->created_at = 0;
	task->deadline = DURABLE_NO_DEADLINE;
	task->class = DurableResultText(row, EXPIRED_CLASS);
	task->owner = DurableResultText(row, EXPIRED_OWNER);
	task->lease_until = DatumGetTimestampTz(DurableResultDatum(row, EXPIRED_LEASE_UNTIL, &isnull));
	task->retry_base = (int32) DurableResultInt64(row, EXPIRED_RETRY_BASE);
	task->retry_cap = (int32) DurableResultInt64(row, EXPIRED_RETRY_CAP);
	task->queue = DurableResultText(row, EXPIRED_QUEUE);
	task->retry_limited = DatumGetBool(DurableResultDatum(row, EXPIRED_RETRY_LIMITED, &isnull));
	task->steps_in_doubt = (int32) DurableResultInt64(row, EXPIRED_STEPS_IN_DOUBT);
	task->run_at = DatumGetTimestampTz(DurableResultDatum(row, EXPIRED_RUN_AT, &isnull));
	task->version = 0;			/* not needed: events number themselves */
	task->checkpoint_version = 0;
	task->restricted = false;	/* the reconciler acts for every role */
}

/*
 * settle_expired
 *		Decide and apply the recovery of one expired lease, whose row the
 *		caller holds locked: every step in doubt is judged and settled, and
 *		the task takes the most cautious action of them (recovery.c); with
 *		no step in doubt, the task's own class and attempts decide.  Returns
 *		the action taken.
 */
static DurableRecoveryAction
settle_expired(DurableTask *task, TimestampTz now)
{
	DurableVerdict verdict;
	bool		has_step = false;
	const char *class_name = task->class;
	const char *receipt = NULL;
	int32		attempt = task->attempt;
	DurableMove move = {0};
	DurableDetail detail;

	DurableDetailInit(&detail);
	if (task->steps_in_doubt > 0)
		has_step = DurableJudgeSteps(task, NULL, true, DURABLE_RECONCILER_ACTOR,
									 now, &detail, &verdict);
	if (has_step)
	{
		const DurableStep *step = &verdict.deciding;

		class_name = step->class;
		receipt = step->receipt;
		attempt = step->attempt;
		DurableDetailText(&detail, "step", step->name);
		DurableDetailText(&detail, "step_state", step->state);
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

	move.from_state = "running";
	move.fence = task->fence;
	move.revoke = true;
	move.allow_doubt = true;
	move.kind = "lease_expired";
	move.actor = DURABLE_RECONCILER_ACTOR;
	DurableVerdictMove(task, &verdict, now, &detail, &move);
	move.detail = DurableDetailFinish(&detail);

	DurableMoveLockedTask(task, &move, now);
	return verdict.action;
}

/*
 * DurableReconcilePartition
 *		Settle up to batch expired leases of one partition.  Returns how
 *		many were settled; callback, when given, hears of each.
 */
uint64
DurableReconcilePartition(int32 partition, TimestampTz now, int batch,
						  DurableSettledCallback callback, void *arg)
{
	Datum		args[3];
	uint64		n;
	DurableTask *tasks;

	args[0] = Int32GetDatum(partition);
	args[1] = TimestampTzGetDatum(now);
	args[2] = Int32GetDatum(batch);
	n = DurableExecuteStmt(STMT_EXPIRED, args, NULL, SPI_OK_SELECT, 0);
	if (n == 0)
		return 0;

	tasks = palloc(sizeof(DurableTask) * n);
	for (uint64 i = 0; i < n; i++)
		read_expired(i, &tasks[i], partition);

	for (uint64 i = 0; i < n; i++)
	{
		DurableRecoveryAction action = settle_expired(&tasks[i], now);

		if (callback)
			callback(tasks[i].task_id, DurableRecoveryActionName(action), arg);
	}
	pfree(tasks);
	return n;
}

/*
 * DurableRaiseStuckAlarms
 *		A lease that keeps being renewed while its progress does not move
 *		for longer than the queue's progress_timeout gets one alarm per
 *		episode: an event, NOTIFY durable_stuck '<task_id>', and the mark
 *		that the stuck_tasks view counts.  Nothing else changes: a heartbeat
 *		is not progress, but neither is it a failure.
 */
uint64
DurableRaiseStuckAlarms(int32 partition, TimestampTz now, int batch,
						DurableSettledCallback callback, void *arg)
{
	Datum		args[3];
	uint64		n;
	int64	   *ids;
	Jsonb	  **details;

	args[0] = Int32GetDatum(partition);
	args[1] = TimestampTzGetDatum(now);
	args[2] = Int32GetDatum(batch);
	n = DurableExecuteStmt(STMT_STUCK, args, NULL, SPI_OK_SELECT, 0);
	if (n == 0)
		return 0;

	ids = palloc(sizeof(int64) * n);
	details = palloc(sizeof(Jsonb *) * n);
	for (uint64 i = 0; i < n; i++)
	{
		DurableDetail detail;
		bool		isnull;

		ids[i] = DurableResultInt64(i, 1);
		DurableDetailInit(&detail);
		DurableDetailText(&detail, "progress", DurableResultText(i, 2));
		DurableDetailTime(&detail, "progress_at",
						  DatumGetTimestampTz(DurableResultDatum(i, 3, &isnull)));
		DurableDetailText(&detail, "owner", DurableResultText(i, 4));
		DurableDetailText(&detail, "progress_timeout", DurableResultText(i, 5));
		details[i] = DurableDetailFinish(&detail);
	}

	for (uint64 i = 0; i < n; i++)
	{
		DurableTask task = {0};
		Datum		mark[3];
		char		payload[32];

		task.task_id = ids[i];
		mark[0] = Int32GetDatum(partition);
		mark[1] = Int64GetDatum(ids[i]);
		mark[2] = TimestampTzGetDatum(now);
		DurableExecuteStmt(STMT_STUCK_MARK, mark, NULL, SPI_OK_UPDATE, 0);
		DurableAppendEvent(&task, now, "stuck", DURABLE_RECONCILER_ACTOR,
						   details[i], NULL, 0);
		snprintf(payload, sizeof(payload), INT64_FORMAT, ids[i]);
		Async_Notify(DURABLE_STUCK_CHANNEL, payload);
		if (callback)
			callback(ids[i], "stuck_alarm", arg);
	}
	return n;
}
