/*-------------------------------------------------------------------------
 *
 * outcome.c
 *	  Step outcomes: what committing, failing or learning the outcome of a
 *	  step does to its task, and the task's own records beside its steps
 *	  (its checkpoint, its compensations).
 *
 * The step's row is step.c's; here the step's end is judged with the
 * task's other steps (recovery.c) and the task moved (move code): a failed
 * step's retry parks the task, a receipt that settles a reconcile handler's
 * last step in doubt releases it.  Every routine holds the task's row under
 * the caller's fence first (DurableTaskHeld).
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/*
 * DurableCommitStep
 *		The step form of durable_commit: STARTED, or UNKNOWN with a
 *		'succeeded' receipt, -> COMMITTED, what it spent charged to its
 *		task's budgets (spend.c).  Committing a compensation step moves the
 *		step it compensates to COMPENSATED.
 */
void
DurableCommitStep(int64 task_id, int64 fence, const char *name,
				  int32 expected, Jsonb *result, Numeric spent)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	DurableStep step;
	DurableStepChange change = {0};

	DurableTaskHeld(task_id, fence, &task);
	DurableStepFetchOrError(&task, name, &step);
	DurableStepCheckVersion(&task, &step, expected);
	if (step.state == DURABLE_STEP_UNKNOWN &&
		(step.receipt == NULL || strcmp(step.receipt, "succeeded") != 0))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("cannot commit step \"%s\" of task %lld without evidence",
					   name, (long long) task_id),
				errdetail("The step's outcome is unknown."),
				errhint("Record what the external system says with durable_record_receipt()."));
	change.to_state = DURABLE_STEP_COMMITTED;
	change.result = result;
	change.spent = spent;
	change.kind = "step_committed";
	DurableStepChangeState(&task, &step, &change, now);

	if (step.compensates != NULL)
	{
		DurableStep original;
		DurableStepChange compensated = {0};

		DurableStepFetchOrError(&task, step.compensates, &original);
		if (original.state != DURABLE_STEP_COMPENSATED)
		{
			compensated.to_state = DURABLE_STEP_COMPENSATED;
			compensated.kind = "step_compensated";
			DurableStepChangeState(&task, &original, &compensated, now);
		}
	}
}

/*
 * DurableFailStep
 *		The step form of durable_fail: a started step's attempt failed.  The
 *		retry budget decides with the step's attempts: schedule_retry puts
 *		the step back to PLANNED (same key) and parks the task WAITING;
 *		fail_permanent, attempts_exhausted and deadline_exceeded fail step
 *		and task; manual_review leaves the step UNKNOWN and the task in
 *		NEEDS_REVIEW.  The task's other steps in doubt are judged as after a
 *		lost lease, and a more cautious action of theirs is the task's
 *		(recovery.c).  Returns the step's action.
 */
