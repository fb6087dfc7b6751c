/*-------------------------------------------------------------------------
 *
 * commit.c
 *	  A worker's end of a task it holds: commit (one, a batch, or one and
 *	  the next claims), failure by the decision table, and cancellation.
 *
 * Every write names the fence of the claim and is refused with the error
 * that explains it (DurableReportRefusal) when the task is no longer
 * running under that fence.  Times come from the transaction start time.
 * The SQL functions are api/tasks.c's; a step's commit or failure is
 * step.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "core/row.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/*
 * DurableCommitTask
 *		Complete a running task held under fence and store its result (or
 *		keep it, for NULL), refusing (55U04) while one of its steps is
 *		started or unknown.  Raises 55U01 for a stale fence, 42704 for an
 *		unknown task.
 */
void
DurableCommitTask(int64 task_id, int64 fence, Jsonb *result)
{
	DurableMove move = {0};

	move.fence = fence;
	move.result = result;
	move.from_state = DURABLE_TASK_RUNNING;
	move.to_state = DURABLE_TASK_COMPLETED;
	move.kind = "completed";
	DurableMoveTaskFenced(task_id, &move, GetCurrentTransactionStartTimestamp());
}

/*
 * DurableCommitAndClaim
 *		Complete a task as DurableCommitTask does, then claim up to batch
 *		ready tasks of its queue into store, for worker or, when NULL, the
 *		task's owner, that runs runs (or did not say, NULL).  When the
 *		commit is refused nothing is claimed.
 */
void
DurableCommitAndClaim(int64 task_id, int64 fence, Jsonb *result,
					  const char *worker, Interval *lease, int batch,
					  Jsonb *runs, Tuplestorestate *store, TupleDesc desc)
{
	DurableTask task = {.task_id = task_id};
	DurableMove move = {0};
	DurableMoved moved;

	move.fence = fence;
	move.result = result;
	move.from_state = DURABLE_TASK_RUNNING;
	move.to_state = DURABLE_TASK_COMPLETED;
	move.kind = "completed";
	if (!DurableMoveTask(&task, &move, GetCurrentTransactionStartTimestamp(),
						 &moved))
		DurableReportRefusal(task_id, move.fence);
	DurableCheckTaskAccess(task_id, moved.queue, moved.restricted);
	if (worker == NULL)
		worker = moved.owner;
	DurableClaim(DURABLE_CLAIM_READY, moved.queue, worker, lease, batch, runs,
				 store, desc);
}

static int
compare_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/*
 * commit_each
 *		durable_commit_batch on Citus: each task as durable_commit commits
 *		it, so that each runs on its own shard (one statement on many would
 *		run on every shard); a refusal rolls back the whole batch as there.
 */
static void
commit_each(ArrayType *ids, ArrayType *fences, ArrayType *results)
{
	Datum	   *id_values;
	Datum	   *fence_values;
	Datum	   *result_values = NULL;
	bool	   *result_nulls = NULL;
	int64	   *sorted;
	int32	   *keys;
	int		   *order;
	int		   *bounds;
	int			n;
	TimestampTz now = GetCurrentTransactionStartTimestamp();

	deconstruct_array(ids, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
					  &id_values, NULL, &n);
	deconstruct_array(fences, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
					  &fence_values, NULL, &n);
	if (results != NULL)
		deconstruct_array(results, JSONBOID, -1, false, TYPALIGN_INT,
						  &result_values, &result_nulls, &n);
	sorted = palloc(sizeof(int64) * n);
	for (int i = 0; i < n; i++)
		sorted[i] = DatumGetInt64(id_values[i]);
	qsort(sorted, n, sizeof(int64), compare_int64);
	for (int i = 1; i < n; i++)
		if (sorted[i] == sorted[i - 1])
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("a task appears more than once in task_ids"));

	/* node by node, this node's first: one connection per node at a time */
	keys = palloc(sizeof(int32) * Max(n, 1));
	order = palloc(sizeof(int) * (n + 1));
	bounds = palloc(sizeof(int) * (n + 1));
	for (int i = 0; i < n; i++)
		keys[i] = DURABLE_TASK_PARTITION(DatumGetInt64(id_values[i]));
	(void) DurableGroupByShard(keys, n, order, bounds);

	for (int k = 0; k < n; k++)
	{
		DurableMove move = {0};
		int			i = order[k];

		move.fence = DatumGetInt64(fence_values[i]);
		move.result = result_values && !result_nulls[i] ?
			DatumGetJsonbP(result_values[i]) : NULL;
		move.from_state = DURABLE_TASK_RUNNING;
		move.to_state = DURABLE_TASK_COMPLETED;
		move.kind = "completed";
		DurableMoveTaskFenced(DatumGetInt64(id_values[i]), &move, now);
	}
}

