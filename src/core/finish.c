/*-------------------------------------------------------------------------
 *
 * finish.c
 *	  A task's finish (move.c): its row to history and its steps with it,
 *	  counted.  On one server the row moves without a statement
 *	  (finish_direct.c) where the tables allow; on Citus the finish is one
 *	  delegated call.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_type.h"
#include "core/move.h"
#include "core/row.h"
#include "core/sql.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

static void count_finish(int64 task_id, const DurableFinished *finished,
						 const DurableMove *move, TimestampTz now);

/* what a finish returns */
enum
{
	FINISHED_VERSION,
	FINISHED_QUEUE,
	FINISHED_OWNER,
	FINISHED_RESTRICTED,
	FINISHED_PARENT,
	FINISHED_WAITS,
	FINISHED_CLAIMED_AT,
	FINISHED_ATTEMPT,
	FINISHED_NCOLUMNS
};

static const DurableColumn finished_columns[FINISHED_NCOLUMNS] = {
	[FINISHED_VERSION] = {"version", INT4OID},
	[FINISHED_QUEUE] = {"queue_name", TEXTOID},
	[FINISHED_OWNER] = {"owner", TEXTOID},
	[FINISHED_RESTRICTED] = {"restricted", BOOLOID},
	[FINISHED_PARENT] = {"parent_id", INT8OID},
	[FINISHED_WAITS] = {"waits", JSONBOID},
	[FINISHED_CLAIMED_AT] = {"claimed_at", TIMESTAMPTZOID},
	[FINISHED_ATTEMPT] = {"attempt", INT4OID},
};

/*
 * A finish moves the task's row to history, and its steps with it.  On one
 * server the steps move in a statement of their own, run only for a task
 * that has some (most have none): a statement that deletes and inserts in
 * tables it then finds empty still opens them, and that was a fifth of a
 * commit.  No step is added to a task once its row is gone (a step is
 * planned under the task's row lock, DurableTaskHeld), so a look after the
 * finish finds every step there is to move.
 */
#define FINISH_TASK \
	"WITH d AS (DELETE FROM durable.live_tasks" MOVE_WHERE " RETURNING *)," \
	" u AS (INSERT INTO durable.task_history (" TASK_TABLE_COLUMNS ")" \
	"  SELECT " FINISHED_TASK_ROW " FROM d" \
	MOVE_RETURNING ", parent_id, waits, claimed_at, attempt)"
#define FINISHED_SELECT \
	" SELECT u.version, u.queue_name, u.owner, q.restricted, u.parent_id," \
	" u.waits, u.claimed_at, u.attempt FROM u" QUEUE_OF_U
/* finished_at, step_history's one column more, is the finish's time */
#define STEPS_TO_HISTORY(from) \
	"INSERT INTO durable.step_history (" STEP_HISTORY_COLUMNS ")" \
	" SELECT " STEP_TABLE_COLUMNS ", $now FROM " from

static DurableStatement finish_statement = {
	.name = "finish_task",
	.sql = FINISH_TASK FINISHED_SELECT,
	DURABLE_PARAMS(move_params),
	DURABLE_COLUMNS(finished_columns),
	DURABLE_ROW_TABLES,
	.by_partition = true,
};

enum
{
	STEPS_PARTITION,
	STEPS_TASK_ID,
	STEPS_NOW,
	STEPS_NPARAMS
};
static const DurableParam finish_steps_params[STEPS_NPARAMS] = {
	[STEPS_PARTITION] = {"partition", INT4OID},
	[STEPS_TASK_ID] = {"task_id", INT8OID},
	[STEPS_NOW] = {"now", TIMESTAMPTZOID},
};

static DurableStatement finish_steps = {
	.name = "finish_steps",
	.sql = "WITH s AS (DELETE FROM durable.live_steps"
	"  WHERE partition_key = $partition AND task_id = $task_id RETURNING *) "
	STEPS_TO_HISTORY("s"),
	DURABLE_PARAMS(finish_steps_params),
	DURABLE_ROW_TABLES,
	.by_partition = true,
};

/* whether a task has steps in durable.live_steps */
static DurableKeyRead live_step_read = {
	.table = {.schema = "durable", .name = "live_steps"},
	.keys = {.nkeys = 2},
};

