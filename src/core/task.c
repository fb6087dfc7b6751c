/*-------------------------------------------------------------------------
 *
 * task.c
 *	  Reading one task, the errors a fenced write raises, and appending an
 *	  event to a task without moving it.  Moving a task is move.c's.
 *
 * Fencing: a write names the fence it was given by its claim, and a move
 * re-checks fence and state in its own statement (move.c).  Only when it
 * found nothing to update is the row read again here to say why, in the
 * caller's transaction, so the caller's own writes roll back with the
 * error.  Nothing here moves a task or calls what does.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* the columns of a task that fail, cancel and error reports read */
#define TASK_COLUMNS(table) \
	"SELECT t.state::text, t.fence, t.attempt, t.max_attempts, t.created_at," \
	" t.deadline, t.class::text, t.queue_name, t.owner, t.lease_until," \
	" q.retry_base, q.retry_cap, q.retry_capacity, t.version, t.run_at," \
	" t.steps_in_doubt, t.checkpoint_version, q.restricted," \
	" t.budgets IS NOT NULL AS spends" \
	" FROM " table " t" \
	" LEFT JOIN durable.queues q ON q.queue_name = t.queue_name" \
	" WHERE t.partition_key = $partition" \
	" AND t.task_id = $task_id"

/*
 * Every task retained, whatever the caller may see: the tables, not
 * durable.tasks, which shows a queue operator its own queues only.
 */
#define EVERY_TASK_COLUMNS \
	"partition_key, task_id, state, fence, attempt, max_attempts, created_at," \
	" deadline, class, queue_name, owner, lease_until, version, run_at," \
	" steps_in_doubt, checkpoint_version, budgets"
#define EVERY_TASK \
	"(SELECT " EVERY_TASK_COLUMNS " FROM durable.live_tasks" \
	" UNION ALL SELECT " EVERY_TASK_COLUMNS " FROM durable.task_history)"

/* the columns of task_get and task_lock (TASK_COLUMNS) */
enum
{
	TASK_STATE,
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
	TASK_RESTRICTED,
	TASK_SPENDS,
	TASK_NCOLUMNS
};

static const DurableColumn task_columns[TASK_NCOLUMNS] = {
	[TASK_STATE] = {"state", TEXTOID},
	[TASK_FENCE] = {"fence", INT8OID},
	[TASK_ATTEMPT] = {"attempt", INT4OID},
	[TASK_MAX_ATTEMPTS] = {"max_attempts", INT4OID},
	[TASK_CREATED_AT] = {"created_at", TIMESTAMPTZOID},
	[TASK_DEADLINE] = {"deadline", INTERVALOID},
	[TASK_CLASS] = {"class", TEXTOID},
	[TASK_QUEUE] = {"queue_name", TEXTOID},
	[TASK_OWNER] = {"owner", TEXTOID},
	[TASK_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID},
	[TASK_RETRY_BASE] = {"retry_base", INT4OID},
	[TASK_RETRY_CAP] = {"retry_cap", INT4OID},
	[TASK_RETRY_CAPACITY] = {"retry_capacity", INT4OID},
	[TASK_VERSION] = {"version", INT4OID},
	[TASK_RUN_AT] = {"run_at", TIMESTAMPTZOID},
	[TASK_STEPS_IN_DOUBT] = {"steps_in_doubt", INT4OID},
	[TASK_CHECKPOINT_VERSION] = {"checkpoint_version", INT4OID},
	[TASK_RESTRICTED] = {"restricted", BOOLOID},
	[TASK_SPENDS] = {"spends", BOOLOID},
};

/* the statements of one task, by its key */
enum
{
	KEY_PARTITION,
	KEY_TASK_ID,
	KEY_NPARAMS
};
static const DurableParam task_key_params[KEY_NPARAMS] = {
	[KEY_PARTITION] = {"partition", INT4OID},
	[KEY_TASK_ID] = {"task_id", INT8OID},
};

static DurableStatement task_get = {
	.name = "task_get",
	.sql = TASK_COLUMNS(EVERY_TASK),
	DURABLE_PARAMS(task_key_params),
	DURABLE_COLUMNS(task_columns),
};

