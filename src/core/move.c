/*-------------------------------------------------------------------------
 *
 * move.c
 *	  Moving a task between states under a fence, and what a finish owes
 *	  the task's family: waking a parent that joins it, cancelling a
 *	  cancelled task's children or sending them to review.
 *
 * Fencing: a write names the fence it was given by its claim.  Every move
 * re-checks fence and state in the UPDATE's own WHERE clause, so a write
 * that waited for the row lock of a reconciler or of another worker sees
 * the row as that transaction left it, and finds nothing to update when it
 * lost.  Only then is the row read again to say why (DurableReportRefusal
 * in task.c), in the caller's transaction, so the caller's own writes roll
 * back with the error.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "core/row.h"
#include "core/sql.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* the row a move takes, by the parameters of transition */
#define MOVE_WHERE \
	" WHERE partition_key = $partition AND task_id = $task_id AND fence = $fence" \
	" AND state = $from_state::durable.task_state AND steps_in_doubt <= $max_in_doubt"

/*
 * What a move returns.  Whether the task's queue is restricted is read by
 * joining durable.queues in the statement's last SELECT, not in RETURNING:
 * on Citus, RETURNING runs on the shard, where no other table may be read.
 */
#define MOVE_RETURNING \
	" RETURNING partition_key, task_id, version, fence, state, owner, queue_name"

/*
 * The parameters of a move, which transition, finish and revive share (and
 * row.h's expressions name): the partition first, as a statement of one
 * partition must declare it.  Delegated on Citus, transition and finish
 * send their values in this order (store/delegate.c).
 */
enum
{
	MOVE_PARTITION,
	MOVE_TASK_ID,
	MOVE_FENCE,
	MOVE_FROM_STATE,
	MOVE_TO_STATE,
	MOVE_REVOKE,
	MOVE_RUN_AT,
	MOVE_STOP_CODE,
	MOVE_ERROR,
	MOVE_RESULT,
	MOVE_NOW,
	MOVE_KIND,
	MOVE_ACTOR,
	MOVE_DETAIL,
	MOVE_MAX_IN_DOUBT,
	MOVE_RESET_ATTEMPTS,
	MOVE_ROLE,
	MOVE_GIVE_BACK_ATTEMPT,
	MOVE_NPARAMS
};
static const DurableParam move_params[MOVE_NPARAMS] = {
	[MOVE_PARTITION] = {"partition", INT4OID},
	[MOVE_TASK_ID] = {"task_id", INT8OID},
	[MOVE_FENCE] = {"fence", INT8OID},
	[MOVE_FROM_STATE] = {"from_state", TEXTOID},
	[MOVE_TO_STATE] = {"to_state", TEXTOID},
	/* what the fence grows by: 1 when the move revokes a lease */
	[MOVE_REVOKE] = {"revoke", INT8OID},
	[MOVE_RUN_AT] = {"run_at", TIMESTAMPTZOID},
	[MOVE_STOP_CODE] = {"stop_code", TEXTOID},
	[MOVE_ERROR] = {"error", JSONBOID},
	[MOVE_RESULT] = {"result", JSONBOID},
	[MOVE_NOW] = {"now", TIMESTAMPTZOID},
	[MOVE_KIND] = {"kind", TEXTOID},
	[MOVE_ACTOR] = {"actor", TEXTOID},
	[MOVE_DETAIL] = {"detail", JSONBOID},
	/* the most steps in doubt the task may have for the move */
	[MOVE_MAX_IN_DOUBT] = {"max_in_doubt", INT4OID},
	[MOVE_RESET_ATTEMPTS] = {"reset_attempts", BOOLOID},
	[MOVE_ROLE] = {"role", TEXTOID},
	[MOVE_GIVE_BACK_ATTEMPT] = {"give_back_attempt", BOOLOID},
};