const char *
DurableFailStep(int64 task_id, int64 fence, const char *name,
				const char *error_class_name, Jsonb *error, int64 retry_after)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableErrorClass error_class = DurableParseErrorClass(error_class_name);
	DurableTask task;
	DurableStep step;
	DurableStepChange change = {0};
	DurableMove move = {0};
	DurableDetail step_detail;
	DurableDetail task_detail;
	DurableNextAction action;
	DurableRecoveryAction own = DURABLE_RECOVERY_RECORD_FAILURE;
	DurableVerdict others;
	int64		wait;
	const char *action_name;

	DurableTaskHeld(task_id, fence, &task);
	DurableStepFetchOrError(&task, name, &step);
	if (step.state != DURABLE_STEP_STARTED)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("cannot fail step \"%s\" of task %lld in state %s",
					   name, (long long) task_id, DurableStepStateName(step.state)),
				errhint("Only a started step has an attempt that can fail."));

	wait = DurableRetryWaitFor(&task, step.idempotency_key, step.attempt,
							   retry_after);
	action = DurableDecideNext(step.attempt, task.max_attempts,
							   Max(now - task.created_at, 0), task.deadline,
							   error_class, wait);
	action_name = DurableNextActionName(action);

	DurableDetailInit(&step_detail);
	DurableDetailText(&step_detail, "action", action_name);
	change.error_class = error_class_name;
	change.error = error;
	change.kind = "step_failed";
	change.detail = &step_detail;
	move.from_state = DURABLE_TASK_RUNNING;
	move.fence = fence;
	move.error = error;
	move.allow_doubt = true;

	switch (action)
	{
		case DURABLE_NEXT_SCHEDULE_RETRY:
			change.to_state = DURABLE_STEP_PLANNED;
			change.clear_evidence = true;
			own = DURABLE_RECOVERY_RETRY_SAME_ACTIVITY;
			break;
		case DURABLE_NEXT_MANUAL_REVIEW:
			change.to_state = DURABLE_STEP_UNKNOWN;
			own = DURABLE_RECOVERY_MANUAL_REVIEW;
			break;
		case DURABLE_NEXT_ATTEMPTS_EXHAUSTED:
			change.to_state = DURABLE_STEP_FAILED;
			own = DURABLE_RECOVERY_EXHAUSTED;
			break;
		case DURABLE_NEXT_FAIL_PERMANENT:
		case DURABLE_NEXT_DEADLINE_EXCEEDED:
			change.to_state = DURABLE_STEP_FAILED;
			own = DURABLE_RECOVERY_RECORD_FAILURE;
			break;
	}
	DurableStepChangeState(&task, &step, &change, now);

	DurableDetailInit(&task_detail);
	DurableDetailText(&task_detail, "action", action_name);
	DurableDetailText(&task_detail, "step", name);
	DurableDetailText(&task_detail, "error_class", error_class_name);
	DurableDetailInt(&task_detail, "attempt", step.attempt);
	DurableDetailInt(&task_detail, "max_attempts", task.max_attempts);

	/*
	 * The worker gives the task up, so its other steps in doubt are judged
	 * as after a lost lease, and the task takes the most cautious action.
	 */
	if (DurableJudgeSteps(&task, name, true, NULL, now, &task_detail, &others) &&
		DurableMostCautious(own, others.action) != own)
	{
		DurableVerdictMove(&task, &others, now, &task_detail, &move);
		move.kind = others.action == DURABLE_RECOVERY_MANUAL_REVIEW ? "needs_review" :
			others.action == DURABLE_RECOVERY_RECONCILE ? "awaiting_reconcile" :
			"failed";
	}
	else
		DurableNextActionMove(&task, action, now, Max(wait, others.retry_wait),
							  &task_detail, &move);
	move.detail = DurableDetailFinish(&task_detail);
	DurableMoveLockedTask(&task, &move, now);
	return action_name;
}

/*
 * DurableRecordReceipt
 *		Record what the external system says about a started or unknown
 *		step: 'succeeded', 'failed_permanent' or 'not_executed'.  On a
 *		started step it is kept as evidence for recovery ('not_executed'
 *		puts the step back to PLANNED at once).  On an unknown step it
 *		settles the step through the recovery table; and when a reconcile
 *		handler holds the task, the task is released once none of its steps
 *		is in doubt.  Returns the step's state afterwards, in SPI memory.
 */