static DurableStatement task_lock = {
	.name = "task_lock",
	.sql = TASK_COLUMNS("durable.live_tasks") " FOR NO KEY UPDATE OF t",
	DURABLE_PARAMS(task_key_params),
	DURABLE_COLUMNS(task_columns),
};

static int32
int32_or(DurableResult res, uint64 row, int col, int32 fallback)
{
	return DurableGetIsNull(res, row, col) ? fallback :
		DurableGetInt32(res, row, col);
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
	DurableResult res = {0};
	Datum		args[KEY_NPARAMS];
	bool		isnull;
	Datum		d;

	task->partition = DURABLE_TASK_PARTITION(task_id);
	task->task_id = task_id;
	args[KEY_PARTITION] = Int32GetDatum(task->partition);
	args[KEY_TASK_ID] = Int64GetDatum(task_id);
	/*
	 * Only live tasks are locked: a finished one is in history, where
	 * nothing but a replay moves it, and is read there to say its state.
	 */
	if (lock)
		res = DurableRun(&task_lock, args, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 0)
		res = DurableRun(&task_get, args, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 0)
		return false;

	task->state = DurableParseTaskState(DurableGetText(res, 0, TASK_STATE));
	task->fence = DurableGetInt64(res, 0, TASK_FENCE);
	task->attempt = DurableGetInt32(res, 0, TASK_ATTEMPT);
	task->max_attempts = DurableGetInt32(res, 0, TASK_MAX_ATTEMPTS);
	task->created_at = DatumGetTimestampTz(DurableGetDatum(res, 0, TASK_CREATED_AT, &isnull));
	d = DurableGetDatum(res, 0, TASK_DEADLINE, &isnull);
	task->deadline = isnull ? DURABLE_NO_DEADLINE :
		DurableIntervalMicroseconds(DatumGetIntervalP(d), "deadline");
	task->class = DurableGetText(res, 0, TASK_CLASS);
	task->queue = DurableGetText(res, 0, TASK_QUEUE);
	task->owner = DurableGetText(res, 0, TASK_OWNER);
	d = DurableGetDatum(res, 0, TASK_LEASE_UNTIL, &isnull);
	task->lease_until = isnull ? 0 : DatumGetTimestampTz(d);
	task->retry_base = int32_or(res, 0, TASK_RETRY_BASE, 2);
	task->retry_cap = int32_or(res, 0, TASK_RETRY_CAP, 60);
	task->retry_limited = !DurableGetIsNull(res, 0, TASK_RETRY_CAPACITY);
	task->version = DurableGetInt32(res, 0, TASK_VERSION);
	task->run_at = DatumGetTimestampTz(DurableGetDatum(res, 0, TASK_RUN_AT, &isnull));
	task->steps_in_doubt = DurableGetInt32(res, 0, TASK_STEPS_IN_DOUBT);
	task->checkpoint_version = DurableGetInt32(res, 0, TASK_CHECKPOINT_VERSION);
	d = DurableGetDatum(res, 0, TASK_RESTRICTED, &isnull);
	task->restricted = !isnull && DatumGetBool(d);
	task->spends = DurableGetBool(res, 0, TASK_SPENDS);
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

/* 55U04 unless the task is running: what only a held lease allows */
void
DurableTaskRequireRunning(const DurableTask *task)
{
	if (task->state != DURABLE_TASK_RUNNING)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("task %lld is not running", (long long) task->task_id),
				errdetail("The task is in state %s.", DurableTaskStateName(task->state)));
}

bool
DurableTaskIsTerminal(DurableTaskState state)
{
	return state == DURABLE_TASK_COMPLETED ||
		state == DURABLE_TASK_FAILED ||
		state == DURABLE_TASK_CANCELLED;
}

/* the latest step of a task that is started or unknown */
enum
{
	DOUBT_STEP,
	DOUBT_STATE,
	DOUBT_NCOLUMNS
};

static const DurableColumn doubt_columns[DOUBT_NCOLUMNS] = {
	[DOUBT_STEP] = {"step", TEXTOID},
	[DOUBT_STATE] = {"state", TEXTOID},
};

