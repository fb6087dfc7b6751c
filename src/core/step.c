/*-------------------------------------------------------------------------
 *
 * step.c
 *	  Steps: the side-effecting operations of a task, moved through their
 *	  state machine by compare-and-swap.
 *
 * A step is planned once, with a class and a stable idempotency key that
 * never changes across attempts or takeovers; a replay gets the stored row
 * back, so a resumed worker skips committed steps and resends in-doubt ones
 * with the same key.  Allowed moves:
 *
 *		planned   -> started
 *		started   -> committed | failed | unknown | planned
 *		unknown   -> committed | planned | failed
 *		committed -> compensated
 *
 * Every other move raises 55U04; a version that is not the step's current
 * one raises 55U02.  Locking: every step change first locks the task row
 * under the caller's fence (DurableTaskHeld), so the steps of one task
 * change one at a time and the task's version numbers their events.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "access/xact.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

/* prefix of the steps durable_compensate plans */
#define DURABLE_COMPENSATION_PREFIX "compensate:"

/*
 * The longest name a step can be planned with: its compensation step,
 * "compensate:<name>", must still be a name the API takes.
 */
#define DURABLE_MAX_STEP_NAME_LEN \
	(DURABLE_MAX_NAME_LEN - (int) (sizeof(DURABLE_COMPENSATION_PREFIX) - 1))

/* columns of STMT_STEP_GET */
enum
{
	STEP_STATE = 1,
	STEP_CLASS,
	STEP_VERSION,
	STEP_ATTEMPT,
	STEP_ORDINAL,
	STEP_KEY,
	STEP_REQUEST_HASH,
	STEP_RESULT,
	STEP_RECEIPT,
	STEP_COMPENSATES
};

static const struct
{
	const char *from;
	const char *to;
}			step_edges[] =
{
	{"planned", "started"},
	{"started", "committed"},
	{"started", "failed"},
	{"started", "unknown"},
	{"started", "planned"},
	{"unknown", "committed"},
	{"unknown", "planned"},
	{"unknown", "failed"},
	{"committed", "compensated"},
};

static bool
step_edge_allowed(const char *from, const char *to)
{
	for (int i = 0; i < (int) lengthof(step_edges); i++)
		if (strcmp(step_edges[i].from, from) == 0 &&
			strcmp(step_edges[i].to, to) == 0)
			return true;
	return false;
}

/* started and unknown steps may have taken effect without anyone knowing */
bool
DurableStepStateInDoubt(const char *state)
{
	return strcmp(state, "started") == 0 || strcmp(state, "unknown") == 0;
}

/*
 * DurableStepFetch
 *		Read a step of a task; strings point into SPI memory.  Returns false
 *		when the task has no such step.
 */
bool
DurableStepFetch(const DurableTask *task, const char *name, DurableStep *step)
{
	Datum		args[3];
	bool		isnull;
	Datum		d;

	args[0] = Int32GetDatum(DURABLE_TASK_PARTITION(task->task_id));
	args[1] = Int64GetDatum(task->task_id);
	args[2] = CStringGetTextDatum(name);
	if (DurableExecuteStmt(STMT_STEP_GET, args, NULL, SPI_OK_SELECT, 1) == 0)
		return false;

	step->name = pstrdup(name);
	step->state = DurableResultText(0, STEP_STATE);
	step->class = DurableResultText(0, STEP_CLASS);
	step->version = (int32) DurableResultInt64(0, STEP_VERSION);
	step->attempt = (int32) DurableResultInt64(0, STEP_ATTEMPT);
	step->ordinal = (int32) DurableResultInt64(0, STEP_ORDINAL);
	step->idempotency_key = DurableResultText(0, STEP_KEY);
	step->request_hash = DatumGetByteaPCopy(DurableResultDatum(0, STEP_REQUEST_HASH, &isnull));
	d = DurableResultDatum(0, STEP_RESULT, &isnull);
	step->result = isnull ? NULL : DatumGetJsonbPCopy(d);
	step->receipt = DurableResultText(0, STEP_RECEIPT);
	step->compensates = DurableResultText(0, STEP_COMPENSATES);
	return true;
}