/* a row per task of a batch just committed */
enum
{
	COMMITTED_TASK_ID,
	COMMITTED_QUEUE,
	COMMITTED_RESTRICTED,
	COMMITTED_PARENT,
	COMMITTED_CLAIMED_AT,
	COMMITTED_ATTEMPT,
	COMMITTED_NCOLUMNS
};

static const DurableColumn committed_columns[COMMITTED_NCOLUMNS] = {
	[COMMITTED_TASK_ID] = {"task_id", INT8OID},
	[COMMITTED_QUEUE] = {"queue_name", TEXTOID},
	[COMMITTED_RESTRICTED] = {"restricted", BOOLOID},
	[COMMITTED_PARENT] = {"parent_id", INT8OID},
	[COMMITTED_CLAIMED_AT] = {"claimed_at", TIMESTAMPTZOID},
	[COMMITTED_ATTEMPT] = {"attempt", INT4OID},
};

enum
{
	BATCH_TASK_IDS,
	BATCH_FENCES,
	BATCH_RESULTS,
	BATCH_NOW,
	BATCH_ROLE,
	BATCH_NPARAMS
};
static const DurableParam commit_batch_params[BATCH_NPARAMS] = {
	[BATCH_TASK_IDS] = {"task_ids", INT8ARRAYOID},
	[BATCH_FENCES] = {"fences", INT8ARRAYOID},
	[BATCH_RESULTS] = {"results", JSONBARRAYOID},
	[BATCH_NOW] = {"now", TIMESTAMPTZOID},
	[BATCH_ROLE] = {"role", TEXTOID},
};
static DurableStatement commit_batch = {
	.name = "commit_batch",
	.sql = "WITH i AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($task_ids::int8[]),"
	"  pg_catalog.unnest($fences::int8[]), pg_catalog.unnest($results::jsonb[]))"
	"  AS i(task_id, fence, result)),"
	" d AS (DELETE FROM durable.live_tasks t USING i"
	"  WHERE t.partition_key = (i.task_id & " CppAsString2(DURABLE_PARTITION_MASK) ")::int4"
	"  AND t.task_id = i.task_id AND t.fence = i.fence"
	"  AND t.state = 'running' AND t.steps_in_doubt = 0"
	"  RETURNING t.*, i.result AS committed_result),"
	" u AS (INSERT INTO durable.task_history (" TASK_TABLE_COLUMNS ")"
	"  SELECT " COMMITTED_TASK_ROW " FROM d"
	"  RETURNING task_id, queue_name, parent_id, claimed_at, attempt),"
	" s AS (DELETE FROM durable.live_steps s USING d"
	"  WHERE s.partition_key = d.partition_key AND s.task_id = d.task_id"
	"  RETURNING s.*),"
	/* finished_at, step_history's one column more, is the commit's time */
	" h AS (INSERT INTO durable.step_history (" STEP_HISTORY_COLUMNS ")"
	"  SELECT " STEP_TABLE_COLUMNS ", $now FROM s)"
	" SELECT u.task_id, u.queue_name, q.restricted, u.parent_id, u.claimed_at, u.attempt"
	" FROM u"
	" JOIN durable.queues q ON q.queue_name = u.queue_name",
	DURABLE_PARAMS(commit_batch_params),
	DURABLE_COLUMNS(committed_columns),
	DURABLE_ROW_TABLES,
};

