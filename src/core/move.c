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
#include "core/move.h"
#include "core/row.h"
#include "core/sql.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* the changes of a move (the parameters of transition) */
#define MOVE_SET \
	" state = $to_state::durable.task_state, fence = fence + $revoke," \
	" version = version + 1," \
	" run_at = COALESCE($run_at, run_at), stop_code = $stop_code," \
	" last_error = COALESCE($error, last_error), result = COALESCE($result, result)," \
	" attempt = " MOVED_ATTEMPT ", lease = NULL, lease_until = NULL," \
	" fair_pass = " UNADMITTED("fair_pass")

/* a lease's column given as a parameter, when the move ends the lease */
#define ENDS_LEASE_PARAM(param) "CASE WHEN $from_state = 'running' THEN " param " END"

/* queue, owner and whether the queue is restricted, after a move */
#define MOVED_QUEUE(seq, queue, owner) \
	"SELECT " seq "::pg_catalog.int4 AS seq, " queue "::text AS queue_name," \
	" " owner "::text AS owner," \
	" q.restricted FROM (SELECT) x" \
	" LEFT JOIN durable.queues q ON q.queue_name = " queue

static void family_of_finished(const DurableFinished *finished, int64 task_id,
							   const DurableMove *move, TimestampTz now);
static void cancel_child(int64 child_id, int64 parent_id, TimestampTz now);
static void moved_task(const DurableMove *move, const DurableMoved *task,
					   DurableMoved *moved);

/*
 * The columns of a transition and a revive: the event's seq, and the
 * task's queue, owner and restriction (a finish's are finish.c's).
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

DurableStatement DurableTransitionStatement = {
	.name = "transition",
	.sql = "WITH u AS (UPDATE durable.live_tasks SET" MOVE_SET
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
	DurableMoved row;

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

		if (!DurableFinishTask(task->task_id, move, args, nulls, now, &finished))
			return false;
		DurableSpendSettleTask(task, now);
		if (moved != NULL)
			*moved = finished.moved;
		family_of_finished(&finished, task->task_id, move, now);
		return true;
	}
	if (!DurableTaskIsTerminal(move->from_state) && !DurableDistributed())
	{
		switch (DurableTransitionDirectly(task->task_id, move,
										  DatumGetInt32(args[MOVE_MAX_IN_DOUBT]),
										  now, &row))
		{
			case DURABLE_DIRECT_DONE:
				moved_task(move, &row, moved);
				return true;
			case DURABLE_DIRECT_NONE:
				return false;
			case DURABLE_DIRECT_BY_STATEMENT:
				break;
		}
	}
	stmt = DurableTaskIsTerminal(move->from_state) ? &revive : &DurableTransitionStatement;
	res = DurableRun(stmt, args, nulls, SPI_OK_SELECT, 0);
	if (res.rows != 1)
		return false;
	row.queue = DurableGetText(res, 0, MOVED_QUEUE);
	row.owner = DurableGetText(res, 0, MOVED_OWNER);
	row.restricted = !DurableGetIsNull(res, 0, MOVED_RESTRICTED) &&
		DurableGetBool(res, 0, MOVED_RESTRICTED);
	moved_task(move, &row, moved);
	return true;
}

/* what a move to a live state counts, and tells its caller */
static void
moved_task(const DurableMove *move, const DurableMoved *task, DurableMoved *moved)
{
	if (move->to_state == DURABLE_TASK_NEEDS_REVIEW)
		DurableCount(task->queue, DURABLE_COUNT_SENT_TO_REVIEW, 1);
	if (moved != NULL)
		*moved = *task;
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
							  actor, NULL, NULL, NULL, now);
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
	/* known by its id alone: its worker holds no step in doubt (spend.c) */
	DurableTask task = {.task_id = task_id};
	DurableMoved moved;

	if (!DurableMoveTask(&task, move, now, &moved))
		DurableReportRefusal(task_id, move->fence);
	DurableCheckTaskAccess(task_id, moved.queue, moved.restricted);
}