void
DurableStepFetchOrError(const DurableTask *task, const char *name,
						DurableStep *step)
{
	if (!DurableStepFetch(task, name, step))
		ereport(ERROR,
				errcode(ERRCODE_UNDEFINED_OBJECT),
				errmsg("step \"%s\" of task %lld does not exist",
					   name, (long long) task->task_id),
				errhint("Plan it first with durable_step()."));
}

/*
 * DurableStepInDoubt
 *		The latest step of a task that is started or unknown, if any.
 */
bool
DurableStepInDoubt(const DurableTask *task, DurableStep *step)
{
	Datum		args[2];
	char	   *name;

	if (task->steps_in_doubt == 0)
		return false;
	args[0] = Int32GetDatum(DURABLE_TASK_PARTITION(task->task_id));
	args[1] = Int64GetDatum(task->task_id);
	if (DurableExecuteStmt(STMT_STEPS_IN_DOUBT, args, NULL, SPI_OK_SELECT, 1) == 0)
		return false;
	name = DurableResultText(0, 1);
	return DurableStepFetch(task, name, step);
}

/* 55U02 unless the caller's version is the step's current one */
static void
check_step_version(const DurableTask *task, const DurableStep *step,
				   int32 expected)
{
	if (step->version != expected)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_VERSION_MISMATCH),
				errmsg("could not change step \"%s\" of task %lld because it was modified concurrently",
					   step->name, (long long) task->task_id),
				errdetail("Expected version %d, but the current version is %d.",
						  expected, step->version),
				errhint("Read the step again with durable_step() and decide from its current state."));
}

static void
report_bad_transition(const DurableTask *task, const DurableStep *step,
					  const char *to_state)
{
	ereport(ERROR,
			errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
			errmsg("cannot move step \"%s\" of task %lld from %s to %s",
				   step->name, (long long) task->task_id, step->state,
				   to_state),
			errdetail("The allowed moves are listed in durable.step_transitions."));
}

/*
 * DurableStepChangeState
 *		Apply a change to a step whose task row the caller holds locked:
 *		check the move against the state machine, update the row by
 *		compare-and-swap on its version, and append the event.  Updates
 *		*step and *task to what they are afterwards.
 */
void
DurableStepChangeState(DurableTask *task, DurableStep *step,
					   const DurableStepChange *change, TimestampTz now)
{
	Datum		args[14];
	char		nulls[14];
	DurableDetail own_detail;
	DurableDetail *detail = change->detail;
	int32		doubt_delta;

	if (change->evidence_only ? strcmp(step->state, change->to_state) != 0 :
		!step_edge_allowed(step->state, change->to_state))
		report_bad_transition(task, step, change->to_state);

	memset(nulls, ' ', sizeof(nulls));
	args[0] = Int32GetDatum(DURABLE_TASK_PARTITION(task->task_id));
	args[1] = Int64GetDatum(task->task_id);
	args[2] = CStringGetTextDatum(step->name);
	args[3] = CStringGetTextDatum(change->to_state);
	args[4] = Int32GetDatum(change->new_attempt ? 1 : 0);
	args[5] = TimestampTzGetDatum(now);
	args[6] = JsonbPGetDatum(change->result);
	nulls[6] = change->result ? ' ' : 'n';
	args[7] = change->receipt ? CStringGetTextDatum(change->receipt) : (Datum) 0;
	nulls[7] = change->receipt ? ' ' : 'n';
	args[8] = change->effect_id ? CStringGetTextDatum(change->effect_id) : (Datum) 0;
	nulls[8] = change->effect_id ? ' ' : 'n';
	args[9] = JsonbPGetDatum(change->evidence);
	nulls[9] = change->evidence ? ' ' : 'n';
	args[10] = change->error_class ? CStringGetTextDatum(change->error_class) : (Datum) 0;
	nulls[10] = change->error_class ? ' ' : 'n';
	args[11] = JsonbPGetDatum(change->error);
	nulls[11] = change->error ? ' ' : 'n';
	args[12] = BoolGetDatum(change->clear_evidence);
	args[13] = Int32GetDatum(step->version);
	if (DurableExecuteStmt(STMT_STEP_UPDATE, args, nulls,
					   SPI_OK_UPDATE_RETURNING, 0) != 1)
		elog(ERROR, "step \"%s\" of task %lld changed under its task's row lock",
			 step->name, (long long) task->task_id);

	doubt_delta = (DurableStepStateInDoubt(change->to_state) ? 1 : 0) -
		(DurableStepStateInDoubt(step->state) ? 1 : 0);

	if (detail == NULL)
	{
		DurableDetailInit(&own_detail);
		detail = &own_detail;
	}
	DurableDetailText(detail, "from", step->state);
	DurableDetailText(detail, "to", change->to_state);
	DurableDetailInt(detail, "version", step->version + 1);
	DurableDetailInt(detail, "attempt", step->attempt + (change->new_attempt ? 1 : 0));
	if (change->receipt)
		DurableDetailText(detail, "receipt", change->receipt);
	if (change->effect_id)
		DurableDetailText(detail, "effect_id", change->effect_id);
	if (change->evidence)
		DurableDetailJsonb(detail, "evidence", change->evidence);
	if (change->error_class)
		DurableDetailText(detail, "error_class", change->error_class);
	task->version = DurableAppendEvent(task, now, change->kind, change->actor,
									   DurableDetailFinish(detail), step->name,
									   doubt_delta);
	task->steps_in_doubt += doubt_delta;

	step->state = change->to_state;
	step->version++;
	if (change->new_attempt)
		step->attempt++;
	if (change->clear_evidence)
		step->receipt = NULL;
	else if (change->receipt)
		step->receipt = change->receipt;
}