/*
 * DurableCommitBatch
 *		Complete n (at least one) running tasks, each under its own fence,
 *		with results (NULL for none, else one per task), in one statement;
 *		all or none: any task that cannot be committed raises what
 *		DurableCommitTask would raise for it, and nothing is committed.  A
 *		parent waiting for a committed child may wake.
 */
void
DurableCommitBatch(ArrayType *ids, ArrayType *fences, ArrayType *results, int n)
{
	DurableResult res;
	Datum		args[BATCH_NPARAMS];
	char		nulls[BATCH_NPARAMS] = {' ', ' ', ' ', ' ', ' '};
	uint64		done;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	char	  **queues;
	bool	   *restricted;
	int64	   *committed_ids;
	int32	   *attempts;
	int64	   *children;
	uint64		nchildren = 0;

	if (DurableDistributed())
	{
		commit_each(ids, fences, results);
		return;
	}
	args[BATCH_TASK_IDS] = PointerGetDatum(ids);
	args[BATCH_FENCES] = PointerGetDatum(fences);
	args[BATCH_RESULTS] = PointerGetDatum(results);
	nulls[BATCH_RESULTS] = results ? ' ' : 'n';
	args[BATCH_NOW] = TimestampTzGetDatum(now);
	args[BATCH_ROLE] = CStringGetTextDatum(DurableCallerName());
	res = DurableRun(&commit_batch, args, nulls, SPI_OK_SELECT, 0);
	done = res.rows;
	if (done != (uint64) n)
	{
		Datum	   *id_values;
		Datum	   *fence_values;
		int			nvalues;
		bool	   *committed = palloc0(sizeof(bool) * n);
		uint64		returned = done;
		int64	   *returned_ids = palloc(sizeof(int64) * Max(returned, 1));

		/* name the first task that could not be committed */
		deconstruct_array(ids, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
						  &id_values, NULL, &nvalues);
		deconstruct_array(fences, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
						  &fence_values, NULL, &nvalues);
		for (uint64 r = 0; r < returned; r++)
			returned_ids[r] = DurableGetInt64(res, r, COMMITTED_TASK_ID);
		for (int i = 0; i < n; i++)
			for (uint64 r = 0; r < returned; r++)
				if (returned_ids[r] == DatumGetInt64(id_values[i]))
					committed[i] = true;
		for (int i = 0; i < n; i++)
			if (!committed[i])
				DurableReportRefusal(DatumGetInt64(id_values[i]),
									 DatumGetInt64(fence_values[i]));
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("a task appears more than once in task_ids"));
	}

	/*
	 * The checks run statements of their own: read the queues, and which
	 * tasks have parents (pairs of task id and parent id), first.
	 */
	queues = palloc(sizeof(char *) * Max(done, 1));
	restricted = palloc(sizeof(bool) * Max(done, 1));
	committed_ids = palloc(sizeof(int64) * Max(done, 1));
	attempts = palloc(sizeof(int32) * Max(done, 1));
	children = palloc(sizeof(int64) * 2 * Max(done, 1));
	for (uint64 r = 0; r < done; r++)
	{
		bool		isnull;
		Datum		claimed_at = DurableGetDatum(res, r, COMMITTED_CLAIMED_AT, &isnull);

		queues[r] = DurableGetText(res, r, COMMITTED_QUEUE);
		committed_ids[r] = DurableGetInt64(res, r, COMMITTED_TASK_ID);
		DurableCount(queues[r], DURABLE_COUNT_COMPLETED, 1);
		if (!isnull)
			DurableObserve(queues[r], DURABLE_HIST_RUN_TIME,
						   now - DatumGetTimestampTz(claimed_at));
		attempts[r] = DurableGetInt32(res, r, COMMITTED_ATTEMPT);
		restricted[r] = !DurableGetIsNull(res, r, COMMITTED_RESTRICTED) &&
			DurableGetBool(res, r, COMMITTED_RESTRICTED);
		if (DurableGetIsNull(res, r, COMMITTED_PARENT))
			continue;
		children[2 * nchildren] = DurableGetInt64(res, r, COMMITTED_TASK_ID);
		children[2 * nchildren + 1] = DurableGetInt64(res, r, COMMITTED_PARENT);
		nchildren++;
	}
	DurableCheckTasksAccess(committed_ids, queues, restricted, (int) done);
	for (uint64 r = 0; r < done; r++)
		DurableCountRecovery(queues[r], committed_ids[r], attempts[r], true, now);
	for (uint64 i = 0; i < nchildren; i++)
		DurableWakeParent(children[2 * i + 1], children[2 * i], now);
}