/* the changes of a move (the parameters of transition) */
#define MOVE_SET \
	" state = $to_state::durable.task_state, fence = fence + $revoke," \
	" version = version + 1," \
	" run_at = COALESCE($run_at, run_at), stop_code = $stop_code," \
	" last_error = COALESCE($error, last_error), result = COALESCE($result, result)," \
	" attempt = " MOVED_ATTEMPT ", lease = NULL, lease_until = NULL"

/* a lease's column given as a parameter, when the move ends the lease */
#define ENDS_LEASE_PARAM(param) "CASE WHEN $from_state = 'running' THEN " param " END"

/* queue, owner and whether the queue is restricted, after a move */
#define MOVED_QUEUE(seq, queue, owner) \
	"SELECT " seq "::pg_catalog.int4 AS seq, " queue "::text AS queue_name," \
	" " owner "::text AS owner," \
	" q.restricted FROM (SELECT) x" \
	" LEFT JOIN durable.queues q ON q.queue_name = " queue

static bool finish_task(int64 task_id, const DurableMove *move, Datum *args,
						const char *nulls, TimestampTz now, DurableFinished *finished);
static void count_finish(const DurableFinished *finished, const DurableMove *move,
						 TimestampTz now);
static void family_of_finished(const DurableFinished *finished, int64 task_id,
							   const DurableMove *move, TimestampTz now);
static void cancel_child(int64 child_id, int64 parent_id, TimestampTz now);

/*
 * The columns of a move: transition and revive return the event's seq,
 * finish the task's version (its last event), and what it owes its family.
 */
enum
{
	MOVED_SEQ,
	MOVED_QUEUE,
	MOVED_OWNER,
	MOVED_RESTRICTED,
	MOVED_NCOLUMNS
};

static const DurableColumn moved_columns[MOVED_NCOLUMNS] = {
	[MOVED_SEQ] = {"seq", INT4OID},
	[MOVED_QUEUE] = {"queue_name", TEXTOID},
	[MOVED_OWNER] = {"owner", TEXTOID},
	[MOVED_RESTRICTED] = {"restricted", BOOLOID},
};

enum
{
	FINISHED_VERSION,
	FINISHED_QUEUE,
	FINISHED_OWNER,
	FINISHED_RESTRICTED,
	FINISHED_PARENT,
	FINISHED_WAITS,
	FINISHED_CLAIMED_AT,
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
};