/* on Citus: the task and its steps in one statement, sent as one call */
DurableStatement DurableFinishStatement = {
	.name = "finish",
	.sql = FINISH_TASK ","
	" s AS (DELETE FROM durable.live_steps s USING d"
	"  WHERE s.partition_key = d.partition_key AND s.task_id = d.task_id"
	"  RETURNING s.*),"
	" h AS (" STEPS_TO_HISTORY("s") ")"
	FINISHED_SELECT,
	DURABLE_PARAMS(move_params),
	DURABLE_COLUMNS(finished_columns),
	DURABLE_ROW_TABLES,
	.by_partition = true,
	.delegated = true,
	.nsplit = 5,
	.split = {
	/* the task's row in history, as finish makes it */
	{"DELETE FROM durable.live_tasks" MOVE_WHERE
		" RETURNING " FINISHED_TASK_ROW,
	DURABLE_SPLIT_NO_INPUT, true, true},
	{"INSERT INTO durable.task_history (" TASK_TABLE_COLUMNS ") VALUES ($*)"
		" RETURNING version, queue_name, owner, parent_id, waits, claimed_at, attempt",
	0, true, true},
	{"DELETE FROM durable.live_steps WHERE partition_key = $partition AND task_id = $task_id"
		" RETURNING " STEP_TABLE_COLUMNS,
	DURABLE_SPLIT_NO_INPUT, false, true},
	{"INSERT INTO durable.step_history (" STEP_HISTORY_COLUMNS ")"
		" VALUES ($*, $now)",
	2, false, true},
	{"SELECT $19::int4 AS version, $20::text AS queue_name, $21::text AS owner,"
		" q.restricted, $22::int8 AS parent_id, $23::pg_catalog.jsonb AS waits,"
		" $24::pg_catalog.timestamptz AS claimed_at, $25::int4 AS attempt"
		" FROM (SELECT) x LEFT JOIN durable.queues q ON q.queue_name = $20",
	1, true, true},
	},
};

/* after the task's row moved directly: its steps to history, if any */
static void
move_steps(int64 task_id, TimestampTz now)
{
	Datum		args[STEPS_NPARAMS];
	int32		partition = DURABLE_TASK_PARTITION(task_id);
	DurableKeyRead *read = DurableKeyReadInPartition(&live_step_read, partition);

	args[STEPS_PARTITION] = Int32GetDatum(partition);
	args[STEPS_TASK_ID] = Int64GetDatum(task_id);
	if (read != NULL && !DurableReadByKey(read, args, NULL, NULL))
		return;
	args[STEPS_NOW] = TimestampTzGetDatum(now);
	DurableRun(&finish_steps, args, NULL, SPI_OK_INSERT, 0);
}

/*
 * DurableFinishTask
 *		Move a finishing task's row to history, and its steps: through the
 *		access methods (finish_direct.c), on one server or in the task's
 *		shards here on Citus, unless the tables must be written by
 *		statements; on Citus elsewhere by one delegated call; and count it.
 *		args and nulls are the move's parameters (move.h).  Returns
 *		false when the task is not as move requires.
 */
bool
DurableFinishTask(int64 task_id, const DurableMove *move, Datum *args, const char *nulls,
			TimestampTz now, DurableFinished *finished)
{
	DurableResult res;
	bool		isnull;

	DurableEnsureHistoryDays(now);

	/*
	 * The row is restated column by column, as by the statement: its tables
	 * are checked before and after, as DurableRun checks them.
	 */
	DurableCheckTables(&finish_statement);
	switch (DurableFinishDirectly(task_id, move, now, finished))
	{
		case DURABLE_DIRECT_DONE:
			DurableCheckTables(&finish_statement);
			move_steps(task_id, now);
			count_finish(task_id, finished, move, now);
			return true;
		case DURABLE_DIRECT_NONE:
			return false;
		case DURABLE_DIRECT_BY_STATEMENT:
			break;
	}
	res = DurableRun(DurableDistributed() ? &DurableFinishStatement : &finish_statement,
					 args, nulls, SPI_OK_SELECT, 0);
	if (res.rows != 1)
		return false;
	if (!DurableDistributed())
		move_steps(task_id, now);
	finished->moved.queue = DurableGetText(res, 0, FINISHED_QUEUE);
	finished->moved.owner = DurableGetText(res, 0, FINISHED_OWNER);
	finished->moved.restricted = !DurableGetIsNull(res, 0, FINISHED_RESTRICTED) &&
		DurableGetBool(res, 0, FINISHED_RESTRICTED);
	finished->parent_id = DurableGetIsNull(res, 0, FINISHED_PARENT) ? 0 :
		DurableGetInt64(res, 0, FINISHED_PARENT);
	finished->waits = DurableGetIsNull(res, 0, FINISHED_WAITS) ? NULL :
		DatumGetJsonbP(DurableGetDatum(res, 0, FINISHED_WAITS, &isnull));
	finished->has_claimed_at = !DurableGetIsNull(res, 0, FINISHED_CLAIMED_AT);
	if (finished->has_claimed_at)
		finished->claimed_at = DatumGetTimestampTz(DurableGetDatum(res, 0, FINISHED_CLAIMED_AT,
																   &isnull));
	finished->attempt = DurableGetInt32(res, 0, FINISHED_ATTEMPT);
	count_finish(task_id, finished, move, now);
	return true;
}