static DurableStatement task_step_in_doubt = {
	.name = "task_step_in_doubt",
	.sql = "SELECT step, state::text AS state FROM durable.live_steps"
	" WHERE partition_key = $partition AND task_id = $task_id"
	" AND state IN ('started', 'unknown')"
	" ORDER BY ordinal DESC LIMIT 1",
	DURABLE_PARAMS(task_key_params),
	DURABLE_COLUMNS(doubt_columns),
};

/*
 * DurableReportRefusal
 *		A fenced write was refused (found nothing to update): say why.
 *		Raises 42501 for a role that may not work on its queue (and for an
 *		unknown task where the role may not work on some restricted queue:
 *		DurableReportUnknownTask), 42704 for an unknown task, 55U01 for a
 *		fence that is not current or a task that is no longer running under
 *		it, and 55U04 for a task whose steps are still in doubt.  The
 *		current fence is never told: whoever does not hold it must not
 *		learn it from an error.
 */
void
DurableReportRefusal(int64 task_id, int64 fence)
{
	DurableTask task;
	Datum		args[KEY_NPARAMS];

	if (!DurableTaskFetch(task_id, false, &task))
		DurableReportUnknownTask(task_id);
	DurableCheckTaskAccess(task_id, task.queue, task.restricted);
	args[KEY_PARTITION] = Int32GetDatum(task.partition);
	args[KEY_TASK_ID] = Int64GetDatum(task_id);
	if (task.fence == fence && task.state == DURABLE_TASK_RUNNING &&
		task.steps_in_doubt > 0)
	{
		DurableResult res = DurableRun(&task_step_in_doubt, args, NULL,
									   SPI_OK_SELECT, 1);
		char	   *step = res.rows > 0 ? DurableGetText(res, 0, DOUBT_STEP) : NULL;

		if (step != NULL)
			ereport(ERROR,
					errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
					errmsg("task %lld cannot finish while step \"%s\" is %s",
						   (long long) task_id, step,
						   DurableGetText(res, 0, DOUBT_STATE)),
					errdetail("A step that was started and not committed may have taken effect."),
					errhint("Commit the step, record a receipt for it, or report it with durable_fail(..., step => '%s').",
							step));
	}
	DurableCountNow(task.queue, DURABLE_COUNT_STALE_WRITES);
	if (task.fence != fence)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_STALE_FENCING_TOKEN),
				errmsg("fencing token %lld is stale for task %lld",
					   (long long) fence, (long long) task_id),
				errdetail("The task is in state %s under another fencing token.",
						  DurableTaskStateName(task.state)),
				errhint("The caller no longer holds this task and must stop acting on it."));
	ereport(ERROR,
			errcode(ERRCODE_DURABLE_STALE_FENCING_TOKEN),
			errmsg("task %lld is no longer running under fencing token %lld",
				   (long long) task_id, (long long) fence),
			errdetail("The task is in state %s.", DurableTaskStateName(task.state)),
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
		task->fence != fence || task->state != DURABLE_TASK_RUNNING)
		DurableReportRefusal(task_id, fence);
	DurableCheckTaskAccess(task_id, task->queue, task->restricted);
}

/*
 * DurableCheckBatchAccess
 *		The check of a batch of n tasks (task_ids) of which the caller held
 *		some (held, with their queues): DurableCheckTaskAccess for those,
 *		DurableCheckTaskVisible for the others.  The checks run statements
 *		of their own: the caller collects the queues from its result first.
 */
void
DurableCheckBatchAccess(const int64 *task_ids, char **queues,
						const bool *restricted, const bool *held, int n)
{
	DurableCheckTasksAccess(task_ids, queues, restricted, n);
	for (int i = 0; i < n; i++)
		if (!held[i])
			DurableCheckTaskVisible(task_ids[i]);
}

/*
 * DurableCheckTaskVisible
 *		For a task of a batch that the batch did not change (a fence not
 *		current, a task not running, or none): 42501 where its queue, or
 *		for an unknown task some restricted queue, does not let the calling
 *		role work, as DurableReportRefusal says, so that such a role learns
 *		from a batch neither whether a fence is current nor whether a task
 *		exists.  Anyone else is not told here.
 */
void
DurableCheckTaskVisible(int64 task_id)
{
	DurableTask task;

	if (DurableTaskFetch(task_id, false, &task))
		DurableCheckTaskAccess(task_id, task.queue, task.restricted);
	else if (!DurableMayWorkOnEveryQueue())
		DurableReportTaskDenied(task_id);
}

