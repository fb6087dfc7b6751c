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
#include "core/core.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "utils/array.h"
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
	TASK_RETRY_CAPACITY,
	TASK_VERSION,
	TASK_RUN_AT,
	TASK_STEPS_IN_DOUBT,
	TASK_CHECKPOINT_VERSION,
	TASK_RESTRICTED
};

static void finished(int64 task_id, const DurableMove *move, TimestampTz now);
static void cancel_child(int64 child_id, int64 parent_id, TimestampTz now);

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
	/*
	 * Only live tasks are locked: a finished one is in history, where
	 * nothing but a replay moves it, and is read there to say its state.
	 */
	if ((!lock || DurableExecuteStmt(STMT_TASK_LOCK, args, NULL, SPI_OK_SELECT, 1) == 0) &&
		DurableExecuteStmt(STMT_TASK_GET, args, NULL, SPI_OK_SELECT, 1) == 0)
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
	task->version = (int32) DurableResultInt64(0, TASK_VERSION);
	task->run_at = DatumGetTimestampTz(DurableResultDatum(0, TASK_RUN_AT, &isnull));
	task->steps_in_doubt = (int32) DurableResultInt64(0, TASK_STEPS_IN_DOUBT);
	task->checkpoint_version = (int32) DurableResultInt64(0, TASK_CHECKPOINT_VERSION);
	d = DurableResultDatum(0, TASK_RESTRICTED, &isnull);
	task->restricted = !isnull && DatumGetBool(d);
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
 * DurableReportRefusal
 *		A fenced write was refused (found nothing to update): say why.
 *		Raises 42704 for an unknown task, 42501 for a role that may not work
 *		on its queue, 55U01 for a fence that is not current or a task that
 *		is no longer running under it, and 55U04 for a task whose steps are
 *		still in doubt.  The current fence is never told: whoever does not
 *		hold it must not learn it from an error.
 */
void
DurableReportRefusal(int64 task_id, int64 fence)
{
	DurableTask task;
	DurableStep step;

	DurableTaskFetchOrError(task_id, false, &task);
	DurableCheckRestrictedQueue(task.queue, task.restricted, DURABLE_PRIV_WORK);
	if (task.fence == fence && strcmp(task.state, "running") == 0 &&
		DurableStepInDoubt(&task, &step))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("task %lld cannot finish while step \"%s\" is %s",
					   (long long) task_id, step.name, step.state),
				errdetail("A step that was started and not committed may have taken effect."),
				errhint("Commit the step, record a receipt for it, or report it with durable_fail(..., step => '%s').",
						step.name));
	if (task.fence != fence)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_STALE_FENCING_TOKEN),
				errmsg("fencing token %lld is stale for task %lld",
					   (long long) fence, (long long) task_id),
				errdetail("The task is in state %s under another fencing token.",
						  task.state),
				errhint("The caller no longer holds this task and must stop acting on it."));
	ereport(ERROR,
			errcode(ERRCODE_DURABLE_STALE_FENCING_TOKEN),
			errmsg("task %lld is no longer running under fencing token %lld",
				   (long long) task_id, (long long) fence),
			errdetail("The task is in state %s.", task.state),
			errhint("The caller no longer holds this task and must stop acting on it."));
}

/*
 * DurableTaskHeld
 *		Read and lock a task that the caller holds under fence; anything
 *		else raises the error that explains it.
 */
void
DurableTaskHeld(int64 task_id, int64 fence, DurableTask *task)
{
	if (!DurableTaskFetch(task_id, true, task) ||
		task->fence != fence || strcmp(task->state, "running") != 0)
		DurableReportRefusal(task_id, fence);
	DurableCheckRestrictedQueue(task->queue, task->restricted, DURABLE_PRIV_WORK);
}

/*
 * DurableAppendEvent
 *		Append an event to a task whose row the caller has locked, without
 *		moving the task: a step's change, a checkpoint, an alarm.  Moves the
 *		count of steps in doubt by doubt_delta.  Returns the event's seq.
 */
