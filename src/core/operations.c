/*-------------------------------------------------------------------------
 *
 * operations.c
 *	  What operators do: resolve tasks in review, replay dead letters.
 *
 * A background loop never turns a manual review into a retry: only
 * durable_resolve() takes a task out of NEEDS_REVIEW, and it first appends
 * an event naming the operator and the evidence, then applies the decision
 * through the same state machines as everything else.  Never a bare UPDATE.
 * The SQL entry points are api/operations.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* a decision counts in its own counter (counters.c), in this order */
StaticAssertDecl(DURABLE_RESOLVE_CANCEL - DURABLE_RESOLVE_MARK_COMMITTED ==
				 DURABLE_COUNT_RESOLVED_CANCEL - DURABLE_COUNT_RESOLVED_MARK_COMMITTED,
				 "resolve decisions and their counters");

static const char *const decision_names[] = {
	[DURABLE_RESOLVE_MARK_COMMITTED] = "mark_committed",
	[DURABLE_RESOLVE_MARK_NOT_EXECUTED] = "mark_not_executed",
	[DURABLE_RESOLVE_MARK_FAILED] = "mark_failed",
	[DURABLE_RESOLVE_RETRY] = "retry",
	[DURABLE_RESOLVE_CANCEL] = "cancel",
};

/* a decision of durable_resolve by its name, or 22023 */
DurableResolveDecision
DurableParseResolveDecision(const char *name)
{
	for (int i = 0; i < (int) lengthof(decision_names); i++)
		if (strcmp(name, decision_names[i]) == 0)
			return (DurableResolveDecision) i;
	ereport(ERROR,
			errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			errmsg("unknown decision \"%s\"", name),
			errhint("The decision must be \"mark_committed\", \"mark_not_executed\", \"mark_failed\", \"retry\" or \"cancel\"."));
	pg_unreachable();
}

/*
 * resolved_step
 *		The step in doubt a decision settles: the one named, or the only
 *		one when none is named.  Returns false for a decision about the task
 *		itself (no step in doubt, none named).
 */
static bool
resolved_step(DurableTask *task, const char *name, DurableStep *step)
{
	if (name != NULL)
	{
		DurableStepFetchOrError(task, name, step);
		if (!DurableStepStateInDoubt(step->state))
			ereport(ERROR,
					errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
					errmsg("step \"%s\" of task %lld is not in doubt",
						   name, (long long) task->task_id),
					errdetail("The step is in state %s.",
							  DurableStepStateName(step->state)),
					errhint("Name a step that is started or unknown."));
		return true;
	}
	if (task->steps_in_doubt > 1)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("task %lld has %d steps in doubt",
					   (long long) task->task_id, task->steps_in_doubt),
				errhint("Name the step the decision settles: durable_resolve(..., step => '...'); durable_recovery_package() lists them."));
	return DurableStepInDoubt(task, step);
}

/*
 * DurableResolve
 *		Apply an operator's decision to a task in NEEDS_REVIEW (55U04 for
 *		one that is not): first the decision and its evidence as an event,
 *		then its application through the step and task state machines.
 *		step_name, when not NULL, names the step in doubt it settles;
 *		spent, what a step marked committed spent (spend.c).  Returns the
 *		task's new state.
 */