/* a step name: like a queue name, at most DURABLE_MAX_NAME_LEN bytes */
static char *
step_name_arg(FunctionCallInfo fcinfo, int argno)
{
	return DurableNameArg(fcinfo, argno, "step name");
}

static int32
expected_version_arg(FunctionCallInfo fcinfo, int argno)
{
	DurableRequireArg(fcinfo, argno, "expected_version");
	return PG_GETARG_INT32(argno);
}

/*
 * plan_step
 *		Plan a step of a held task, or find it planned: returns true when
 *		this call planned it.  A replay with another request raises 55U03,
 *		one with another class 22023.
 */
static bool
plan_step(DurableTask *task, const char *name, const char *class,
		  Jsonb *request, const char *target, const char *compensates,
		  TimestampTz now, DurableStep *step)
{
	text	   *parts[4];
	int			nparts = 0;
	char		task_text[32];
	char	   *key;
	bytea	   *hash;
	Datum		args[10];
	char		nulls[10];
	DurableDetail detail;

	if (request != NULL)
		hash = DurableJsonbHash(request);
	else
	{
		hash = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
		SET_VARSIZE(hash, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
		DurableSha256("", 0, (uint8 *) VARDATA(hash));
	}

	if (DurableStepFetch(task, name, step))
	{
		if (!DurableRequestMatches(step->request_hash, hash, request))
			ereport(ERROR,
					errcode(ERRCODE_DURABLE_IDEMPOTENCY_CONFLICT),
					errmsg("step \"%s\" of task %lld was already planned with a different request",
						   name, (long long) task->task_id),
					errdetail("Its idempotency key \"%s\" is bound to the hash of the first request.",
							  step->idempotency_key),
					errhint("Give a different request its own step name."));
		if (strcmp(step->class, class) != 0)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("step \"%s\" of task %lld was planned with class \"%s\", not \"%s\"",
						   name, (long long) task->task_id, step->class, class));
		return false;
	}

	/* the installation id first: task ids may repeat after a reinstall */
	snprintf(task_text, sizeof(task_text), INT64_FORMAT, task->task_id);
	parts[nparts++] = cstring_to_text(DurableInstallationId());
	parts[nparts++] = cstring_to_text(task_text);
	parts[nparts++] = cstring_to_text(name);
	if (target != NULL)
		parts[nparts++] = cstring_to_text(target);
	key = DurableIdempotencyKey(nparts, parts);

	memset(nulls, ' ', sizeof(nulls));
	args[0] = Int32GetDatum(DURABLE_TASK_PARTITION(task->task_id));
	args[1] = Int64GetDatum(task->task_id);
	args[2] = CStringGetTextDatum(name);
	args[3] = CStringGetTextDatum(class);
	args[4] = Int32GetDatum(task->version + 1);	/* the plan event's seq */
	args[5] = TimestampTzGetDatum(now);
	args[6] = CStringGetTextDatum(key);
	args[7] = PointerGetDatum(hash);
	args[8] = JsonbPGetDatum(request);
	nulls[8] = request ? ' ' : 'n';
	args[9] = compensates ? CStringGetTextDatum(compensates) : (Datum) 0;
	nulls[9] = compensates ? ' ' : 'n';
	if (DurableExecuteStmt(STMT_STEP_INSERT, args, nulls, SPI_OK_INSERT, 0) != 1)
		elog(ERROR, "step \"%s\" of task %lld appeared under its task's row lock",
			 name, (long long) task->task_id);

	DurableDetailInit(&detail);
	DurableDetailText(&detail, "class", class);
	DurableDetailText(&detail, "idempotency_key", key);
	if (compensates)
		DurableDetailText(&detail, "compensates", compensates);
	task->version = DurableAppendEvent(task, now, "step_planned", NULL,
									   DurableDetailFinish(&detail), name, 0);
	DurableStepFetchOrError(task, name, step);
	return true;
}