/*
 * DurableCheckFencedWrite
 *		After a fenced write by statement that returns the task's queue
 *		and whether it is restricted (columns queue_col, restricted_col of
 *		its one row): the refusal when it changed nothing, else the check
 *		that the caller may work on the queue.
 */
void
DurableCheckFencedWrite(DurableResult res, int64 task_id, int64 fence,
						int queue_col, int restricted_col)
{
	if (res.rows == 0)
		DurableReportRefusal(task_id, fence);
	DurableCheckTaskAccess(task_id, DurableGetText(res, 0, queue_col),
						   !DurableGetIsNull(res, 0, restricted_col) &&
						   DurableGetBool(res, 0, restricted_col));
}

/*
 * DurableCheckTaskReadable
 *		A reader of a task (its result, its streams) needs the enqueue or
 *		the work grant of its queue where the queue is restricted; refused
 *		in the words an unknown task is refused in (access.c).
 */
void
DurableCheckTaskReadable(int64 task_id, const char *queue, bool restricted)
{
	if (restricted &&
		!DurableMayUseQueue(queue, DURABLE_PRIV_ENQUEUE) &&
		!DurableMayUseQueue(queue, DURABLE_PRIV_WORK))
		DurableReportTaskDenied(task_id);
}

/* what a producer learns of a task: durable_result's columns, then its queue */
enum
{
	OUTCOME_STATE,
	OUTCOME_RESULT,
	OUTCOME_ERROR,
	OUTCOME_FINISHED_AT,
	OUTCOME_STOP_CODE,
	OUTCOME_QUEUE,
	OUTCOME_RESTRICTED,
	OUTCOME_NCOLUMNS
};
static const DurableColumn outcome_columns[OUTCOME_NCOLUMNS] = {
	[OUTCOME_STATE] = {"state", TEXTOID},
	[OUTCOME_RESULT] = {"result", JSONBOID},
	[OUTCOME_ERROR] = {"error", JSONBOID},
	[OUTCOME_FINISHED_AT] = {"finished_at", TIMESTAMPTZOID},
	[OUTCOME_STOP_CODE] = {"stop_code", TEXTOID},
	[OUTCOME_QUEUE] = {"queue_name", TEXTOID},
	[OUTCOME_RESTRICTED] = {"restricted", BOOLOID},
};
#define OUTCOME_COLUMNS \
	"partition_key, task_id, state, result, last_error, finished_at, stop_code," \
	" queue_name"
static DurableStatement task_outcome = {
	.name = "task_outcome",
	.sql = "SELECT t.state::text, t.result, t.last_error AS error, t.finished_at,"
	" t.stop_code, t.queue_name, q.restricted"
	" FROM (SELECT " OUTCOME_COLUMNS " FROM durable.live_tasks"
	" UNION ALL SELECT " OUTCOME_COLUMNS " FROM durable.task_history) t"
	" LEFT JOIN durable.queues q ON q.queue_name = t.queue_name"
	" WHERE t.partition_key = $partition AND t.task_id = $task_id",
	DURABLE_PARAMS(task_key_params),
	DURABLE_COLUMNS(outcome_columns),
};

/*
 * DurableTaskOutcome
 *		Put into store (of tupdesc) a task's state and, once it finished,
 *		its result or its last error, when it finished and why it stopped
 *		(stop_code): what a producer waits for.  42704 for an unknown task, 42501 for a role that may
 *		not read it (DurableCheckTaskReadable).
 */