const char *
DurableResolve(int64 task_id, DurableResolveDecision decision,
			   const char *operator_name, Jsonb *evidence,
			   const char *step_name, Numeric spent)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	DurableStep step;
	bool		has_step;
	DurableDetail detail;
	DurableMove move = {0};

	DurableTaskFetchOrError(task_id, true, &task);
	if (task.state != DURABLE_TASK_NEEDS_REVIEW)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("task %lld is not in review", (long long) task_id),
				errdetail("The task is in state %s.", DurableTaskStateName(task.state)),
				errhint("durable_resolve() settles tasks in state needs_review; use durable_cancel() or durable_replay_dead_letters() otherwise."));
	if (decision == DURABLE_RESOLVE_RETRY && step_name == NULL &&
		task.steps_in_doubt > 1)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("cannot retry task %lld while the outcome of %d of its steps is unknown",
					   (long long) task_id, task.steps_in_doubt),
				errhint("Decide each step first: mark_committed if it took effect, mark_not_executed if it did not."));
	has_step = decision != DURABLE_RESOLVE_CANCEL &&
		resolved_step(&task, step_name, &step);
	if (spent != NULL && !(decision == DURABLE_RESOLVE_MARK_COMMITTED && has_step))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("spent is what a step marked committed spent"),
				errhint("Give it with mark_committed of a step in doubt."));
	if (decision == DURABLE_RESOLVE_RETRY && has_step)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("cannot retry task %lld while the outcome of step \"%s\" is unknown",
					   (long long) task_id, step.name),
				errhint("Decide the step first: mark_committed if it took effect, mark_not_executed if it did not."));

	/* first the decision and its evidence, then its application */
	DurableDetailInit(&detail);
	DurableDetailText(&detail, "decision", decision_names[decision]);
	DurableDetailText(&detail, "operator", operator_name);
	DurableDetailText(&detail, "step", has_step ? step.name : NULL);
	DurableDetailJsonb(&detail, "evidence", evidence);
	task.version = DurableAppendEvent(&task, now, "resolved", operator_name,
									  DurableDetailFinish(&detail), NULL, 0);
	DurableCount(task.queue, DURABLE_COUNT_RESOLVED_MARK_COMMITTED + decision, 1);

	/* the task stays in review unless the decision moves it */
	move.from_state = DURABLE_TASK_NEEDS_REVIEW;
	move.to_state = DURABLE_TASK_NEEDS_REVIEW;
	move.fence = task.fence;
	move.allow_doubt = true;
	move.kind = "resolved_applied";
	move.actor = operator_name;
	DurableDetailInit(&detail);
	switch (decision)
	{
		case DURABLE_RESOLVE_MARK_COMMITTED:
			if (has_step)
				DurableSettleStep(&task, &step, DURABLE_RECOVERY_RECORD_COMPLETION,
								  operator_name, "succeeded", evidence, spent, now);
			else
			{
				move.to_state = DURABLE_TASK_COMPLETED;
				move.result = evidence;
			}
			break;
		case DURABLE_RESOLVE_MARK_NOT_EXECUTED:
			if (has_step)
				DurableSettleStep(&task, &step, DURABLE_RECOVERY_RETRY_SAME_ACTIVITY,
								  operator_name, NULL, NULL, NULL, now);
			else
			{
				move.to_state = DURABLE_TASK_READY;
				move.run_at = now;
			}
			break;
		case DURABLE_RESOLVE_MARK_FAILED:
			if (has_step)
				DurableSettleStep(&task, &step, DURABLE_RECOVERY_RECORD_FAILURE,
								  operator_name, "failed_permanent", evidence, NULL, now);
			if (task.steps_in_doubt == 0)
			{
				move.to_state = DURABLE_TASK_FAILED;
				move.stop_code = "resolved_failed";
			}
			break;
		case DURABLE_RESOLVE_RETRY:
			move.to_state = DURABLE_TASK_READY;
			move.run_at = now;
			break;
		case DURABLE_RESOLVE_CANCEL:
			move.to_state = DURABLE_TASK_CANCELLED;
			break;
	}

	/* a settled step releases the task only with nothing else in doubt */
	if (move.to_state == DURABLE_TASK_NEEDS_REVIEW &&
		!DurableReleaseMove(&task, operator_name, now, &detail, &move))
		return DurableTaskStateName(DURABLE_TASK_NEEDS_REVIEW);
	move.detail = DurableDetailFinish(&detail);
	DurableMoveLockedTask(&task, &move, now);
	return DurableTaskStateName(move.to_state);
}

/*
 * failed tasks of a queue that may be replayed, in the partitions given, of
 * a reason (a stop code, or what a quarantine said) or any
 */
