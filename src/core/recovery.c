/*-------------------------------------------------------------------------
 *
 * recovery.c
 *	  Judging a task whose lease ended or that is questioned: every step in
 *	  doubt by the recovery table, and the task by the most cautious of them.
 *
 * A worker may start several steps before any of them ends, so a task can
 * have more than one step STARTED or UNKNOWN when its lease expires, when
 * it fails one of them, or when a reconcile handler or an operator settles
 * one.  Each step in doubt is judged with its own class, receipt and
 * attempts, and its own outcome is applied: a retry-safe step is planned
 * again with its key, a step with a receipt is committed or failed, a
 * queryable one waits for a look-up, an unsafe one for a person.  The task
 * takes the most cautious action of its steps (DurableMostCautious), and is
 * handed out again only when none of them is in doubt any more: the move
 * itself refuses to release a task with a step in doubt (task.c).
 *
 * Every caller holds the task's row lock, so the steps of the task cannot
 * change under the judgement.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "utils/builtins.h"

/* a step recovery failed while another was still in doubt is settled too */
static bool
step_state_unsettled(DurableStepState state)
{
	return DurableStepStateInDoubt(state) || state == DURABLE_STEP_FAILED;
}

static void
verdict_add(DurableVerdict *verdict, DurableRecoveryAction action,
			const DurableStep *step, int64 retry_wait)
{
	DurableRecoveryAction before = verdict->action;

	verdict->action = verdict->steps == 0 ? action :
		DurableMostCautious(verdict->action, action);
	if (verdict->steps == 0 || verdict->action != before)
		verdict->deciding = *step;
	if (action == DURABLE_RECOVERY_RETRY_SAME_ACTIVITY)
		verdict->retry_wait = Max(verdict->retry_wait, retry_wait);
	verdict->steps++;
}

/*
 * DurableJudgeSteps
 *		Judge every step of a locked task that is in doubt, and with apply
 *		settle each by its own action (actor names who decided).  A failed
 *		step of an unfinished task, which recovery failed while another step
 *		waited for a look-up, counts as record_failure.  The detail, when
 *		given, gets the list of steps judged when there are several.  except,
 *		when not NULL, names a step whose fate the caller has decided.
 *		Returns false, with nothing judged, when no other step is in doubt
 *		or failed.
 */
bool
DurableJudgeSteps(DurableTask *task, const char *except, bool apply,
				  const char *actor, TimestampTz now, DurableDetail *detail,
				  DurableVerdict *verdict)
{
	uint64		n;
	uint64		kept;
	char	  **names;
	DurableDetail *items;

	memset(verdict, 0, sizeof(*verdict));
	names = DurableUnsettledSteps(task, &n);
	kept = 0;
	for (uint64 i = 0; i < n; i++)
		if (except == NULL || strcmp(names[i], except) != 0)
			names[kept++] = names[i];
	n = kept;
	if (n == 0)
		return false;
	items = palloc(sizeof(DurableDetail) * n);

	for (uint64 i = 0; i < n; i++)
	{
		DurableStep step;
		DurableActivityClass class;
		DurableRecoveryAction action;
		int64		retry_wait = 0;

		DurableStepFetchOrError(task, names[i], &step);
		if (!step_state_unsettled(step.state))
			elog(ERROR, "step \"%s\" of task %lld changed under its task's row lock",
				 names[i], (long long) task->task_id);
		class = DurableParseActivityClass(step.class);
		action = DurableDecideRecovery(true, DurableParseReceipt(step.receipt),
									   DURABLE_CLASS_RETRY_SAFE(class),
									   step.attempt, task->max_attempts,
									   class == DURABLE_CLASS_QUERYABLE);
		if (step.state == DURABLE_STEP_FAILED)
		{
			/* the same evidence gives the same failure as when it failed */
			if (action != DURABLE_RECOVERY_EXHAUSTED)
				action = DURABLE_RECOVERY_RECORD_FAILURE;
		}
		else if (action == DURABLE_RECOVERY_RETRY_SAME_ACTIVITY)
			retry_wait = DurableRetryWaitFor(task, step.idempotency_key,
											 step.attempt, 0);
		verdict_add(verdict, action, &step, retry_wait);

		DurableDetailInit(&items[i]);
		DurableDetailText(&items[i], "step", step.name);
		DurableDetailText(&items[i], "step_state", DurableStepStateName(step.state));
		DurableDetailText(&items[i], "class", step.class);
		DurableDetailText(&items[i], "receipt", step.receipt);
		DurableDetailInt(&items[i], "attempt", step.attempt);
		DurableDetailText(&items[i], "action", DurableRecoveryActionName(action));

		if (apply && step.state != DURABLE_STEP_FAILED)
			DurableSettleStep(task, &step, action, actor, NULL, NULL, NULL, now);
	}

	/* items not listed stay in the caller's memory context until it goes */
	if (detail != NULL && n > 1)
	{
		DurableDetailListStart(detail, "steps");
		for (uint64 i = 0; i < n; i++)
			DurableDetailListAdd(detail, &items[i]);
		DurableDetailListEnd(detail);
	}
	pfree(items);
	return true;
}