void
DurableTaskOutcome(int64 task_id, Tuplestorestate *store, TupleDesc tupdesc)
{
	Datum		args[KEY_NPARAMS];
	DurableResult res;
	Datum		values[OUTCOME_QUEUE];
	bool		isnull[OUTCOME_QUEUE];

	args[KEY_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[KEY_TASK_ID] = Int64GetDatum(task_id);
	res = DurableRun(&task_outcome, args, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 0)
		DurableReportUnknownTask(task_id);
	DurableCheckTaskReadable(task_id, DurableGetText(res, 0, OUTCOME_QUEUE),
							 !DurableGetIsNull(res, 0, OUTCOME_RESTRICTED) &&
							 DurableGetBool(res, 0, OUTCOME_RESTRICTED));
	for (int col = 0; col < OUTCOME_QUEUE; col++)
		values[col] = DurableGetDatum(res, 0, col, &isnull[col]);
	tuplestore_putvalues(store, tupdesc, values, isnull);
}

/*
 * DurableCheckOperatorTask
 *		An operator's call on a task: a queue operator acts on the tasks of
 *		the queues it may work on only, and is refused the others as a
 *		worker is (the same 42501 whether the task exists); an operator of
 *		every queue passes.
 */
void
DurableCheckOperatorTask(int64 task_id)
{
	if (DurableCallerIsQueueOperator())
		DurableCheckTaskVisible(task_id);
}

static DurableStatement task_seen = {
	.name = "task_seen",
	.sql = "SELECT FROM durable.tasks"
	" WHERE partition_key = $partition AND task_id = $task_id",
	DURABLE_PARAMS(task_key_params),
	.by_partition = true,
};

/*
 * DurableTaskInScope
 *		Whether durable's views show the calling role the rows of a task
 *		(its steps and events): those of a task of a queue in its scope
 *		(DurableQueueInScope).  A role that sees every queue is answered
 *		without a statement.
 */
bool
DurableTaskInScope(int64 task_id)
{
	Datum		args[KEY_NPARAMS];

	if (DurableCallerSeesEveryQueue())
		return true;
	/* with the reader's rights: durable.tasks shows it the tasks in scope */
	args[KEY_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[KEY_TASK_ID] = Int64GetDatum(task_id);
	return DurableRun(&task_seen, args, NULL, SPI_OK_SELECT, 1).rows > 0;
}

enum
{
	APPEND_SEQ,
	APPEND_NCOLUMNS
};

static const DurableColumn append_columns[APPEND_NCOLUMNS] = {
	[APPEND_SEQ] = {"seq", INT4OID},
};

enum
{
	APPEND_PARTITION,
	APPEND_TASK_ID,
	APPEND_NOW,
	APPEND_KIND,
	APPEND_ACTOR,
	APPEND_DETAIL,
	APPEND_STEP,
	APPEND_DOUBT_DELTA,
	APPEND_ROLE,
	APPEND_NPARAMS
};

static const DurableParam event_append_params[APPEND_NPARAMS] = {
	[APPEND_PARTITION] = {"partition", INT4OID},
	[APPEND_TASK_ID] = {"task_id", INT8OID},
	[APPEND_NOW] = {"now", TIMESTAMPTZOID},
	[APPEND_KIND] = {"kind", TEXTOID},
	[APPEND_ACTOR] = {"actor", TEXTOID},
	[APPEND_DETAIL] = {"detail", JSONBOID},
	[APPEND_STEP] = {"step", TEXTOID},
	[APPEND_DOUBT_DELTA] = {"doubt_delta", INT4OID},
	[APPEND_ROLE] = {"role", TEXTOID},
};

static DurableStatement event_append = {
	.name = "event_append",
	.sql = "WITH t AS (UPDATE durable.live_tasks SET version = version + 1,"
	"  steps_in_doubt = steps_in_doubt + $doubt_delta"
	"  WHERE partition_key = $partition AND task_id = $task_id"
	"  RETURNING partition_key, task_id, version, fence, state, owner)"
	" INSERT INTO durable.event_log (partition_key, task_id, seq, state, fence,"
	" at, kind, actor, detail, step, role)"
	" SELECT partition_key, task_id, version, state, fence, $now, $kind,"
	" COALESCE($actor, owner), $detail, $step, $role FROM t"
	" RETURNING seq",
	DURABLE_PARAMS(event_append_params),
	DURABLE_COLUMNS(append_columns),
	.nsplit = 2,
	.split = {
		{"UPDATE durable.live_tasks SET version = version + 1,"
			" steps_in_doubt = steps_in_doubt + $doubt_delta"
			" WHERE partition_key = $partition AND task_id = $task_id"
			" RETURNING partition_key, task_id, version, fence, state, owner",
		DURABLE_SPLIT_NO_INPUT, true},
		/* $10.. partition_key, task_id, version, fence, state, owner */
		{"INSERT INTO durable.event_log (partition_key, task_id, seq, state, fence,"
			" at, kind, actor, detail, step, role)"
			" VALUES ($10, $11, $12, $14, $13, $now, $kind, COALESCE($actor, $15),"
			" $detail, $step, $role)"
			" RETURNING seq",
		0, true},
	},
};

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
	DurableResult res;
	Datum		args[APPEND_NPARAMS];
	char		nulls[APPEND_NPARAMS] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};

	args[APPEND_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task->task_id));
	args[APPEND_TASK_ID] = Int64GetDatum(task->task_id);
	args[APPEND_NOW] = TimestampTzGetDatum(now);
	args[APPEND_KIND] = CStringGetTextDatum(kind);
	args[APPEND_ACTOR] = actor ? CStringGetTextDatum(actor) : (Datum) 0;
	nulls[APPEND_ACTOR] = actor ? ' ' : 'n';
	args[APPEND_DETAIL] = JsonbPGetDatum(detail);
	nulls[APPEND_DETAIL] = detail ? ' ' : 'n';
	args[APPEND_STEP] = step ? CStringGetTextDatum(step) : (Datum) 0;
	nulls[APPEND_STEP] = step ? ' ' : 'n';
	args[APPEND_DOUBT_DELTA] = Int32GetDatum(doubt_delta);
	args[APPEND_ROLE] = CStringGetTextDatum(DurableCallerName());
	res = DurableRun(&event_append, args, nulls,
					 SPI_OK_INSERT_RETURNING, 0);
	if (res.rows != 1)
		elog(ERROR, "task %lld vanished under its row lock",
			 (long long) task->task_id);
	return DurableGetInt32(res, 0, APPEND_SEQ);
}