/* one row of durable_step's result */
static void
put_step_row(ReturnSetInfo *rsinfo, const DurableStep *step)
{
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};

	values[0] = CStringGetTextDatum(step->state);
	values[1] = Int32GetDatum(step->version);
	values[2] = Int32GetDatum(step->attempt);
	values[3] = CStringGetTextDatum(step->idempotency_key);
	values[4] = JsonbPGetDatum(step->result);
	nulls[4] = step->result == NULL;
	values[5] = step->receipt ? CStringGetTextDatum(step->receipt) : (Datum) 0;
	nulls[5] = step->receipt == NULL;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * durable_step(task_id bigint, fence bigint, step text, class text,
 *				request jsonb = NULL, target text = NULL)
 *		RETURNS TABLE(state text, version int, attempt int,
 *					  idempotency_key text, result jsonb, receipt text)
 *
 * Plans the step (PLANNED) or returns it as it is: a committed step comes
 * back with its result, so a resumed worker skips it.  Its key is
 * durable_idempotency_key(installation_id, task_id, step[, target]) and
 * never changes.
 * Raises 55U01 for a stale fence, 55U03 for a replay with another request.
 */
PG_FUNCTION_INFO_V1(durable_step);
Datum
durable_step(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	char	   *name = step_name_arg(fcinfo, 2);
	char	   *class;
	Jsonb	   *request = DurableJsonbArg(fcinfo, 4, "request");
	char	   *target = NULL;
	DurableTask task;
	DurableStep step;

	if (strlen(name) > DURABLE_MAX_STEP_NAME_LEN)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("step name \"%s\" is too long", DurableClipName(name, 20)),
				errdetail("It has %zu bytes; a step name may have at most %d, so that its compensation step \"%s<name>\" has at most %d.",
						  strlen(name), DURABLE_MAX_STEP_NAME_LEN,
						  DURABLE_COMPENSATION_PREFIX, DURABLE_MAX_NAME_LEN));
	DurableRequireArg(fcinfo, 3, "class");
	class = text_to_cstring(PG_GETARG_TEXT_PP(3));
	(void) DurableParseActivityClass(class);
	if (!PG_ARGISNULL(5))
		target = DurableTextArgCString(fcinfo, 5, "target");

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	DurableTaskHeld(task_id, fence, &task);
	plan_step(&task, name, class, request, target, NULL,
			  GetCurrentTransactionStartTimestamp(), &step);
	put_step_row((ReturnSetInfo *) fcinfo->resultinfo, &step);
	SPI_finish();
	return (Datum) 0;
}

/*
 * change_held_step
 *		Apply a change to a step of a task the caller holds under fence, by
 *		compare-and-swap on expected; returns the step's new version.
 */
static int32
change_held_step(int64 task_id, int64 fence, const char *name, int32 expected,
				 const DurableStepChange *change)
{
	DurableTask task;
	DurableStep step;

	DurableTaskHeld(task_id, fence, &task);
	DurableStepFetchOrError(&task, name, &step);
	check_step_version(&task, &step, expected);
	DurableStepChangeState(&task, &step, change,
						   GetCurrentTransactionStartTimestamp());
	return step.version;
}