DurableStatement DurableTransitionStatement = {
	.name = "transition",
	.sql = "WITH u AS (UPDATE durable.live_tasks SET"
	"  state = $to_state::durable.task_state,"
	"  fence = fence + $revoke,"
	"  version = version + 1,"
	"  run_at = COALESCE($run_at, run_at),"
	"  stop_code = $stop_code,"
	"  last_error = COALESCE($error, last_error),"
	"  result = COALESCE($result, result),"
	"  attempt = " MOVED_ATTEMPT ","
	"  lease = NULL, lease_until = NULL"
	MOVE_WHERE
	MOVE_RETURNING ","
	"  claimed_at, claim_seq, claim_kind, claim_role),"
	" e AS (INSERT INTO durable.event_log (partition_key, task_id, seq, state,"
	"  fence, at, kind, actor, detail, role, lease_seq, lease_fence, lease_at,"
	"  lease_kind, lease_actor, lease_role)"
	"  SELECT partition_key, task_id, version, state, fence, $now, $kind,"
	"  COALESCE($actor, owner), $detail, $role, " ENDS_LEASE("claim_seq") ","
	"  " ENDS_LEASE("fence - $revoke") ", " ENDS_LEASE("claimed_at") ","
	"  " ENDS_LEASE("claim_kind") ", " ENDS_LEASE("owner") ","
	"  " ENDS_LEASE("claim_role") " FROM u"
	"  RETURNING seq)"
	" SELECT e.seq, u.queue_name, u.owner, q.restricted FROM u CROSS JOIN e"
	QUEUE_OF_U,
	DURABLE_PARAMS(move_params),
	DURABLE_COLUMNS(moved_columns),
	.by_partition = true,
	.delegated = true,
	.nsplit = 3,
	.split = {
	/* $19.. partition_key, task_id, version, fence, state, owner, queue_name,
	 * claimed_at, claim_seq, claim_kind, claim_role: the first step's row,
	 * after the 18 parameters */
	{"UPDATE durable.live_tasks SET" MOVE_SET MOVE_WHERE
		" RETURNING partition_key, task_id, version, fence, state, owner,"
		" queue_name, claimed_at, claim_seq, claim_kind, claim_role",
	DURABLE_SPLIT_NO_INPUT, true, true},
	{"INSERT INTO durable.event_log (partition_key, task_id, seq, state, fence,"
		" at, kind, actor, detail, role, lease_seq, lease_fence, lease_at,"
		" lease_kind, lease_actor, lease_role)"
		" VALUES ($19, $20, $21, $23, $22, $now, $kind, COALESCE($actor, $24),"
		" $detail, $role,"
		" " ENDS_LEASE_PARAM("$27") ", " ENDS_LEASE_PARAM("$22 - $revoke") ","
		" " ENDS_LEASE_PARAM("$26") ", " ENDS_LEASE_PARAM("$28") ","
		" " ENDS_LEASE_PARAM("$24") ", " ENDS_LEASE_PARAM("$29") ")"
		" RETURNING seq, $25::text, $24::text",
	0, true, true},
	{MOVED_QUEUE("$19", "$20", "$21"), 1, true, true},
	},
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
	MOVE_RETURNING ", parent_id, waits, claimed_at)"
#define FINISHED_SELECT \
	" SELECT u.version, u.queue_name, u.owner, q.restricted, u.parent_id," \
	" u.waits, u.claimed_at FROM u" QUEUE_OF_U
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
		" RETURNING version, queue_name, owner, parent_id, waits, claimed_at",
	0, true, true},
	{"DELETE FROM durable.live_steps WHERE partition_key = $partition AND task_id = $task_id"
		" RETURNING " STEP_TABLE_COLUMNS,
	DURABLE_SPLIT_NO_INPUT, false, true},
	{"INSERT INTO durable.step_history (" STEP_HISTORY_COLUMNS ")"
		" VALUES ($*, $now)",
	2, false, true},
	{"SELECT $19::int4 AS version, $20::text AS queue_name, $21::text AS owner,"
		" q.restricted, $22::int8 AS parent_id, $23::pg_catalog.jsonb AS waits,"
		" $24::pg_catalog.timestamptz AS claimed_at"
		" FROM (SELECT) x LEFT JOIN durable.queues q ON q.queue_name = $20",
	1, true, true},
	},
};

static DurableStatement revive = {
	.name = "revive",
	.sql = "WITH d AS (DELETE FROM durable.task_history" MOVE_WHERE " RETURNING *),"
	/* the row was the task's last event: it becomes one of the log */
	" f AS (INSERT INTO durable.event_log (partition_key, task_id, seq, state,"
	"  fence, at, kind, actor, detail, role, lease_seq, lease_fence, lease_at,"
	"  lease_kind, lease_actor, lease_role)"
	"  SELECT partition_key, task_id, version, state, fence, finished_at,"
	"  final_kind, final_actor, final_detail, final_role, claim_seq,"
	"  claim_fence, claimed_at, claim_kind, owner, claim_role FROM d"
	"  WHERE final_kind IS NOT NULL),"
	" u AS (INSERT INTO durable.live_tasks (" TASK_TABLE_COLUMNS ")"
	"  SELECT " REVIVED_TASK_ROW " FROM d"
	MOVE_RETURNING "),"
	" s AS (DELETE FROM durable.step_history s USING d"
	"  WHERE s.partition_key = d.partition_key AND s.task_id = d.task_id"
	"  RETURNING s.*),"
	" l AS (INSERT INTO durable.live_steps (" STEP_TABLE_COLUMNS ")"
	"  SELECT " STEP_TABLE_COLUMNS " FROM s),"
	" e AS (INSERT INTO durable.event_log (partition_key, task_id, seq, state,"
	"  fence, at, kind, actor, detail, role)"
	"  SELECT partition_key, task_id, version, state, fence, $now, $kind,"
	"  COALESCE($actor, owner), $detail, $role FROM u"
	"  RETURNING seq)"
	" SELECT e.seq, u.queue_name, u.owner, q.restricted FROM u CROSS JOIN e"
	QUEUE_OF_U,
	DURABLE_PARAMS(move_params),
	DURABLE_COLUMNS(moved_columns),
	DURABLE_ROW_TABLES,
};