/*
 * DurableJudgeTask
 *		The recovery of a task with no step in doubt: the task's own class
 *		and attempts decide.  A queryable task has no operation of its own
 *		to look up, so a person decides instead.
 */
void
DurableJudgeTask(const DurableTask *task, DurableVerdict *verdict)
{
	DurableActivityClass class = DurableParseActivityClass(task->class);

	memset(verdict, 0, sizeof(*verdict));
	verdict->action = DurableDecideRecovery(true, DURABLE_RECEIPT_NONE,
											DURABLE_CLASS_RETRY_SAFE(class),
											task->attempt, task->max_attempts,
											class == DURABLE_CLASS_QUERYABLE);
	if (verdict->action == DURABLE_RECOVERY_RECONCILE)
		verdict->action = DURABLE_RECOVERY_MANUAL_REVIEW;
	if (verdict->action == DURABLE_RECOVERY_RETRY_SAME_ACTIVITY)
		verdict->retry_wait = DurableRetryWait(task, 0);
}

/*
 * DurableVerdictMove
 *		Where a verdict sends the task: fill in to_state, run_at and
 *		stop_code of move.  A retry takes a retry token (recorded in detail).
 */
void
DurableVerdictMove(const DurableTask *task, const DurableVerdict *verdict,
				   TimestampTz now, DurableDetail *detail, DurableMove *move)
{
	switch (verdict->action)
	{
		case DURABLE_RECOVERY_RETRY_SAME_ACTIVITY:
			move->to_state = DURABLE_TASK_WAITING;
			move->run_at = DurableScheduleRetry(task, now, verdict->retry_wait,
												detail);
			break;
		case DURABLE_RECOVERY_RECORD_COMPLETION:
			/* every step took effect: the workflow resumes after them */
			move->to_state = DURABLE_TASK_READY;
			move->run_at = now;
			break;
		case DURABLE_RECOVERY_EXHAUSTED:
			move->to_state = DURABLE_TASK_FAILED;
			move->stop_code = "attempts_exhausted";
			break;
		case DURABLE_RECOVERY_RECORD_FAILURE:
			move->to_state = DURABLE_TASK_FAILED;
			move->stop_code = "step_failed";
			break;
		case DURABLE_RECOVERY_RECONCILE:
			/* parked until a reconcile handler looks its steps up */
			move->to_state = DURABLE_TASK_WAITING;
			move->run_at = DURABLE_AWAITING_RECONCILE;
			break;
		case DURABLE_RECOVERY_MANUAL_REVIEW:
			move->to_state = DURABLE_TASK_NEEDS_REVIEW;
			break;
		case DURABLE_RECOVERY_WAIT:
			elog(ERROR, "unexpected recovery action \"%s\" for task %lld",
				 DurableRecoveryActionName(verdict->action),
				 (long long) task->task_id);
	}
}

/*
 * DurableReleaseMove
 *		Where a task goes once nothing of it is in doubt any more, after a
 *		reconcile handler's receipt or an operator's decision: READY to
 *		resume, or FAILED when recovery failed one of its steps meanwhile,
 *		or CANCELLED when its parent was cancelled meanwhile.
 *		Returns false, filling in nothing, while a step is still in doubt.
 */
bool
DurableReleaseMove(DurableTask *task, const char *actor, TimestampTz now,
				   DurableDetail *detail, DurableMove *move)
{
	DurableVerdict verdict;
	int64		parent_id;

	if (task->steps_in_doubt > 0)
		return false;
	/* a cancelled parent's cascade, held back by the doubt, goes on now */
	parent_id = DurableCancelledParent(task);
	if (parent_id != 0)
	{
		move->to_state = DURABLE_TASK_CANCELLED;
		DurableDetailText(detail, "reason", "its parent was cancelled");
		DurableDetailInt(detail, "parent", parent_id);
		return true;
	}
	if (!DurableJudgeSteps(task, NULL, false, actor, now, NULL, &verdict))
		verdict.action = DURABLE_RECOVERY_RECORD_COMPLETION;
	DurableVerdictMove(task, &verdict, now, detail, move);
	return true;
}