/*
 * durable_step_start(task_id bigint, fence bigint, step text,
 *					  expected_version int) RETURNS int
 *
 * PLANNED -> STARTED, a new attempt; returns the step's new version.  Call
 * it, and commit, before the external call, so that a crash after the call
 * leaves a step that recovery knows may have taken effect.
 */
PG_FUNCTION_INFO_V1(durable_step_start);
Datum
durable_step_start(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	char	   *name = step_name_arg(fcinfo, 2);
	int32		expected = expected_version_arg(fcinfo, 3);
	DurableStepChange change = {0};
	int32		version;

	change.to_state = "started";
	change.new_attempt = true;
	change.clear_evidence = true;
	change.kind = "step_started";
	SPI_connect();
	version = change_held_step(task_id, fence, name, expected, &change);
	SPI_finish();
	PG_RETURN_INT32(version);
}

/*
 * durable_step_unknown(task_id bigint, fence bigint, step text,
 *						expected_version int, reason text = NULL) RETURNS int
 *
 * STARTED -> UNKNOWN: the call timed out and nobody knows whether it took
 * effect.  A timeout is not a failure: the step is never retried without
 * evidence (a receipt) or a person's decision.
 */
PG_FUNCTION_INFO_V1(durable_step_unknown);
Datum
durable_step_unknown(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	char	   *name = step_name_arg(fcinfo, 2);
	int32		expected = expected_version_arg(fcinfo, 3);
	DurableStepChange change = {0};
	DurableDetail detail;
	int32		version;

	DurableDetailInit(&detail);
	if (!PG_ARGISNULL(4))
		DurableDetailText(&detail, "reason", DurableTextArgCString(fcinfo, 4, "reason"));
	change.to_state = "unknown";
	change.kind = "step_unknown";
	change.detail = &detail;
	SPI_connect();
	version = change_held_step(task_id, fence, name, expected, &change);
	SPI_finish();
	PG_RETURN_INT32(version);
}

/*
 * DurableCommitStep
 *		The step form of durable_commit: STARTED, or UNKNOWN with a
 *		'succeeded' receipt, -> COMMITTED.  Committing a compensation step
 *		moves the step it compensates to COMPENSATED.
 */