const char *
DurableRecordReceipt(int64 task_id, int64 fence, const char *name,
					 DurableReceipt receipt, const char *receipt_name,
					 const char *effect_id, Jsonb *evidence)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	DurableStep step;
	DurableStepChange change = {0};

	DurableTaskHeld(task_id, fence, &task);
	DurableStepFetchOrError(&task, name, &step);
	if (!DurableStepStateInDoubt(step.state))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("cannot record a receipt for step \"%s\" of task %lld in state %s",
					   name, (long long) task_id, DurableStepStateName(step.state)),
				errhint("Receipts are evidence about a started or unknown step."));

	/* a second effect for one step: the side effect happened twice */
	if (effect_id != NULL && step.effect_id != NULL &&
		strcmp(effect_id, step.effect_id) != 0)
		DurableCount(task.queue, DURABLE_COUNT_DUPLICATE_EFFECTS, 1);

	/* first the evidence itself, kept with the step and in its history */
	change.to_state = step.state;
	change.evidence_only = true;
	change.receipt = receipt_name;
	change.effect_id = effect_id;
	change.evidence = evidence;
	if (receipt == DURABLE_RECEIPT_SUCCEEDED)
		change.result = evidence;
	change.kind = "receipt_recorded";
	DurableStepChangeState(&task, &step, &change, now);

	if (step.state == DURABLE_STEP_STARTED && receipt == DURABLE_RECEIPT_NOT_EXECUTED)
		DurableSettleStep(&task, &step, DURABLE_RECOVERY_RETRY_SAME_ACTIVITY,
						  NULL, NULL, NULL, NULL, now);
	else if (step.state == DURABLE_STEP_UNKNOWN)
	{
		DurableActivityClass class = DurableParseActivityClass(step.class);
		DurableRecoveryAction action;

		action = DurableDecideRecovery(true, receipt,
									   DURABLE_CLASS_RETRY_SAFE(class),
									   step.attempt, task.max_attempts,
									   class == DURABLE_CLASS_QUERYABLE);
		DurableSettleStep(&task, &step, action, NULL, NULL, NULL, NULL, now);

		/*
		 * A reconcile handler's work ends with the evidence for the last of
		 * the task's steps in doubt; until then it records the next one.
		 */
		if (task.run_at == DURABLE_AWAITING_RECONCILE)
		{
			DurableMove move = {0};
			DurableDetail detail;

			DurableDetailInit(&detail);
			DurableDetailText(&detail, "action", DurableRecoveryActionName(action));
			DurableDetailText(&detail, "step", name);
			DurableDetailText(&detail, "receipt", receipt_name);
			move.from_state = DURABLE_TASK_RUNNING;
			move.fence = fence;
			move.kind = "reconciled";
			move.allow_doubt = true;
			if (DurableReleaseMove(&task, NULL, now, &detail, &move))
			{
				move.detail = DurableDetailFinish(&detail);
				DurableMoveLockedTask(&task, &move, now);
			}
		}
	}
	return DurableStepStateName(step.state);
}

enum
{
	CHECKPOINT_VERSION,
	CHECKPOINT_NCOLUMNS
};
static const DurableColumn checkpoint_columns[CHECKPOINT_NCOLUMNS] = {
	[CHECKPOINT_VERSION] = {"checkpoint_version", INT4OID},
};
enum
{
	CHECKPOINT_PARTITION,
	CHECKPOINT_TASK_ID,
	CHECKPOINT_CHECKPOINT,
	CHECKPOINT_NPARAMS
};
static const DurableParam checkpoint_params[CHECKPOINT_NPARAMS] = {
	[CHECKPOINT_PARTITION] = {"partition", INT4OID},
	[CHECKPOINT_TASK_ID] = {"task_id", INT8OID},
	[CHECKPOINT_CHECKPOINT] = {"checkpoint", JSONBOID},
};
static DurableStatement checkpoint_save = {
	.name = "checkpoint",
	.sql = "UPDATE durable.live_tasks SET checkpoint = $checkpoint,"
	" checkpoint_version = checkpoint_version + 1"
	" WHERE partition_key = $partition AND task_id = $task_id"
	" RETURNING checkpoint_version",
	DURABLE_PARAMS(checkpoint_params),
	DURABLE_COLUMNS(checkpoint_columns),
};

/*
 * DurableSaveCheckpoint
 *		Save the checkpoint of a task held under fence by compare-and-swap
 *		on its checkpoint version (55U02 for another); returns the new one.
 */
int32
DurableSaveCheckpoint(int64 task_id, int64 fence, Jsonb *checkpoint,
					  int32 expected)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	Datum		args[CHECKPOINT_NPARAMS];
	DurableDetail detail;

	DurableTaskHeld(task_id, fence, &task);
	if (task.checkpoint_version != expected)
	{
		DurableCountNow(task.queue, DURABLE_COUNT_VERSION_CONFLICTS);
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_VERSION_MISMATCH),
				errmsg("could not save the checkpoint of task %lld because it was modified concurrently",
					   (long long) task_id),
				errdetail("Expected version %d, but the current version is %d.",
						  expected, task.checkpoint_version));
	}
	args[CHECKPOINT_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[CHECKPOINT_TASK_ID] = Int64GetDatum(task_id);
	args[CHECKPOINT_CHECKPOINT] = JsonbPGetDatum(checkpoint);
	DurableRun(&checkpoint_save, args, NULL, SPI_OK_UPDATE_RETURNING, 0);

	DurableDetailInit(&detail);
	DurableDetailInt(&detail, "checkpoint_version", expected + 1);
	DurableAppendEvent(&task, now, "checkpoint", NULL,
					   DurableDetailFinish(&detail), NULL, 0);
	return expected + 1;
}

