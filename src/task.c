/*-------------------------------------------------------------------------
 *
 * task.c
 *	  Reading one task, moving it between states under a fence, and the
 *	  errors a fenced write raises.
 *
 * Fencing: a write names the fence it was given by its claim.  Every move
 * re-checks fence and state in the UPDATE's own WHERE clause, so a write
 * that waited for the row lock of a reconciler or of another worker sees
 * the row as that transaction left it, and finds nothing to update when it
 * lost.  Only then is the row read again to say why, in the caller's
 * transaction, so the caller's own writes roll back with the error.
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "utils/builtins.h"
#include "utils/timestamp.h"

/* columns of STMT_TASK_GET and STMT_TASK_LOCK */
enum
{
	TASK_STATE = 1,
	TASK_FENCE,
	TASK_ATTEMPT,
	TASK_MAX_ATTEMPTS,
	TASK_CREATED_AT,
	TASK_DEADLINE,
	TASK_CLASS,
	TASK_QUEUE,
	TASK_OWNER,
	TASK_LEASE_UNTIL,
	TASK_RETRY_BASE,
	TASK_RETRY_CAP,
	TASK_RETRY_CAPACITY
};

static int32
int32_or(uint64 row, int col, int32 fallback)
{
	bool		isnull;
	Datum		d = DurableResultDatum(row, col, &isnull);

	return isnull ? fallback : DatumGetInt32(d);
}

/*
 * DurableTaskFetch
 *		Read a task and its queue's retry policy; with lock, also take the
 *		row lock that a fenced write would take.  Strings point into SPI
 *		memory.  Returns false when there is no such task.
 */
bool
DurableTaskFetch(int64 task_id, bool lock, DurableTask *task)
{
	Datum		args[2];
	bool		isnull;
	Datum		d;

	task->partition = DURABLE_TASK_PARTITION(task_id);
	task->task_id = task_id;
	args[0] = Int32GetDatum(task->partition);
	args[1] = Int64GetDatum(task_id);
	if (DurableExecute(lock ? STMT_TASK_LOCK : STMT_TASK_GET, args, NULL,
					   SPI_OK_SELECT, 1) == 0)
		return false;

	task->state = DurableResultText(0, TASK_STATE);
	task->fence = DurableResultInt64(0, TASK_FENCE);
	task->attempt = (int32) DurableResultInt64(0, TASK_ATTEMPT);
	task->max_attempts = (int32) DurableResultInt64(0, TASK_MAX_ATTEMPTS);
	task->created_at = DatumGetTimestampTz(DurableResultDatum(0, TASK_CREATED_AT, &isnull));
	d = DurableResultDatum(0, TASK_DEADLINE, &isnull);
	task->deadline = isnull ? DURABLE_NO_DEADLINE :
		DurableIntervalMicroseconds(DatumGetIntervalP(d), "deadline");
	task->class = DurableResultText(0, TASK_CLASS);
	task->queue = DurableResultText(0, TASK_QUEUE);
	task->owner = DurableResultText(0, TASK_OWNER);
	d = DurableResultDatum(0, TASK_LEASE_UNTIL, &isnull);
	task->lease_until = isnull ? 0 : DatumGetTimestampTz(d);
	task->retry_base = int32_or(0, TASK_RETRY_BASE, 2);
	task->retry_cap = int32_or(0, TASK_RETRY_CAP, 60);
	(void) DurableResultDatum(0, TASK_RETRY_CAPACITY, &isnull);
	task->retry_limited = !isnull;
	return true;
}

void
DurableTaskFetchOrError(int64 task_id, bool lock, DurableTask *task)
{
	if (!DurableTaskFetch(task_id, lock, task))
		ereport(ERROR,
				errcode(ERRCODE_UNDEFINED_OBJECT),
				errmsg("task %lld does not exist", (long long) task_id));
}

bool
DurableTaskIsTerminal(const char *state)
{
	return strcmp(state, "completed") == 0 ||
		strcmp(state, "failed") == 0 ||
		strcmp(state, "cancelled") == 0;
}

/*
 * DurableReportStale
 *		A fenced write found nothing to update: say why.  Raises 42704 for
 *		an unknown task and 55U01 for a fence that is not current or a task
 *		that is no longer running under it.
 */
void
DurableReportStale(int64 task_id, int64 fence)
{
	DurableTask task;

	DurableTaskFetchOrError(task_id, false, &task);
	if (task.fence != fence)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_STALE_FENCING_TOKEN),
				errmsg("fencing token %lld is stale for task %lld",
					   (long long) fence, (long long) task_id),
				errdetail("The current fencing token is %lld and the task is in state %s.",
						  (long long) task.fence, task.state),
				errhint("The caller no longer holds this task and must stop acting on it."));
	ereport(ERROR,
			errcode(ERRCODE_DURABLE_STALE_FENCING_TOKEN),
			errmsg("task %lld is no longer running under fencing token %lld",
				   (long long) task_id, (long long) fence),
			errdetail("The task is in state %s.", task.state),
			errhint("The caller no longer holds this task and must stop acting on it."));
}

/*
 * DurableMoveTask
 *		Move a task from move->from_state under move->fence to
 *		move->to_state, releasing its lease, and append the event, in one
 *		statement.  Returns false when the task is no longer in that state
 *		under that fence.
 */
bool
DurableMoveTask(const DurableTask *task, const DurableMove *move,
				TimestampTz now)
{
	Datum		args[14];
	char		nulls[14];

	memset(nulls, ' ', sizeof(nulls));
	args[0] = Int32GetDatum(DURABLE_TASK_PARTITION(task->task_id));
	args[1] = Int64GetDatum(task->task_id);
	args[2] = Int64GetDatum(move->fence);
	args[3] = CStringGetTextDatum(move->from_state);
	args[4] = CStringGetTextDatum(move->to_state);
	args[5] = Int64GetDatum(move->revoke ? 1 : 0);
	args[6] = TimestampTzGetDatum(move->run_at);
	nulls[6] = move->run_at == 0 ? 'n' : ' ';
	args[7] = move->stop_code ? CStringGetTextDatum(move->stop_code) : (Datum) 0;
	nulls[7] = move->stop_code ? ' ' : 'n';
	args[8] = JsonbPGetDatum(move->error);
	nulls[8] = move->error ? ' ' : 'n';
	args[9] = JsonbPGetDatum(move->result);
	nulls[9] = move->result ? ' ' : 'n';
	args[10] = TimestampTzGetDatum(now);
	args[11] = CStringGetTextDatum(move->kind);
	args[12] = move->actor ? CStringGetTextDatum(move->actor) : (Datum) 0;
	nulls[12] = move->actor ? ' ' : 'n';
	args[13] = JsonbPGetDatum(move->detail);
	nulls[13] = move->detail ? ' ' : 'n';

	return DurableExecute(STMT_TRANSITION, args, nulls,
						  SPI_OK_INSERT_RETURNING, 0) == 1;
}

/*
 * DurableMoveTaskFenced
 *		DurableMoveTask for a caller that holds the fence: anything but
 *		success raises the error that explains it.
 */
void
DurableMoveTaskFenced(int64 task_id, const DurableMove *move, TimestampTz now)
{
	DurableTask task;

	task.task_id = task_id;
	if (!DurableMoveTask(&task, move, now))
		DurableReportStale(task_id, move->fence);
}
