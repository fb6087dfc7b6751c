/*-------------------------------------------------------------------------
 *
 * states.c
 *	  The states of a task and of a step: their names, as the SQL enums
 *	  durable.task_state and durable.step_state spell them, in one table
 *	  each.  The C code compares the C enums; a state is text only where
 *	  it is read from a row or bound as a parameter.
 *
 *-------------------------------------------------------------------------
 */
#include "pure/pure.h"

static const char *const task_state_names[] = {
	[DURABLE_TASK_CREATED] = "created",
	[DURABLE_TASK_READY] = "ready",
	[DURABLE_TASK_RUNNING] = "running",
	[DURABLE_TASK_WAITING] = "waiting",
	[DURABLE_TASK_COMPLETED] = "completed",
	[DURABLE_TASK_FAILED] = "failed",
	[DURABLE_TASK_CANCELLED] = "cancelled",
	[DURABLE_TASK_NEEDS_REVIEW] = "needs_review",
};

static const char *const step_state_names[] = {
	[DURABLE_STEP_PLANNED] = "planned",
	[DURABLE_STEP_STARTED] = "started",
	[DURABLE_STEP_COMMITTED] = "committed",
	[DURABLE_STEP_FAILED] = "failed",
	[DURABLE_STEP_UNKNOWN] = "unknown",
	[DURABLE_STEP_COMPENSATED] = "compensated",
};

StaticAssertDecl(lengthof(task_state_names) == DURABLE_TASK_NSTATES,
				 "a name for every task state");
StaticAssertDecl(lengthof(step_state_names) == DURABLE_STEP_NSTATES,
				 "a name for every step state");

const char *
DurableTaskStateName(DurableTaskState state)
{
	Assert(state >= 0 && state < DURABLE_TASK_NSTATES);
	return task_state_names[state];
}

const char *
DurableStepStateName(DurableStepState state)
{
	Assert(state >= 0 && state < DURABLE_STEP_NSTATES);
	return step_state_names[state];
}

/* the index of name in names, or -1 */
static int
state_index(const char *const *names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

/*
 * DurableParseTaskState
 *		A task's state from its name, as read from a row.  The column's type
 *		allows no other name, so another one means that the type and this
 *		library disagree: an internal error (XX000), never a guess.
 */
DurableTaskState
DurableParseTaskState(const char *name)
{
	int			i = state_index(task_state_names, DURABLE_TASK_NSTATES, name);

	if (i < 0)
		ereport(ERROR,
				errcode(ERRCODE_INTERNAL_ERROR),
				errmsg("unknown task state \"%s\"", name),
				errdetail("durable.task_state has a state this library does not know."));
	return (DurableTaskState) i;
}

/*
 * DurableParseStepState
 *		A step's state from its name, as read from a row; an unknown one is
 *		an internal error (XX000), as for a task.
 */
DurableStepState
DurableParseStepState(const char *name)
{
	int			i = state_index(step_state_names, DURABLE_STEP_NSTATES, name);

	if (i < 0)
		ereport(ERROR,
				errcode(ERRCODE_INTERNAL_ERROR),
				errmsg("unknown step state \"%s\"", name),
				errdetail("durable.step_state has a state this library does not know."));
	return (DurableStepState) i;
}