/* on one server, after the task's row: its steps to history, if any */
static void
move_steps(int64 task_id, TimestampTz now)
{
	Datum		args[STEPS_NPARAMS];

	args[STEPS_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[STEPS_TASK_ID] = Int64GetDatum(task_id);
	if (!DurableReadByKey(&live_step_read, args, NULL, NULL))
		return;
	args[STEPS_NOW] = TimestampTzGetDatum(now);
	DurableRun(&finish_steps, args, NULL, SPI_OK_INSERT, 0);
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
	DurableResult res;
	Datum		args[MOVE_NPARAMS];
	char		nulls[MOVE_NPARAMS];
	DurableStatement *stmt;

	/*
	 * A task goes back to the claims only with no step in doubt, whatever
	 * the caller allows: the row's own count decides, in the statement.
	 */
	bool		releases = move->to_state == DURABLE_TASK_READY ||
		(move->to_state == DURABLE_TASK_WAITING &&
		 move->run_at != DURABLE_AWAITING_RECONCILE);

	memset(nulls, ' ', sizeof(nulls));
	args[MOVE_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task->task_id));
	args[MOVE_TASK_ID] = Int64GetDatum(task->task_id);
	args[MOVE_FENCE] = Int64GetDatum(move->fence);
	args[MOVE_FROM_STATE] = CStringGetTextDatum(DurableTaskStateName(move->from_state));
	args[MOVE_TO_STATE] = CStringGetTextDatum(DurableTaskStateName(move->to_state));
	args[MOVE_REVOKE] = Int64GetDatum(move->revoke ? 1 : 0);
	args[MOVE_RUN_AT] = TimestampTzGetDatum(move->run_at);
	nulls[MOVE_RUN_AT] = move->run_at == 0 ? 'n' : ' ';
	args[MOVE_STOP_CODE] = move->stop_code ? CStringGetTextDatum(move->stop_code) : (Datum) 0;
	nulls[MOVE_STOP_CODE] = move->stop_code ? ' ' : 'n';
	args[MOVE_ERROR] = JsonbPGetDatum(move->error);
	nulls[MOVE_ERROR] = move->error ? ' ' : 'n';
	args[MOVE_RESULT] = JsonbPGetDatum(move->result);
	nulls[MOVE_RESULT] = move->result ? ' ' : 'n';
	args[MOVE_NOW] = TimestampTzGetDatum(now);
	args[MOVE_KIND] = CStringGetTextDatum(move->kind);
	args[MOVE_ACTOR] = move->actor ? CStringGetTextDatum(move->actor) : (Datum) 0;
	nulls[MOVE_ACTOR] = move->actor ? ' ' : 'n';
	args[MOVE_DETAIL] = JsonbPGetDatum(move->detail);
	nulls[MOVE_DETAIL] = move->detail ? ' ' : 'n';
	args[MOVE_MAX_IN_DOUBT] = Int32GetDatum(move->allow_doubt && !releases ? PG_INT32_MAX : 0);
	args[MOVE_RESET_ATTEMPTS] = BoolGetDatum(move->reset_attempts);
	args[MOVE_ROLE] = CStringGetTextDatum(DurableCallerName());
	args[MOVE_GIVE_BACK_ATTEMPT] = BoolGetDatum(move->give_back_attempt);

	/* a task that finishes moves to history; a replayed one comes back */
	if (DurableTaskIsTerminal(move->to_state))
	{
		DurableFinished finished;

		if (!finish_task(task->task_id, move, args, nulls, now, &finished))
			return false;
		count_finish(&finished, move, now);
		if (moved != NULL)
			*moved = finished.moved;
		family_of_finished(&finished, task->task_id, move, now);
		return true;
	}
	stmt = DurableTaskIsTerminal(move->from_state) ? &revive : &DurableTransitionStatement;
	res = DurableRun(stmt, args, nulls, SPI_OK_SELECT, 0);
	if (res.rows != 1)
		return false;
	if (move->to_state == DURABLE_TASK_NEEDS_REVIEW)
		DurableCount(DurableGetText(res, 0, MOVED_QUEUE), DURABLE_COUNT_SENT_TO_REVIEW, 1);
	if (moved != NULL)
	{
		moved->queue = DurableGetText(res, 0, MOVED_QUEUE);
		moved->owner = DurableGetText(res, 0, MOVED_OWNER);
		moved->restricted = !DurableGetIsNull(res, 0, MOVED_RESTRICTED) &&
			DurableGetBool(res, 0, MOVED_RESTRICTED);
	}
	return true;
}