/*
 * count_finish
 *		What a finish counts: the task by its end, its last lease's run
 *		time, and its recovery.
 */
static void
count_finish(int64 task_id, const DurableFinished *finished, const DurableMove *move,
			 TimestampTz now)
{
	const char *queue = finished->moved.queue;

	DurableCount(queue, move->to_state == DURABLE_TASK_COMPLETED ? DURABLE_COUNT_COMPLETED :
				 move->to_state == DURABLE_TASK_CANCELLED ? DURABLE_COUNT_CANCELLED :
				 DURABLE_COUNT_DEAD_LETTERED, 1);
	if (finished->has_claimed_at)
		DurableObserve(queue, DURABLE_HIST_RUN_TIME, now - finished->claimed_at);
	DurableCountRecovery(queue, task_id, finished->attempt,
						 move->to_state == DURABLE_TASK_COMPLETED, now);
}

/* when a task's lease first expired, from its events */
enum
{
	EXPIRY_PARTITION,
	EXPIRY_TASK_ID,
	EXPIRY_NPARAMS
};
static const DurableParam first_expiry_params[EXPIRY_NPARAMS] = {
	[EXPIRY_PARTITION] = {"partition", INT4OID},
	[EXPIRY_TASK_ID] = {"task_id", INT8OID},
};
static const DurableColumn first_expiry_columns[] = {
	{"first_expiry", TIMESTAMPTZOID},
};
static DurableStatement first_expiry = {
	.name = "first_expiry",
	.sql = "SELECT min(at) AS first_expiry FROM durable.event_log"
	" WHERE partition_key = $partition AND task_id = $task_id"
	" AND kind = 'lease_expired' AND detail->>'action' IS DISTINCT FROM '" DURABLE_NOT_BEGUN "'",
	DURABLE_PARAMS(first_expiry_params),
	DURABLE_COLUMNS(first_expiry_columns),
	.by_partition = true,
};

/*
 * DurableCountRecovery
 *		Count a finished task that had lost a lease, and if it completed,
 *		the time from its first expired lease.  A task whose lease expired
 *		after it began was claimed again to finish (such an expiry gives no
 *		attempt back), so only a task of more than one attempt is looked up
 *		in its events: the common finish reads nothing more.  A lease that
 *		ran out before its task began (begin.c) lost nothing to recover.
 */
void
DurableCountRecovery(const char *queue, int64 task_id, int32 attempt,
					 bool completed, TimestampTz now)
{
	Datum		args[EXPIRY_NPARAMS];
	DurableResult res;
	bool		isnull;
	Datum		expired_at;

	if (attempt < 2 || !DurableCountersAvailable() || !durable_counting)
		return;
	args[EXPIRY_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[EXPIRY_TASK_ID] = Int64GetDatum(task_id);
	res = DurableRun(&first_expiry, args, NULL, SPI_OK_SELECT, 1);
	expired_at = DurableGetDatum(res, 0, 0, &isnull);
	if (isnull)
		return;
	DurableCount(queue, DURABLE_COUNT_FINISHED_AFTER_EXPIRY, 1);
	if (!completed)
		return;
	DurableCount(queue, DURABLE_COUNT_RECOVERED, 1);
	DurableObserve(queue, DURABLE_HIST_RECOVERY_TIME,
				   now - DatumGetTimestampTz(expired_at));
}