int32
DurableAppendEvent(const DurableTask *task, TimestampTz now, const char *kind,
				   const char *actor, Jsonb *detail, const char *step,
				   int32 doubt_delta)
{
	Datum		args[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;

	args[0] = Int32GetDatum(DURABLE_TASK_PARTITION(task->task_id));
	args[1] = Int64GetDatum(task->task_id);
	args[2] = TimestampTzGetDatum(now);
	args[3] = CStringGetTextDatum(kind);
	args[4] = actor ? CStringGetTextDatum(actor) : (Datum) 0;
	nulls[4] = actor ? ' ' : 'n';
	args[5] = JsonbPGetDatum(detail);
	nulls[5] = detail ? ' ' : 'n';
	args[6] = step ? CStringGetTextDatum(step) : (Datum) 0;
	nulls[6] = step ? ' ' : 'n';
	args[7] = Int32GetDatum(doubt_delta);
	args[8] = CStringGetTextDatum(DurableCallerName());
	if (DurableExecuteStmt(STMT_EVENT_APPEND, args, nulls,
					   SPI_OK_INSERT_RETURNING, 0) != 1)
		elog(ERROR, "task %lld vanished under its row lock",
			 (long long) task->task_id);
	return DatumGetInt32(DurableResultDatum(0, 1, &isnull));
}

/*
 * DurableMoveTask
 *		Move a task from move->from_state under move->fence to
 *		move->to_state, releasing its lease, and append the event, in one
 *		statement; a task that finishes moves with its steps from the live
 *		tables to history, and one that is replayed moves back.  Returns
 *		false when the task is no longer in that state under that fence, or
 *		has steps in doubt and move->allow_doubt is not set or the move
 *		would hand the task out again.
 */
bool
DurableMoveTask(const DurableTask *task, const DurableMove *move,
				TimestampTz now, DurableMoved *moved)
{
	Datum		args[18];
	char		nulls[18];
	DurableStmt stmt;

	/*
	 * A task goes back to the claims only with no step in doubt, whatever
	 * the caller allows: the row's own count decides, in the statement.
	 */
	bool		releases = strcmp(move->to_state, "ready") == 0 ||
		(strcmp(move->to_state, "waiting") == 0 &&
		 move->run_at != DURABLE_AWAITING_RECONCILE);

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
	args[14] = Int32GetDatum(move->allow_doubt && !releases ? PG_INT32_MAX : 0);
	args[15] = BoolGetDatum(move->reset_attempts);
	args[16] = CStringGetTextDatum(DurableCallerName());
	args[17] = BoolGetDatum(move->give_back_attempt);

	/* a task that finishes moves to history; a replayed one comes back */
	if (DurableTaskIsTerminal(move->to_state))
	{
		DurableEnsureHistoryDays(now);
		stmt = STMT_FINISH;
	}
	else if (DurableTaskIsTerminal(move->from_state))
		stmt = STMT_REVIVE;
	else
		stmt = STMT_TRANSITION;
	if (DurableExecuteStmt(stmt, args, nulls, SPI_OK_SELECT, 0) != 1)
		return false;
	if (moved != NULL)
	{
		bool		isnull;

		moved->queue = DurableResultText(0, 2);
		moved->owner = DurableResultText(0, 3);
		moved->restricted = DatumGetBool(DurableResultDatum(0, 4, &isnull)) && !isnull;
	}
	if (stmt == STMT_FINISH)
		finished(task->task_id, move, now);
	return true;
}

/*
 * finished
 *		What a task that has just finished (the row of STMT_FINISH) owes its
 *		family: a parent waiting for it may wake, and a cancelled task's
 *		unfinished children are cancelled with it; and the awaits it had
 *		registered go.
 */
static void
finished(int64 task_id, const DurableMove *move, TimestampTz now)
{
	bool		isnull;
	Datum		d;
	int64		parent_id;
	Datum	   *children = NULL;
	int			nchildren = 0;

	d = DurableResultDatum(0, 5, &isnull);
	parent_id = isnull ? 0 : DatumGetInt64(d);
	d = DurableResultDatum(0, 6, &isnull);
	if (!isnull && strcmp(move->to_state, "cancelled") == 0)
		deconstruct_array(DatumGetArrayTypeP(d), INT8OID, sizeof(int64),
						  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
						  &children, NULL, &nchildren);
	/* an await it gave up on waits for nothing now */
	if (DatumGetBool(DurableResultDatum(0, 7, &isnull)))
	{
		Datum		id = Int64GetDatum(task_id);

		DurableExecuteStmt(STMT_EVENT_WAITS_DROP, &id, NULL, SPI_OK_DELETE, 0);
	}
	if (parent_id != 0)
		DurableWakeParent(parent_id, task_id, now);
	for (int i = 0; i < nchildren; i++)
		cancel_child(DatumGetInt64(children[i]), task_id, now);
}

/*
 * child_to_review
 *		A child of a task just cancelled has a step started or unknown:
 *		whether that step took effect nobody knows, and a cascade is no
 *		person's decision, so the child goes to review instead of being
 *		cancelled.  A running one loses its lease, as on expiry, so its
 *		started steps are unknown now (their worker can no longer say).
 *		The event names the parent and who cancelled it.  Once a person
 *		has settled every step, the child is cancelled as its parent was
 *		(DurableReleaseMove).
 */
static void
child_to_review(DurableTask *child, int64 parent_id, TimestampTz now)
{
	const char *actor = DurableCallerName();
	DurableMove move = {0};
	DurableDetail detail;
	Datum		key[2];
	uint64		n;
	char	  **names;

	key[0] = Int32GetDatum(child->partition);
	key[1] = Int64GetDatum(child->task_id);
	n = DurableExecuteStmt(STMT_STEPS_UNSETTLED, key, NULL, SPI_OK_SELECT, 0);
	/* the names outlive the result, which the next statement replaces */
	names = palloc(sizeof(char *) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
		names[i] = DurableResultText(i, 1);
	for (uint64 i = 0; i < n; i++)
	{
		DurableStep step;

		DurableStepFetchOrError(child, names[i], &step);
		if (strcmp(step.state, "started") == 0)
			DurableSettleStep(child, &step, DURABLE_RECOVERY_MANUAL_REVIEW,
							  actor, NULL, NULL, now);
	}

	DurableDetailInit(&detail);
	DurableDetailText(&detail, "reason", "its parent was cancelled");
	DurableDetailInt(&detail, "parent", parent_id);
	DurableDetailText(&detail, "cancelled_by", actor);
	DurableDetailText(&detail, "previous_state", child->state);
	DurableDetailInt(&detail, "steps_in_doubt", child->steps_in_doubt);
	DurableDetailText(&detail, "action",
					  DurableRecoveryActionName(DURABLE_RECOVERY_MANUAL_REVIEW));
	move.from_state = child->state;
	move.fence = child->fence;
	move.to_state = "needs_review";
	move.revoke = strcmp(child->state, "running") == 0;
	move.allow_doubt = true;
	move.kind = "parent_cancelled";
	move.actor = actor;
	move.detail = DurableDetailFinish(&detail);
	DurableMoveLockedTask(child, &move, now);
}

/*
 * cancel_child
 *		Cancel a child of a task just cancelled, unless it has finished,
 *		waits in review for an operator, who alone may settle it, or has a
 *		step in doubt, which sends it to review.  Its own children go with
 *		it.
 */
static void
cancel_child(int64 child_id, int64 parent_id, TimestampTz now)
{
	DurableTask child;

	if (!DurableTaskFetch(child_id, true, &child) ||
		DurableTaskIsTerminal(child.state) ||
		strcmp(child.state, "needs_review") == 0)
		return;
	if (child.steps_in_doubt > 0)
		child_to_review(&child, parent_id, now);
	else
		DurableCancelLockedTask(&child, "its parent was cancelled", parent_id, now);
}

/*
 * DurableCancelLockedTask
 *		Cancel an unfinished task the caller has read under its row lock
 *		(not in review); a running one loses its lease.  parent_id names
 *		the parent whose cancellation this is, or is 0.  Its unfinished
 *		children go with it.
 */
void
DurableCancelLockedTask(const DurableTask *task, const char *reason,
						int64 parent_id, TimestampTz now)
{
	DurableMove move = {0};
	DurableDetail detail;

	DurableDetailInit(&detail);
	DurableDetailText(&detail, "reason", reason);
	if (parent_id != 0)
		DurableDetailInt(&detail, "parent", parent_id);
	DurableDetailText(&detail, "previous_state", task->state);
	move.from_state = task->state;
	move.fence = task->fence;
	move.to_state = "cancelled";
	move.revoke = strcmp(task->state, "running") == 0;
	move.allow_doubt = true;
	move.kind = "cancelled";
	move.actor = DurableCallerName();
	move.detail = DurableDetailFinish(&detail);
	DurableMoveLockedTask(task, &move, now);
}

/*
 * DurableWakeParent
 *		A child has finished: wake its parent if the parent waits on a join
 *		whose children have now all finished.
 *
 *		The parent's row is updated first, whatever its state.  A parent
 *		that is registering its join holds that row, so this waits for the
 *		join to commit and then sees it; a join that comes later waits for
 *		this transaction and then sees the child finished.  The check runs
 *		as a statement of its own, with a snapshot taken after the row was
 *		had.  (An update rather than a lock, so that a transaction under
 *		REPEATABLE READ whose snapshot missed a concurrent change fails to
 *		serialize instead of missing it.)
 */
void
DurableWakeParent(int64 parent_id, int64 child_id, TimestampTz now)
{
	Datum		args[5];

	args[0] = Int32GetDatum(DURABLE_TASK_PARTITION(parent_id));
	args[1] = Int64GetDatum(parent_id);
	if (DurableExecuteStmt(STMT_PARENT_LOCK, args, NULL, SPI_OK_UPDATE, 0) == 0)
		return;
	args[2] = TimestampTzGetDatum(now);
	args[3] = Int64GetDatum(child_id);
	args[4] = CStringGetTextDatum(DurableCallerName());
	DurableAnnounceWoken(DurableExecuteStmt(STMT_PARENT_WAKE, args, NULL,
										SPI_OK_SELECT, 0));
}

/*
 * DurableAnnounceWoken
 *		Tasks were woken: NOTIFY the queues of the rows of the statement
 *		that woke them (a queue each), at commit, as an enqueue of ready
 *		work does.  A wake-up only: claims decide.
 */
void
DurableAnnounceWoken(uint64 rows)
{
	for (uint64 r = 0; r < rows; r++)
		Async_Notify(DURABLE_READY_CHANNEL, DurableResultText(r, 1));
}

/*
 * DurableMoveLockedTask
 *		DurableMoveTask for a caller that has just read the task under its
 *		row lock and checked its state and fence: failing can only mean a bug.
 */
void
DurableMoveLockedTask(const DurableTask *task, const DurableMove *move,
					  TimestampTz now)
{
	if (!DurableMoveTask(task, move, now, NULL))
		elog(ERROR, "task %lld changed under its row lock",
			 (long long) task->task_id);
}

/*
 * DurableMoveTaskFenced
 *		DurableMoveTask for a worker that holds the fence: anything but
 *		success raises the error that explains it, and so does a queue that
 *		does not let the worker's role work.
 */
void
DurableMoveTaskFenced(int64 task_id, const DurableMove *move, TimestampTz now)
{
	DurableTask task;
	DurableMoved moved;

	task.task_id = task_id;
	if (!DurableMoveTask(&task, move, now, &moved))
		DurableReportRefusal(task_id, move->fence);
	DurableCheckRestrictedQueue(moved.queue, moved.restricted, DURABLE_PRIV_WORK);
}