#define DEAD_LETTERS(partitions) \
	"SELECT t.task_id FROM durable.task_history t" \
	" WHERE t.partition_key " partitions " AND t.queue_name = $queue" \
	" AND t.state = 'failed'" \
	" AND ($reason::text IS NULL OR t.stop_code = $reason" \
	"  OR (t.stop_code = 'quarantined' AND t.last_error ->> 'reason' = $reason))" \
	" AND t.steps_in_doubt = 0" \
	" AND NOT EXISTS (SELECT FROM durable.step_history s" \
	"  WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id" \
	"  AND s.state = 'failed')" \
	" ORDER BY t.finished_at LIMIT $batch FOR NO KEY UPDATE OF t SKIP LOCKED"

enum
{
	DEAD_LETTER_TASK_ID,
	DEAD_LETTER_NCOLUMNS
};
static const DurableColumn dead_letter_columns[DEAD_LETTER_NCOLUMNS] = {
	[DEAD_LETTER_TASK_ID] = {"task_id", INT8OID},
};
enum
{
	DEAD_PARTITIONS,
	DEAD_QUEUE,
	DEAD_BATCH,
	DEAD_REASON,
	DEAD_NPARAMS
};
static const DurableParam dead_letters_params[DEAD_NPARAMS] = {
	[DEAD_PARTITIONS] = {"partitions", INT4ARRAYOID},
	[DEAD_QUEUE] = {"queue", TEXTOID},
	[DEAD_BATCH] = {"batch", INT4OID},
	[DEAD_REASON] = {"reason", TEXTOID},
};
static DurableStatement dead_letters = {
	.name = "dead_letters",
	.sql = DEAD_LETTERS("= ANY ($partitions)"),
	DURABLE_PARAMS(dead_letters_params),
	DURABLE_COLUMNS(dead_letter_columns),
};

/* on Citus, which locks rows only in a statement on one shard */
enum
{
	DEAD_ONE_PARTITION,
	DEAD_ONE_QUEUE,
	DEAD_ONE_BATCH,
	DEAD_ONE_REASON,
	DEAD_ONE_NPARAMS
};
static const DurableParam dead_letters_one_params[DEAD_ONE_NPARAMS] = {
	[DEAD_ONE_PARTITION] = {"partition", INT4OID},
	[DEAD_ONE_QUEUE] = {"queue", TEXTOID},
	[DEAD_ONE_BATCH] = {"batch", INT4OID},
	[DEAD_ONE_REASON] = {"reason", TEXTOID},
};
static DurableStatement dead_letters_one = {
	.name = "dead_letters_one",
	.sql = DEAD_LETTERS("= $partition"),
	DURABLE_PARAMS(dead_letters_one_params),
	DURABLE_COLUMNS(dead_letter_columns),
};

/* a failed task, locked, ready again now with its attempts from zero */
static void
replay(DurableTask *task, const char *actor, TimestampTz now)
{
	DurableMove move = {0};

	move.from_state = DURABLE_TASK_FAILED;
	move.fence = task->fence;
	move.to_state = DURABLE_TASK_READY;
	move.run_at = now;
	move.reset_attempts = true;
	move.allow_doubt = true;
	move.kind = "replayed";
	move.actor = actor;
	DurableMoveLockedTask(task, &move, now);
}

/*
 * DurableReplayDeadLetters
 *		Give up to batch failed tasks of a queue, oldest first, a new run:
 *		READY now, with their attempts counted from zero.  partition, when
 *		not negative, takes them from that partition of the queue only;
 *		reason, when not NULL, only those that stopped for it (their stop
 *		code, or the reason they were quarantined for).  A task with a
 *		failed step is no dead letter to replay.  Returns how many, with
 *		their ids in *replayed.
 */