void
DurableCommitStep(int64 task_id, int64 fence, const char *name,
				  int32 expected, Jsonb *result)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	DurableStep step;
	DurableStepChange change = {0};

	DurableTaskHeld(task_id, fence, &task);
	DurableStepFetchOrError(&task, name, &step);
	check_step_version(&task, &step, expected);
	if (strcmp(step.state, "unknown") == 0 &&
		(step.receipt == NULL || strcmp(step.receipt, "succeeded") != 0))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("cannot commit step \"%s\" of task %lld without evidence",
					   name, (long long) task_id),
				errdetail("The step's outcome is unknown."),
				errhint("Record what the external system says with durable_record_receipt()."));
	change.to_state = "committed";
	change.result = result;
	change.kind = "step_committed";
	DurableStepChangeState(&task, &step, &change, now);

	if (step.compensates != NULL)
	{
		DurableStep original;
		DurableStepChange compensated = {0};

		DurableStepFetchOrError(&task, step.compensates, &original);
		if (strcmp(original.state, "compensated") != 0)
		{
			compensated.to_state = "compensated";
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
	if (strcmp(step.state, "started") != 0)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("cannot fail step \"%s\" of task %lld in state %s",
					   name, (long long) task_id, step.state),
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
	move.from_state = "running";
	move.fence = fence;
	move.error = error;
	move.allow_doubt = true;

	switch (action)
	{
		case DURABLE_NEXT_SCHEDULE_RETRY:
			change.to_state = "planned";
			change.clear_evidence = true;
			own = DURABLE_RECOVERY_RETRY_SAME_ACTIVITY;
			break;
		case DURABLE_NEXT_MANUAL_REVIEW:
			change.to_state = "unknown";
			own = DURABLE_RECOVERY_MANUAL_REVIEW;
			break;
		case DURABLE_NEXT_ATTEMPTS_EXHAUSTED:
			change.to_state = "failed";
			own = DURABLE_RECOVERY_EXHAUSTED;
			break;
		case DURABLE_NEXT_FAIL_PERMANENT:
		case DURABLE_NEXT_DEADLINE_EXCEEDED:
			change.to_state = "failed";
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
 * DurableSettleStep
 *		Apply a recovery decision to an in-doubt step of a task whose row
 *		the caller holds locked; receipt and evidence, when given, are
 *		recorded with the move (a completion's evidence becomes the step's
 *		result).  Returns the step's new state; the task's move, if any, is
 *		the caller's.
 */
const char *
DurableSettleStep(DurableTask *task, DurableStep *step,
				  DurableRecoveryAction action, const char *actor,
				  const char *receipt, Jsonb *evidence, TimestampTz now)
{
	DurableStepChange change = {0};

	change.actor = actor;
	change.receipt = receipt;
	change.evidence = evidence;
	switch (action)
	{
		case DURABLE_RECOVERY_RECORD_COMPLETION:
			change.to_state = "committed";
			change.kind = "step_committed";
			change.result = evidence;
			break;
		case DURABLE_RECOVERY_RECORD_FAILURE:
		case DURABLE_RECOVERY_EXHAUSTED:
			change.to_state = "failed";
			change.kind = "step_failed";
			break;
		case DURABLE_RECOVERY_RETRY_SAME_ACTIVITY:
			change.to_state = "planned";
			change.clear_evidence = true;
			change.kind = "step_replanned";
			break;
		case DURABLE_RECOVERY_RECONCILE:
		case DURABLE_RECOVERY_MANUAL_REVIEW:
			change.to_state = "unknown";
			change.kind = "step_unknown";
			break;
		case DURABLE_RECOVERY_WAIT:
			return step->state;
	}
	if (strcmp(step->state, change.to_state) != 0)
		DurableStepChangeState(task, step, &change, now);
	return step->state;
}

/*
 * durable_record_receipt(task_id bigint, fence bigint, step text,
 *						  receipt text, effect_id text = NULL,
 *						  evidence jsonb = NULL) RETURNS text
 *
 * Records what the external system says about a started or unknown step:
 * 'succeeded', 'failed_permanent' or 'not_executed'.  On a started step it
 * is kept as evidence for recovery ('not_executed' puts the step back to
 * PLANNED at once).  On an unknown step it settles the step through the
 * recovery table: committed, failed, or planned again with the same key;
 * and when a reconcile handler holds the task (durable_claim_reconcile),
 * the task is released: READY to resume, or FAILED.  Returns the step's
 * state afterwards.
 */
PG_FUNCTION_INFO_V1(durable_record_receipt);
Datum
durable_record_receipt(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	char	   *name = step_name_arg(fcinfo, 2);
	char	   *receipt_name;
	DurableReceipt receipt;
	char	   *effect_id = NULL;
	Jsonb	   *evidence = DurableJsonbArg(fcinfo, 5, "evidence");
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	DurableStep step;
	DurableStepChange change = {0};
	char		state[NAMEDATALEN];

	DurableRequireArg(fcinfo, 3, "receipt");
	receipt_name = text_to_cstring(PG_GETARG_TEXT_PP(3));
	receipt = DurableParseReceipt(receipt_name);
	if (!PG_ARGISNULL(4))
		effect_id = DurableTextArgCString(fcinfo, 4, "effect_id");

	SPI_connect();
	DurableTaskHeld(task_id, fence, &task);
	DurableStepFetchOrError(&task, name, &step);
	if (!DurableStepStateInDoubt(step.state))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("cannot record a receipt for step \"%s\" of task %lld in state %s",
					   name, (long long) task_id, step.state),
				errhint("Receipts are evidence about a started or unknown step."));

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

	if (strcmp(step.state, "started") == 0 && receipt == DURABLE_RECEIPT_NOT_EXECUTED)
		DurableSettleStep(&task, &step, DURABLE_RECOVERY_RETRY_SAME_ACTIVITY,
						  NULL, NULL, NULL, now);
	else if (strcmp(step.state, "unknown") == 0)
	{
		DurableActivityClass class = DurableParseActivityClass(step.class);
		DurableRecoveryAction action;

		action = DurableDecideRecovery(true, receipt,
									   DURABLE_CLASS_RETRY_SAFE(class),
									   step.attempt, task.max_attempts,
									   class == DURABLE_CLASS_QUERYABLE);
		DurableSettleStep(&task, &step, action, NULL, NULL, NULL, now);

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
			move.from_state = "running";
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
	/* the state names point into SPI memory: copy before SPI_finish */
	strlcpy(state, step.state, sizeof(state));
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(state));
}

/*
 * durable_claim_reconcile(queue text, worker text, lease interval = NULL,
 *						   batch int = 1)
 *		RETURNS TABLE(task_id bigint, fence bigint, lease_until timestamptz,
 *					  step text, idempotency_key text, request jsonb)
 *
 * Hands reconcile handlers the tasks whose queryable step's outcome is
 * unknown, under a lease with a new fence, like durable_claim: the handler
 * looks the operation up by its idempotency key and records what it finds
 * with durable_record_receipt().  A look-up is not an attempt.
 */
PG_FUNCTION_INFO_V1(durable_claim_reconcile);
Datum
durable_claim_reconcile(PG_FUNCTION_ARGS)
{
	return DurableClaimResult(fcinfo, DURABLE_CLAIM_RECONCILE);
}

/*
 * durable_checkpoint(task_id bigint, fence bigint, checkpoint jsonb,
 *					  expected_version int) RETURNS int
 *
 * Saves the task's checkpoint by compare-and-swap on its checkpoint
 * version (0 before the first) and returns the new version; claims hand the
 * last checkpoint to the next holder.  Raises 55U02 for another version.
 */
PG_FUNCTION_INFO_V1(durable_checkpoint);
Datum
durable_checkpoint(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	Jsonb	   *checkpoint;
	int32		expected = expected_version_arg(fcinfo, 3);
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	Datum		args[3];
	DurableDetail detail;

	DurableRequireArg(fcinfo, 2, "checkpoint");
	checkpoint = DurableJsonbArg(fcinfo, 2, "checkpoint");

	SPI_connect();
	DurableTaskHeld(task_id, fence, &task);
	if (task.checkpoint_version != expected)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_VERSION_MISMATCH),
				errmsg("could not save the checkpoint of task %lld because it was modified concurrently",
					   (long long) task_id),
				errdetail("Expected version %d, but the current version is %d.",
						  expected, task.checkpoint_version));
	args[0] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[1] = Int64GetDatum(task_id);
	args[2] = JsonbPGetDatum(checkpoint);
	DurableExecuteStmt(STMT_CHECKPOINT, args, NULL, SPI_OK_UPDATE_RETURNING, 0);

	DurableDetailInit(&detail);
	DurableDetailInt(&detail, "checkpoint_version", expected + 1);
	DurableAppendEvent(&task, now, "checkpoint", NULL,
					   DurableDetailFinish(&detail), NULL, 0);
	SPI_finish();
	PG_RETURN_INT32(expected + 1);
}