/* the parent of a live task, and that parent's state, live or in history */
enum
{
	PARENT_ID,
	PARENT_NCOLUMNS
};

static const DurableColumn parent_columns[PARENT_NCOLUMNS] = {
	[PARENT_ID] = {"parent_id", INT8OID},
};

static DurableStatement task_parent = {
	.name = "task_parent",
	.sql = "SELECT parent_id FROM durable.live_tasks"
	" WHERE partition_key = $partition AND task_id = $task_id AND parent_id IS NOT NULL",
	DURABLE_PARAMS(task_key_params),
	DURABLE_COLUMNS(parent_columns),
};

enum
{
	PARENT_STATE,
	PARENT_STATE_NCOLUMNS
};

static const DurableColumn parent_state_columns[PARENT_STATE_NCOLUMNS] = {
	[PARENT_STATE] = {"state", TEXTOID},
};

static DurableStatement task_parent_state = {
	.name = "task_parent_state",
	.sql = "SELECT t.state::text AS state FROM durable.tasks t"
	" WHERE t.partition_key = $partition AND t.task_id = $task_id",
	DURABLE_PARAMS(task_key_params),
	DURABLE_COLUMNS(parent_state_columns),
};

/*
 * DurableCancelledParent
 *		The parent of a live task when that parent was cancelled, else 0.
 *		A child whose steps were in doubt when its parent was cancelled
 *		went to review instead (move.c); once nothing of it is in doubt it
 *		follows its parent rather than resume for nobody.
 */
int64
DurableCancelledParent(const DurableTask *task)
{
	DurableResult res;
	Datum		args[KEY_NPARAMS];
	int64		parent_id;

	args[KEY_PARTITION] = Int32GetDatum(task->partition);
	args[KEY_TASK_ID] = Int64GetDatum(task->task_id);
	res = DurableRun(&task_parent, args, NULL, SPI_OK_SELECT, 0);
	if (res.rows == 0)
		return 0;
	parent_id = DurableGetInt64(res, 0, PARENT_ID);
	/* its state wherever it is, live or in history */
	args[KEY_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(parent_id));
	args[KEY_TASK_ID] = Int64GetDatum(parent_id);
	res = DurableRun(&task_parent_state, args, NULL, SPI_OK_SELECT, 0);
	if (res.rows == 0)
		return 0;				/* retention has removed it */
	return DurableParseTaskState(DurableGetText(res, 0, PARENT_STATE)) ==
		DURABLE_TASK_CANCELLED ? parent_id : 0;
}