enum
{
	COMPENSATE_STEP,
	COMPENSATE_CLASS,
	COMPENSATE_NCOLUMNS
};
static const DurableColumn compensate_columns[COMPENSATE_NCOLUMNS] = {
	[COMPENSATE_STEP] = {"step", TEXTOID},
	[COMPENSATE_CLASS] = {"class", TEXTOID},
};
/*
 * The steps to compensate, newest first, with their compensations' class:
 * the class of the compensation planned already, else the step's own.
 */
enum
{
	COMPENSATE_PARTITION,
	COMPENSATE_TASK_ID,
	COMPENSATE_NPARAMS
};
static const DurableParam compensate_params[COMPENSATE_NPARAMS] = {
	[COMPENSATE_PARTITION] = {"partition", INT4OID},
	[COMPENSATE_TASK_ID] = {"task_id", INT8OID},
};
static DurableStatement steps_to_compensate = {
	.name = "steps_to_compensate",
	.sql = "SELECT s.step, COALESCE(c.class, s.class)::text AS class"
	" FROM durable.live_steps s LEFT JOIN durable.live_steps c"
	" ON c.partition_key = s.partition_key AND c.task_id = s.task_id"
	" AND c.compensates = s.step"
	" WHERE s.partition_key = $partition AND s.task_id = $task_id"
	" AND s.state IN ('committed', 'compensated') AND s.compensates IS NULL"
	" ORDER BY s.ordinal DESC",
	DURABLE_PARAMS(compensate_params),
	DURABLE_COLUMNS(compensate_columns),
};

/*
 * DurableCompensate
 *		Plan one compensation step, "compensate:<step>", for each committed
 *		step of a task held under fence, newest first (the order in which
 *		to run them); planning again plans nothing new.  A compensation
 *		takes the class classes[i] when names[i] (of nclasses) is its step,
 *		else the class it was planned with, else its step's: an unsafe
 *		step's compensation in doubt goes to review as the step would.  A
 *		name that is no committed step of the task is 22023, and so is
 *		another class than the one a compensation was planned with.
 *		Returns how many, with the steps in *steps (strings in SPI memory).
 */
uint64
DurableCompensate(int64 task_id, int64 fence, int nclasses, const char **names,
				  const char **classes, DurableCompensation **steps)
{
	DurableResult res;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	Datum		args[COMPENSATE_NPARAMS];
	uint64		n;
	DurableCompensation *out;
	const char **class;

	DurableTaskHeld(task_id, fence, &task);
	args[COMPENSATE_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[COMPENSATE_TASK_ID] = Int64GetDatum(task_id);
	res = DurableRun(&steps_to_compensate, args, NULL, SPI_OK_SELECT, 0);
	n = res.rows;
	out = palloc(sizeof(DurableCompensation) * Max(n, 1));
	class = palloc(sizeof(char *) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
	{
		out[i].compensates = DurableGetText(res, i, COMPENSATE_STEP);
		class[i] = DurableGetText(res, i, COMPENSATE_CLASS);
	}
	for (int c = 0; c < nclasses; c++)
	{
		uint64		i = 0;

		while (i < n && strcmp(out[i].compensates, names[c]) != 0)
			i++;
		if (i == n)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("task %lld has no committed step \"%s\" to compensate",
						   (long long) task_id, names[c]),
					errhint("Give classes only for the task's committed steps."));
		class[i] = classes[c];
	}

	for (uint64 i = 0; i < n; i++)
	{
		out[i].name = psprintf(DURABLE_COMPENSATION_PREFIX "%s",
							   out[i].compensates);
		DurablePlanStep(&task, out[i].name, class[i], NULL, NULL,
						out[i].compensates, now, &out[i].step);
	}
	*steps = out;
	return n;
}