/*
 * finish_task
 *		Move a finishing task's row to history, and its steps: on one server
 *		through the access methods (finish_direct.c) unless the tables must
 *		be written by statements, on Citus by one delegated call.  Returns
 *		false when the task is not as move requires.
 */
static bool
finish_task(int64 task_id, const DurableMove *move, Datum *args, const char *nulls,
			TimestampTz now, DurableFinished *finished)
{
	DurableResult res;
	bool		isnull;

	DurableEnsureHistoryDays(now);
	if (!DurableDistributed())
	{
		/*
		 * The row is restated column by column, as by the statement: its
		 * tables are checked before and after, as DurableRun checks them.
		 */
		DurableCheckTables(&finish_statement);
		switch (DurableFinishDirectly(task_id, move, now, finished))
		{
			case DURABLE_DIRECT_DONE:
				DurableCheckTables(&finish_statement);
				move_steps(task_id, now);
				return true;
			case DURABLE_DIRECT_NONE:
				return false;
			case DURABLE_DIRECT_BY_STATEMENT:
				break;
		}
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
	return true;
}

/*
 * count_finish
 *		What a finish counts: the task by its end, and its last lease's run
 *		time.
 */
static void
count_finish(const DurableFinished *finished, const DurableMove *move, TimestampTz now)
{
	const char *queue = finished->moved.queue;

	DurableCount(queue, move->to_state == DURABLE_TASK_COMPLETED ? DURABLE_COUNT_COMPLETED :
				 move->to_state == DURABLE_TASK_CANCELLED ? DURABLE_COUNT_CANCELLED :
				 DURABLE_COUNT_DEAD_LETTERED, 1);
	if (finished->has_claimed_at)
		DurableObserve(queue, DURABLE_HIST_RUN_TIME, now - finished->claimed_at);
}

enum
{
	DROP_TASK_ID,
	DROP_NPARAMS
};
static const DurableParam event_waits_drop_params[DROP_NPARAMS] = {
	[DROP_TASK_ID] = {"task_id", INT8OID},
};
static DurableStatement event_waits_drop = {
	.name = "event_waits_drop",
	.sql = "DELETE FROM durable.event_waits WHERE task_id = $task_id",
	DURABLE_PARAMS(event_waits_drop_params),
};

/* the children a task spawned, from its waits */
enum
{
	SPAWNED_CHILDREN,
	SPAWNED_NCOLUMNS
};

static const DurableColumn spawned_columns[SPAWNED_NCOLUMNS] = {
	[SPAWNED_CHILDREN] = {"children", INT8ARRAYOID},
};

enum
{
	SPAWNED_WAITS,
	SPAWNED_NPARAMS
};
static const DurableParam spawned_params[SPAWNED_NPARAMS] = {
	[SPAWNED_WAITS] = {"waits", JSONBOID},
};
static DurableStatement spawned_children = {
	.name = "spawned_children",
	.sql = "SELECT pg_catalog.array_agg((w.value ->> 'task_id')::int8) AS children"
	" FROM pg_catalog.jsonb_each($waits) w WHERE w.value ->> 'kind' = 'spawn'",
	DURABLE_PARAMS(spawned_params),
	DURABLE_COLUMNS(spawned_columns),
};

/*
 * family_of_finished
 *		What a task that has just finished owes its family: a parent
 *		waiting for it may wake, and a cancelled task's unfinished children
 *		are cancelled with it; and the awaits it had registered go.
 */
static void
family_of_finished(const DurableFinished *finished, int64 task_id,
				   const DurableMove *move, TimestampTz now)
{
	bool		isnull;
	Datum	   *children = NULL;
	int			nchildren = 0;

	/* a task without waits, as most are, has no children and no awaits */
	if (finished->waits != NULL)
	{
		Datum		id = Int64GetDatum(task_id);
		Datum		waits = JsonbPGetDatum(finished->waits);
		DurableResult spawned = {0};

		if (move->to_state == DURABLE_TASK_CANCELLED)
			spawned = DurableRun(&spawned_children, &waits, NULL, SPI_OK_SELECT, 1);
		if (spawned.rows == 1 && !DurableGetIsNull(spawned, 0, SPAWNED_CHILDREN))
			deconstruct_array(DatumGetArrayTypeP(DurableGetDatum(spawned, 0, SPAWNED_CHILDREN,
																 &isnull)),
							  INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
							  TYPALIGN_DOUBLE, &children, NULL, &nchildren);
		/* an await it gave up on waits for nothing now */
		DurableRun(&event_waits_drop, &id, NULL, SPI_OK_DELETE, 0);
	}
	if (finished->parent_id != 0)
		DurableWakeParent(finished->parent_id, task_id, now);
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
	uint64		n;
	char	  **names = DurableUnsettledSteps(child, &n);

	for (uint64 i = 0; i < n; i++)
	{
		DurableStep step;

		DurableStepFetchOrError(child, names[i], &step);
		if (step.state == DURABLE_STEP_STARTED)
			DurableSettleStep(child, &step, DURABLE_RECOVERY_MANUAL_REVIEW,
							  actor, NULL, NULL, now);
	}

	DurableDetailInit(&detail);
	DurableDetailText(&detail, "reason", "its parent was cancelled");
	DurableDetailInt(&detail, "parent", parent_id);
	DurableDetailText(&detail, "cancelled_by", actor);
	DurableDetailText(&detail, "previous_state", DurableTaskStateName(child->state));
	DurableDetailInt(&detail, "steps_in_doubt", child->steps_in_doubt);
	DurableDetailText(&detail, "action",
					  DurableRecoveryActionName(DURABLE_RECOVERY_MANUAL_REVIEW));
	move.from_state = child->state;
	move.fence = child->fence;
	move.to_state = DURABLE_TASK_NEEDS_REVIEW;
	move.revoke = child->state == DURABLE_TASK_RUNNING;
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
		child.state == DURABLE_TASK_NEEDS_REVIEW)
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
	DurableDetailText(&detail, "previous_state", DurableTaskStateName(task->state));
	move.from_state = task->state;
	move.fence = task->fence;
	move.to_state = DURABLE_TASK_CANCELLED;
	move.revoke = task->state == DURABLE_TASK_RUNNING;
	move.allow_doubt = true;
	move.kind = "cancelled";
	move.actor = DurableCallerName();
	move.detail = DurableDetailFinish(&detail);
	DurableMoveLockedTask(task, &move, now);
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
	DurableCheckTaskAccess(task_id, moved.queue, moved.restricted);
}
