/*-------------------------------------------------------------------------
 *
 * operations.c
 *	  What operators do: resolve tasks in review, replay dead letters.
 *
 * A background loop never turns a manual review into a retry: only
 * durable_resolve() takes a task out of NEEDS_REVIEW, and it first appends
 * an event naming the operator and the evidence, then applies the decision
 * through the same state machines as everything else.  Never a bare UPDATE.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "access/xact.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

typedef enum ResolveDecision
{
	RESOLVE_MARK_COMMITTED,
	RESOLVE_MARK_NOT_EXECUTED,
	RESOLVE_MARK_FAILED,
	RESOLVE_RETRY,
	RESOLVE_CANCEL
} ResolveDecision;

static const char *const decision_names[] = {
	[RESOLVE_MARK_COMMITTED] = "mark_committed",
	[RESOLVE_MARK_NOT_EXECUTED] = "mark_not_executed",
	[RESOLVE_MARK_FAILED] = "mark_failed",
	[RESOLVE_RETRY] = "retry",
	[RESOLVE_CANCEL] = "cancel",
};

static ResolveDecision
parse_decision(const char *name)
{
	for (int i = 0; i < (int) lengthof(decision_names); i++)
		if (strcmp(name, decision_names[i]) == 0)
			return (ResolveDecision) i;
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
					errdetail("The step is in state %s.", step->state),
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
 * durable_resolve(task_id bigint, decision text, operator text,
 *				   evidence jsonb, step text = NULL) RETURNS text
 *
 * Settles a task in NEEDS_REVIEW; returns its new state.  A decision about
 * a step in doubt names it (it may be left out when there is only one):
 * mark_committed (it took effect: committed), mark_not_executed (it did
 * not: planned again with the same key), mark_failed (it failed, and so
 * does the task).  The task leaves review only when none of its steps is in
 * doubt any more, READY to resume, or FAILED when a step failed; until then
 * it stays in review for the next decision.  retry is refused while a step is in
 * doubt.  Without one, the marks apply to the task itself.  cancel
 * cancels.  Raises 55U04 for a task that is not in review.
 */
PG_FUNCTION_INFO_V1(durable_resolve);
Datum
durable_resolve(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	ResolveDecision decision;
	char	   *operator_name;
	Jsonb	   *evidence;
	char	   *step_name = NULL;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	DurableStep step;
	bool		has_step;
	DurableDetail detail;
	DurableMove move = {0};
	const char *new_state;

	DurableRequireArg(fcinfo, 1, "decision");
	decision = parse_decision(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	operator_name = DurableNameArg(fcinfo, 2, "operator");
	DurableRequireArg(fcinfo, 3, "evidence");
	evidence = DurableJsonbArg(fcinfo, 3, "evidence");
	if (PG_NARGS() > 4 && !PG_ARGISNULL(4))
		step_name = DurableNameArg(fcinfo, 4, "step name");

	SPI_connect();
	DurableTaskFetchOrError(task_id, true, &task);
	if (strcmp(task.state, "needs_review") != 0)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("task %lld is not in review", (long long) task_id),
				errdetail("The task is in state %s.", task.state),
				errhint("durable_resolve() settles tasks in state needs_review; use durable_cancel() or durable_replay_dead_letters() otherwise."));
	has_step = decision != RESOLVE_CANCEL &&
		resolved_step(&task, step_name, &step);
	if (decision == RESOLVE_RETRY && has_step)
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

	move.from_state = "needs_review";
	move.fence = task.fence;
	move.allow_doubt = true;
	move.kind = "resolved_applied";
	move.actor = operator_name;
	DurableDetailInit(&detail);
	switch (decision)
	{
		case RESOLVE_MARK_COMMITTED:
			if (has_step)
				DurableSettleStep(&task, &step, DURABLE_RECOVERY_RECORD_COMPLETION,
								  operator_name, "succeeded", evidence, now);
			else
			{
				move.to_state = "completed";
				move.result = evidence;
			}
			break;
		case RESOLVE_MARK_NOT_EXECUTED:
			if (has_step)
				DurableSettleStep(&task, &step, DURABLE_RECOVERY_RETRY_SAME_ACTIVITY,
								  operator_name, NULL, NULL, now);
			else
			{
				move.to_state = "ready";
				move.run_at = now;
			}
			break;
		case RESOLVE_MARK_FAILED:
			if (has_step)
				DurableSettleStep(&task, &step, DURABLE_RECOVERY_RECORD_FAILURE,
								  operator_name, "failed_permanent", evidence, now);
			if (task.steps_in_doubt == 0)
			{
				move.to_state = "failed";
				move.stop_code = "resolved_failed";
			}
			break;
		case RESOLVE_RETRY:
			move.to_state = "ready";
			move.run_at = now;
			break;
		case RESOLVE_CANCEL:
			move.to_state = "cancelled";
			break;
	}

	/* a settled step releases the task only with nothing else in doubt */
	if (move.to_state == NULL &&
		!DurableReleaseMove(&task, operator_name, now, &detail, &move))
		new_state = "needs_review";
	else
	{
		move.detail = DurableDetailFinish(&detail);
		DurableMoveLockedTask(&task, &move, now);
		new_state = move.to_state;
	}
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(new_state));
}