uint64
DurableReplayDeadLetters(const char *queue, int32 batch, int32 partition,
						 const char *reason, const char *actor,
						 int64 **replayed)
{
	DurableResult res;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableQueue settings;
	Datum		args[DEAD_NPARAMS];
	char		nulls[DEAD_NPARAMS] = {' ', ' ', ' ', ' '};
	uint64		n;
	int64	   *ids;

	DurableQueueGetShared(queue, &settings);
	if (partition >= 0)
		DurableCheckQueuePartition(queue, &settings, partition);
	ids = palloc(sizeof(int64) * batch);
	n = 0;
	if (!DurableDistributed())
	{
		ArrayType  *partitions = DurableQueuePartitionArray(&settings);

		if (partition >= 0)
		{
			Datum		only = Int32GetDatum(partition);

			partitions = construct_array(&only, 1, INT4OID, sizeof(int32),
										 true, TYPALIGN_INT);
		}
		args[DEAD_PARTITIONS] = PointerGetDatum(partitions);
		args[DEAD_QUEUE] = CStringGetTextDatum(queue);
		args[DEAD_BATCH] = Int32GetDatum(batch);
		args[DEAD_REASON] = reason ? CStringGetTextDatum(reason) : (Datum) 0;
		nulls[DEAD_REASON] = reason ? ' ' : 'n';
		res = DurableRun(&dead_letters, args, nulls, SPI_OK_SELECT, 0);
		n = res.rows;
		for (uint64 i = 0; i < n; i++)
			ids[i] = DurableGetInt64(res, i, DEAD_LETTER_TASK_ID);
	}
	else
	{
		Datum		one[DEAD_ONE_NPARAMS];
		char		one_nulls[DEAD_ONE_NPARAMS] = {' ', ' ', ' ', ' '};

		/*
		 * Citus locks rows (SKIP LOCKED) only in a statement on one shard:
		 * one partition at a time, each the oldest of its own.
		 */
		one[DEAD_ONE_QUEUE] = CStringGetTextDatum(queue);
		one[DEAD_ONE_REASON] = reason ? CStringGetTextDatum(reason) : (Datum) 0;
		one_nulls[DEAD_ONE_REASON] = reason ? ' ' : 'n';
		for (int p = 0; p < settings.partitions && n < (uint64) batch; p++)
		{
			int32		here = DurableQueuePartition(&settings, p);
			uint64		found;

			if (partition >= 0 && here != partition)
				continue;
			one[DEAD_ONE_PARTITION] = Int32GetDatum(here);
			one[DEAD_ONE_BATCH] = Int32GetDatum(batch - (int32) n);
			res = DurableRun(&dead_letters_one, one, one_nulls,
							 SPI_OK_SELECT, 0);
			found = res.rows;
			for (uint64 i = 0; i < found; i++)
				ids[n++] = DurableGetInt64(res, i, DEAD_LETTER_TASK_ID);
		}
	}

	for (uint64 i = 0; i < n; i++)
	{
		DurableTask task;

		DurableTaskFetchOrError(ids[i], false, &task);
		replay(&task, actor, now);
	}
	DurableCount(queue, DURABLE_COUNT_REPLAYED, (int64) n);
	*replayed = ids;
	return n;
}

/* one dead letter, by its id: locked, if it is one to replay */
enum
{
	DEAD_ID_PARTITION,
	DEAD_ID_TASK_ID,
	DEAD_ID_NPARAMS
};
static const DurableParam dead_letter_by_id_params[DEAD_ID_NPARAMS] = {
	[DEAD_ID_PARTITION] = {"partition", INT4OID},
	[DEAD_ID_TASK_ID] = {"task_id", INT8OID},
};
static DurableStatement dead_letter_by_id = {
	.name = "dead_letter_by_id",
	.sql = "SELECT t.task_id FROM durable.task_history t"
	" WHERE t.partition_key = $partition AND t.task_id = $task_id"
	" AND t.state = 'failed' AND t.steps_in_doubt = 0"
	" AND NOT EXISTS (SELECT FROM durable.step_history s"
	"  WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id"
	"  AND s.state = 'failed')"
	" FOR NO KEY UPDATE OF t",
	DURABLE_PARAMS(dead_letter_by_id_params),
	DURABLE_COLUMNS(dead_letter_columns),
	.by_partition = true,
};

/*
 * DurableReplayDeadLetter
 *		Give one failed task a new run, as DurableReplayDeadLetters does,
 *		by its id.  Returns what was done: "replayed", or why not:
 *		"not_found", "not_failed" (unfinished, completed or cancelled), or
 *		"step_failed" (a failed step is final).
 */