/*
 * DurableFailTask
 *		A failed attempt of a running task held under fence, of class
 *		error_class_name (already checked), with error (or NULL) and, when
 *		has_retry_after, a wait of at least retry_after microseconds before
 *		a retry: applies the decision of durable_next_action for it and
 *		returns the action's name.  Locks the task row, then the queue row
 *		when the queue limits retries.  Raises 55U01 for a stale fence,
 *		55U04 while a step is started or unknown.
 */
const char *
DurableFailTask(int64 task_id, int64 fence, const char *error_class_name,
				Jsonb *error, bool has_retry_after, int64 retry_after)
{
	DurableErrorClass error_class = DurableParseErrorClass(error_class_name);
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	DurableMove move = {0};
	DurableDetail detail;
	DurableNextAction action;
	int64		wait;
	const char *action_name;

	move.error = error;
	DurableTaskHeld(task_id, fence, &task);
	if (task.steps_in_doubt > 0)
		DurableReportRefusal(task_id, fence);

	wait = DurableRetryWait(&task, retry_after);
	action = DurableDecideNext(task.attempt, task.max_attempts,
							   Max(now - task.created_at, 0), task.deadline,
							   error_class, wait);
	action_name = DurableNextActionName(action);

	DurableDetailInit(&detail);
	DurableDetailText(&detail, "action", action_name);
	DurableDetailText(&detail, "error_class", error_class_name);
	DurableDetailInt(&detail, "attempt", task.attempt);
	DurableDetailInt(&detail, "max_attempts", task.max_attempts);
	DurableDetailInt(&detail, "elapsed_ms", Max(now - task.created_at, 0) / 1000);
	if (has_retry_after)
		DurableDetailInt(&detail, "retry_after_ms", retry_after / 1000);

	move.from_state = DURABLE_TASK_RUNNING;
	move.fence = fence;
	DurableNextActionMove(&task, action, now, wait, &detail, &move);
	move.detail = DurableDetailFinish(&detail);
	DurableMoveTaskFenced(task_id, &move, now);
	return action_name;
}

/*
 * DurableCancelTask
 *		Cancel an unfinished task; a running one loses its lease, so its
 *		fence is incremented and its worker's next write is rejected.  Its
 *		unfinished children are cancelled with it.  Raises 55U04 for a
 *		finished task or one in review (which only durable_resolve leaves).
 */
void
DurableCancelTask(int64 task_id, const char *reason)
{
	DurableTask task;

	DurableTaskFetchOrError(task_id, true, &task);
	if (DurableTaskIsTerminal(task.state) ||
		task.state == DURABLE_TASK_NEEDS_REVIEW)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("cannot cancel task %lld in state %s",
					   (long long) task_id, DurableTaskStateName(task.state)),
				task.state == DURABLE_TASK_NEEDS_REVIEW ?
				errhint("A task in review is settled with durable_resolve().") : 0);

	DurableCancelLockedTask(&task, reason, 0, GetCurrentTransactionStartTimestamp());
}