/*
 * durable_replay_dead_letters(queue text, batch int = 10)
 *		RETURNS TABLE(task_id bigint, action text)
 *
 * Gives up to batch failed tasks of a queue, oldest first, a new run: READY
 * now, with their attempts counted from zero (their deadline still counts
 * from their creation).  Committed steps stay committed, so the replay
 * resumes where the task stopped.  A task with a failed step is no dead
 * letter to replay: a failed step is final, and a new run would only meet
 * it again.
 */
PG_FUNCTION_INFO_V1(durable_replay_dead_letters);
Datum
durable_replay_dead_letters(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	int32		batch = DurableBatchArg(fcinfo, 1);
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	const char *actor;
	DurableQueue settings;
	Datum		args[3];
	uint64		n;
	int64	   *ids;

	InitMaterializedSRF(fcinfo, 0);
	actor = DurableCallerName();
	SPI_connect();
	DurableQueueGetShared(queue, &settings);
	args[1] = CStringGetTextDatum(queue);
	ids = palloc(sizeof(int64) * batch);
	n = 0;
	if (!DurableDistributed())
	{
		args[0] = PointerGetDatum(DurableQueuePartitionArray(&settings));
		args[2] = Int32GetDatum(batch);
		n = DurableExecuteStmt(STMT_DEAD_LETTERS, args, NULL, SPI_OK_SELECT, 0);
		for (uint64 i = 0; i < n; i++)
			ids[i] = DurableResultInt64(i, 1);
	}
	else
	{
		/*
		 * Citus locks rows (SKIP LOCKED) only in a statement on one shard:
		 * one partition at a time, each the oldest of its own.
		 */
		for (int p = 0; p < settings.partitions && n < (uint64) batch; p++)
		{
			uint64		found;

			args[0] = Int32GetDatum(DurableQueuePartition(&settings, p));
			args[2] = Int32GetDatum(batch - (int32) n);
			found = DurableExecuteStmt(STMT_DEAD_LETTERS_ONE, args, NULL, SPI_OK_SELECT, 0);
			for (uint64 i = 0; i < found; i++)
				ids[n++] = DurableResultInt64(i, 1);
		}
	}

	for (uint64 i = 0; i < n; i++)
	{
		Datum		values[2];
		bool		nulls[2] = {false, false};
		DurableTask task;
		DurableMove move = {0};

		DurableTaskFetchOrError(ids[i], false, &task);
		move.from_state = "failed";
		move.fence = task.fence;
		move.to_state = "ready";
		move.run_at = now;
		move.reset_attempts = true;
		move.allow_doubt = true;
		move.kind = "replayed";
		move.actor = actor;
		DurableMoveLockedTask(&task, &move, now);
		values[0] = Int64GetDatum(ids[i]);
		values[1] = CStringGetTextDatum("replayed");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}

/*
 * durable.recovery_action_of(task_id bigint) RETURNS text
 *
 * The recovery action the reconciler would take for a running task now,
 * without taking it: 'wait' while its lease runs, else the most cautious
 * action of its steps in doubt, or the task's own.  The recovery package
 * recommends what this says, so that it can never disagree with recovery.
 */
PG_FUNCTION_INFO_V1(durable_recovery_action_of);
Datum
durable_recovery_action_of(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	DurableVerdict verdict;
	const char *action;

	SPI_connect();
	DurableTaskFetchOrError(task_id, false, &task);
	if (strcmp(task.state, "running") != 0)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("task %lld is not running", (long long) task_id),
				errdetail("The task is in state %s.", task.state));
	if (task.lease_until >= now)
		verdict.action = DURABLE_RECOVERY_WAIT;
	else if (task.steps_in_doubt == 0 ||
			 !DurableJudgeSteps(&task, NULL, false, NULL, now, NULL, &verdict))
		DurableJudgeTask(&task, &verdict);
	action = DurableRecoveryActionName(verdict.action);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(action));
}