const char *
DurableReplayDeadLetter(int64 task_id, const char *actor)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	Datum		args[DEAD_ID_NPARAMS];
	DurableTask task;
	DurableResult res;

	args[DEAD_ID_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[DEAD_ID_TASK_ID] = Int64GetDatum(task_id);
	res = DurableRun(&dead_letter_by_id, args, NULL, SPI_OK_SELECT, 1);
	if (!DurableTaskFetch(task_id, false, &task))
		return "not_found";
	if (res.rows == 0)
		return task.state == DURABLE_TASK_FAILED ? "step_failed" : "not_failed";
	replay(&task, actor, now);
	DurableCount(task.queue, DURABLE_COUNT_REPLAYED, 1);
	return "replayed";
}

/*
 * DurableQuarantine
 *		Put an unfinished task among the dead letters: FAILED with stop code
 *		'quarantined' and the reason, in last_error and in the event, which
 *		names the operator.  A running task loses its lease (fence + 1), so
 *		its worker's next write is refused.  Refused (55U04) while a step is
 *		started or unknown: a quarantine is no decision about it.  42704 for
 *		no such task, 55U04 for a finished one.
 */
void
DurableQuarantine(int64 task_id, const char *reason, const char *actor)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	DurableStep step;
	DurableMove move = {0};
	DurableDetail detail;

	DurableTaskFetchOrError(task_id, true, &task);
	if (DurableTaskIsTerminal(task.state))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("task %lld is %s and cannot be quarantined",
					   (long long) task_id, DurableTaskStateName(task.state)),
				errhint("Only an unfinished task can be quarantined."));
	if (DurableStepInDoubt(&task, &step))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("task %lld cannot be quarantined while step \"%s\" is %s",
					   (long long) task_id, step.name, DurableStepStateName(step.state)),
				errdetail("Whether the step took effect is not known."),
				errhint("Settle the step first: a receipt, or durable_resolve() once the task is in review."));

	DurableDetailInit(&detail);
	DurableDetailText(&detail, "reason", reason);
	DurableDetailText(&detail, "quarantined_by", actor);
	DurableDetailText(&detail, "previous_state", DurableTaskStateName(task.state));
	move.error = DurableDetailFinish(&detail);
	DurableDetailInit(&detail);
	DurableDetailText(&detail, "reason", reason);
	DurableDetailText(&detail, "previous_state", DurableTaskStateName(task.state));
	move.from_state = task.state;
	move.fence = task.fence;
	move.to_state = DURABLE_TASK_FAILED;
	move.revoke = task.state == DURABLE_TASK_RUNNING;
	move.stop_code = "quarantined";
	move.kind = "quarantined";
	move.actor = actor;
	move.detail = DurableDetailFinish(&detail);
	DurableMoveLockedTask(&task, &move, now);
	DurableCount(task.queue, DURABLE_COUNT_QUARANTINED, 1);
}

/*
 * DurableRecoveryActionOf
 *		The recovery action the reconciler would take for a running task
 *		now, without taking it: 'wait' while its lease runs, else the most
 *		cautious action of its steps in doubt, or the task's own.
 */
const char *
DurableRecoveryActionOf(int64 task_id)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	DurableVerdict verdict;
	bool		was = DurableReadAsOfCaller(true);

	/*
	 * As its caller read the task: the recovery package, which read it
	 * running, must not find it moved on since (a lease that ran out and
	 * a tick that settled it).
	 */
	PG_TRY();
	{
		DurableTaskFetchOrError(task_id, false, &task);
		DurableTaskRequireRunning(&task);
		if (task.lease_until >= now)
			verdict.action = DURABLE_RECOVERY_WAIT;
		else if (task.steps_in_doubt == 0 ||
				 !DurableJudgeSteps(&task, NULL, false, NULL, now, NULL, &verdict))
			DurableJudgeTask(&task, &verdict);
	}
	PG_FINALLY();
	{
		DurableReadAsOfCaller(was);
	}
	PG_END_TRY();
	return DurableRecoveryActionName(verdict.action);
}