/*
 * durable_compensate(task_id bigint, fence bigint)
 *		RETURNS TABLE(step text, compensates text, state text, version int,
 *					  idempotency_key text)
 *
 * Plans one idempotent compensation step, "compensate:<step>", for each
 * committed step, and returns them newest first: the order in which to run
 * them.  Committing a compensation step moves its step to COMPENSATED.
 * Calling it again plans nothing new and returns the same steps, so a
 * compensation never takes effect twice.
 */
PG_FUNCTION_INFO_V1(durable_compensate);
Datum
durable_compensate(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	Datum		args[2];
	uint64		n;
	char	  **originals;

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	DurableTaskHeld(task_id, fence, &task);
	args[0] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[1] = Int64GetDatum(task_id);
	n = DurableExecuteStmt(STMT_STEPS_TO_COMPENSATE, args, NULL, SPI_OK_SELECT, 0);
	originals = palloc(sizeof(char *) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
		originals[i] = DurableResultText(i, 1);

	for (uint64 i = 0; i < n; i++)
	{
		char	   *name = psprintf(DURABLE_COMPENSATION_PREFIX "%s", originals[i]);
		DurableStep step;
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		plan_step(&task, name, "idempotent", NULL, NULL, originals[i], now, &step);
		values[0] = CStringGetTextDatum(name);
		values[1] = CStringGetTextDatum(originals[i]);
		values[2] = CStringGetTextDatum(step.state);
		values[3] = Int32GetDatum(step.version);
		values[4] = CStringGetTextDatum(step.idempotency_key);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}
