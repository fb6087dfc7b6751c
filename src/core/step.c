/*-------------------------------------------------------------------------
 *
 * step.c
 *	  Steps: the side-effecting operations of a task, moved through their
 *	  state machine by compare-and-swap.  A step's rows only: reading them,
 *	  planning, changing and settling one step.  What a step's outcome does
 *	  to its task is outcome.c's.
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
 * Nothing here moves a task.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"

static const struct
{
	DurableStepState from;
	DurableStepState to;
}			step_edges[] =
{
	{DURABLE_STEP_PLANNED, DURABLE_STEP_STARTED},
	{DURABLE_STEP_STARTED, DURABLE_STEP_COMMITTED},
	{DURABLE_STEP_STARTED, DURABLE_STEP_FAILED},
	{DURABLE_STEP_STARTED, DURABLE_STEP_UNKNOWN},
	{DURABLE_STEP_STARTED, DURABLE_STEP_PLANNED},
	{DURABLE_STEP_UNKNOWN, DURABLE_STEP_COMMITTED},
	{DURABLE_STEP_UNKNOWN, DURABLE_STEP_PLANNED},
	{DURABLE_STEP_UNKNOWN, DURABLE_STEP_FAILED},
	{DURABLE_STEP_COMMITTED, DURABLE_STEP_COMPENSATED},
};

static bool
step_edge_allowed(DurableStepState from, DurableStepState to)
{
	for (int i = 0; i < (int) lengthof(step_edges); i++)
		if (step_edges[i].from == from && step_edges[i].to == to)
			return true;
	return false;
}

/* started and unknown steps may have taken effect without anyone knowing */
bool
DurableStepStateInDoubt(DurableStepState state)
{
	return state == DURABLE_STEP_STARTED || state == DURABLE_STEP_UNKNOWN;
}

enum
{
	STEP_STATE,
	STEP_CLASS,
	STEP_VERSION,
	STEP_ATTEMPT,
	STEP_ORDINAL,
	STEP_KEY,
	STEP_REQUEST_HASH,
	STEP_RESULT,
	STEP_RECEIPT,
	STEP_EFFECT_ID,
	STEP_COMPENSATES,
	STEP_NCOLUMNS
};
static const DurableColumn step_columns[STEP_NCOLUMNS] = {
	[STEP_STATE] = {"state", TEXTOID},
	[STEP_CLASS] = {"class", TEXTOID},
	[STEP_VERSION] = {"version", INT4OID},
	[STEP_ATTEMPT] = {"attempt", INT4OID},
	[STEP_ORDINAL] = {"ordinal", INT4OID},
	[STEP_KEY] = {"idempotency_key", TEXTOID},
	[STEP_REQUEST_HASH] = {"request_hash", BYTEAOID},
	[STEP_RESULT] = {"result", JSONBOID},
	[STEP_RECEIPT] = {"receipt", TEXTOID},
	[STEP_EFFECT_ID] = {"effect_id", TEXTOID},
	[STEP_COMPENSATES] = {"compensates", TEXTOID},
};
enum
{
	GET_PARTITION,
	GET_TASK_ID,
	GET_STEP,
	GET_NPARAMS
};
static const DurableParam step_get_params[GET_NPARAMS] = {
	[GET_PARTITION] = {"partition", INT4OID},
	[GET_TASK_ID] = {"task_id", INT8OID},
	[GET_STEP] = {"step", TEXTOID},
};
static DurableStatement step_get = {
	.name = "step_get",
	.sql = "SELECT state::text, class::text, version, attempt, ordinal,"
	" idempotency_key, request_hash, result, receipt, effect_id, compensates"
	" FROM durable.live_steps"
	" WHERE partition_key = $partition AND task_id = $task_id AND step = $step",
	DURABLE_PARAMS(step_get_params),
	DURABLE_COLUMNS(step_columns),
};

/*
 * DurableStepFetch
 *		Read a step of a task; strings point into SPI memory.  Returns false
 *		when the task has no such step.
 */
bool
DurableStepFetch(const DurableTask *task, const char *name, DurableStep *step)
{
	DurableResult res;
	Datum		args[GET_NPARAMS];
	bool		isnull;
	Datum		d;

	args[GET_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task->task_id));
	args[GET_TASK_ID] = Int64GetDatum(task->task_id);
	args[GET_STEP] = CStringGetTextDatum(name);
	res = DurableRun(&step_get, args, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 0)
		return false;

	step->name = pstrdup(name);
	step->state = DurableParseStepState(DurableGetText(res, 0, STEP_STATE));
	step->class = DurableGetText(res, 0, STEP_CLASS);
	step->version = DurableGetInt32(res, 0, STEP_VERSION);
	step->attempt = DurableGetInt32(res, 0, STEP_ATTEMPT);
	step->ordinal = DurableGetInt32(res, 0, STEP_ORDINAL);
	step->idempotency_key = DurableGetText(res, 0, STEP_KEY);
	step->request_hash = DatumGetByteaPCopy(DurableGetDatum(res, 0, STEP_REQUEST_HASH, &isnull));
	d = DurableGetDatum(res, 0, STEP_RESULT, &isnull);
	step->result = isnull ? NULL : DatumGetJsonbPCopy(d);
	step->receipt = DurableGetText(res, 0, STEP_RECEIPT);
	step->effect_id = DurableGetText(res, 0, STEP_EFFECT_ID);
	step->compensates = DurableGetText(res, 0, STEP_COMPENSATES);
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

/* the names of steps of a task, newest first */
enum
{
	STEP_NAME,
	STEP_NAME_NCOLUMNS
};
static const DurableColumn step_name_columns[STEP_NAME_NCOLUMNS] = {
	[STEP_NAME] = {"step", TEXTOID},
};
/* the steps of one task */
enum
{
	STEPS_PARTITION,
	STEPS_TASK_ID,
	STEPS_NPARAMS
};
static const DurableParam steps_params[STEPS_NPARAMS] = {
	[STEPS_PARTITION] = {"partition", INT4OID},
	[STEPS_TASK_ID] = {"task_id", INT8OID},
};
static DurableStatement steps_in_doubt = {
	.name = "steps_in_doubt",
	.sql = "SELECT step FROM durable.live_steps"
	" WHERE partition_key = $partition AND task_id = $task_id"
	" AND state IN ('started', 'unknown')"
	" ORDER BY ordinal DESC",
	DURABLE_PARAMS(steps_params),
	DURABLE_COLUMNS(step_name_columns),
};

/*
 * DurableStepInDoubt
 *		The latest step of a task that is started or unknown, if any.
 */
bool
DurableStepInDoubt(const DurableTask *task, DurableStep *step)
{
	DurableResult res;
	Datum		args[STEPS_NPARAMS];
	char	   *name;

	if (task->steps_in_doubt == 0)
		return false;
	args[STEPS_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task->task_id));
	args[STEPS_TASK_ID] = Int64GetDatum(task->task_id);
	res = DurableRun(&steps_in_doubt, args, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 0)
		return false;
	name = DurableGetText(res, 0, STEP_NAME);
	return DurableStepFetch(task, name, step);
}

static DurableStatement steps_unsettled = {
	.name = "steps_unsettled",
	.sql = "SELECT step FROM durable.live_steps"
	" WHERE partition_key = $partition AND task_id = $task_id"
	" AND state IN ('started', 'unknown', 'failed')"
	" ORDER BY ordinal DESC",
	DURABLE_PARAMS(steps_params),
	DURABLE_COLUMNS(step_name_columns),
};

/*
 * DurableUnsettledSteps
 *		The names of the steps of a task that are started, unknown or
 *		failed, newest first; *n is how many.
 */
char	  **
DurableUnsettledSteps(const DurableTask *task, uint64 *n)
{
	DurableResult res;
	Datum		args[STEPS_NPARAMS];
	char	  **names;

	args[STEPS_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task->task_id));
	args[STEPS_TASK_ID] = Int64GetDatum(task->task_id);
	res = DurableRun(&steps_unsettled, args, NULL, SPI_OK_SELECT, 0);
	*n = res.rows;
	names = palloc(sizeof(char *) * Max(*n, 1));
	for (uint64 i = 0; i < *n; i++)
		names[i] = DurableGetText(res, i, STEP_NAME);
	return names;
}

/*
 * DurableStepCheckVersion
 *		55U02 unless the caller's version is the step's current one.
 */
void
DurableStepCheckVersion(const DurableTask *task, const DurableStep *step,
				   int32 expected)
{
	if (step->version != expected)
	{
		DurableCountNow(task->queue, DURABLE_COUNT_VERSION_CONFLICTS);
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_VERSION_MISMATCH),
				errmsg("could not change step \"%s\" of task %lld because it was modified concurrently",
					   step->name, (long long) task->task_id),
				errdetail("Expected version %d, but the current version is %d.",
						  expected, step->version),
				errhint("Read the step again with durable_step() and decide from its current state."));
	}
}

static void
report_bad_transition(const DurableTask *task, const DurableStep *step,
					  DurableStepState to_state)
{
	ereport(ERROR,
			errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
			errmsg("cannot move step \"%s\" of task %lld from %s to %s",
				   step->name, (long long) task->task_id,
				   DurableStepStateName(step->state), DurableStepStateName(to_state)),
			errdetail("The allowed moves are listed in durable.step_transitions."));
}

enum
{
	STEP_UPDATED_VERSION,
	STEP_UPDATED_NCOLUMNS
};
static const DurableColumn step_updated_columns[STEP_UPDATED_NCOLUMNS] = {
	[STEP_UPDATED_VERSION] = {"version", INT4OID},
};
enum
{
	UPDATE_PARTITION,
	UPDATE_TASK_ID,
	UPDATE_STEP,
	UPDATE_STATE,
	UPDATE_NEW_ATTEMPT,
	UPDATE_NOW,
	UPDATE_RESULT,
	UPDATE_RECEIPT,
	UPDATE_EFFECT_ID,
	UPDATE_EVIDENCE,
	UPDATE_ERROR_CLASS,
	UPDATE_ERROR,
	UPDATE_CLEAR_EVIDENCE,
	UPDATE_EXPECTED,
	UPDATE_NPARAMS
};
static const DurableParam step_update_params[UPDATE_NPARAMS] = {
	[UPDATE_PARTITION] = {"partition", INT4OID},
	[UPDATE_TASK_ID] = {"task_id", INT8OID},
	[UPDATE_STEP] = {"step", TEXTOID},
	[UPDATE_STATE] = {"state", TEXTOID},
	[UPDATE_NEW_ATTEMPT] = {"new_attempt", INT4OID},
	[UPDATE_NOW] = {"now", TIMESTAMPTZOID},
	[UPDATE_RESULT] = {"result", JSONBOID},
	[UPDATE_RECEIPT] = {"receipt", TEXTOID},
	[UPDATE_EFFECT_ID] = {"effect_id", TEXTOID},
	[UPDATE_EVIDENCE] = {"evidence", JSONBOID},
	[UPDATE_ERROR_CLASS] = {"error_class", TEXTOID},
	[UPDATE_ERROR] = {"error", JSONBOID},
	[UPDATE_CLEAR_EVIDENCE] = {"clear_evidence", BOOLOID},
	[UPDATE_EXPECTED] = {"expected", INT4OID},
};
static DurableStatement step_update = {
	.name = "step_update",
	.sql = "UPDATE durable.live_steps SET state = $state::durable.step_state,"
	" version = version + 1, attempt = attempt + $new_attempt, updated_at = $now,"
	" result = COALESCE($result, result),"
	" receipt = CASE WHEN $clear_evidence THEN NULL ELSE COALESCE($receipt, receipt) END,"
	" effect_id = CASE WHEN $clear_evidence THEN NULL"
	" ELSE COALESCE($effect_id, effect_id) END,"
	" evidence = CASE WHEN $clear_evidence THEN NULL"
	" ELSE COALESCE($evidence, evidence) END,"
	" error_class = COALESCE($error_class, error_class),"
	" error = COALESCE($error, error)"
	" WHERE partition_key = $partition AND task_id = $task_id AND step = $step"
	" AND version = $expected"
	" RETURNING version",
	DURABLE_PARAMS(step_update_params),
	DURABLE_COLUMNS(step_updated_columns),
};

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
	Datum		args[UPDATE_NPARAMS];
	char		nulls[UPDATE_NPARAMS];
	DurableDetail own_detail;
	DurableDetail *detail = change->detail;
	int32		doubt_delta;

	if (change->evidence_only ? step->state != change->to_state :
		!step_edge_allowed(step->state, change->to_state))
		report_bad_transition(task, step, change->to_state);

	if (detail == NULL)
	{
		DurableDetailInit(&own_detail);
		detail = &own_detail;
	}
	/* a start reserves from the task's budgets, leaving doubt settles */
	if (change->to_state == DURABLE_STEP_STARTED && change->reserve != NULL)
		DurableSpendReserve(task, step->name, change->reserve, now, detail);
	else if (DurableStepStateInDoubt(step->state) &&
			 !DurableStepStateInDoubt(change->to_state))
		DurableSpendSettle(task, step->name, change->to_state == DURABLE_STEP_COMMITTED,
						   change->spent, now, detail);

	memset(nulls, ' ', sizeof(nulls));
	args[UPDATE_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task->task_id));
	args[UPDATE_TASK_ID] = Int64GetDatum(task->task_id);
	args[UPDATE_STEP] = CStringGetTextDatum(step->name);
	args[UPDATE_STATE] = CStringGetTextDatum(DurableStepStateName(change->to_state));
	args[UPDATE_NEW_ATTEMPT] = Int32GetDatum(change->new_attempt ? 1 : 0);
	args[UPDATE_NOW] = TimestampTzGetDatum(now);
	args[UPDATE_RESULT] = JsonbPGetDatum(change->result);
	nulls[UPDATE_RESULT] = change->result ? ' ' : 'n';
	args[UPDATE_RECEIPT] = change->receipt ? CStringGetTextDatum(change->receipt) : (Datum) 0;
	nulls[UPDATE_RECEIPT] = change->receipt ? ' ' : 'n';
	args[UPDATE_EFFECT_ID] = change->effect_id ? CStringGetTextDatum(change->effect_id) : (Datum) 0;
	nulls[UPDATE_EFFECT_ID] = change->effect_id ? ' ' : 'n';
	args[UPDATE_EVIDENCE] = JsonbPGetDatum(change->evidence);
	nulls[UPDATE_EVIDENCE] = change->evidence ? ' ' : 'n';
	args[UPDATE_ERROR_CLASS] = change->error_class ? CStringGetTextDatum(change->error_class) : (Datum) 0;
	nulls[UPDATE_ERROR_CLASS] = change->error_class ? ' ' : 'n';
	args[UPDATE_ERROR] = JsonbPGetDatum(change->error);
	nulls[UPDATE_ERROR] = change->error ? ' ' : 'n';
	args[UPDATE_CLEAR_EVIDENCE] = BoolGetDatum(change->clear_evidence);
	args[UPDATE_EXPECTED] = Int32GetDatum(step->version);
	if (DurableRun(&step_update, args, nulls,
				   SPI_OK_UPDATE_RETURNING, 0).rows != 1)
		elog(ERROR, "step \"%s\" of task %lld changed under its task's row lock",
			 step->name, (long long) task->task_id);

	if (change->to_state == DURABLE_STEP_STARTED && change->new_attempt)
		DurableCount(task->queue, DURABLE_COUNT_STEPS_STARTED, 1);
	doubt_delta = (DurableStepStateInDoubt(change->to_state) ? 1 : 0) -
		(DurableStepStateInDoubt(step->state) ? 1 : 0);

	DurableDetailText(detail, "from", DurableStepStateName(step->state));
	DurableDetailText(detail, "to", DurableStepStateName(change->to_state));
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

enum
{
	INSERT_PARTITION,
	INSERT_TASK_ID,
	INSERT_STEP,
	INSERT_CLASS,
	INSERT_ORDINAL,
	INSERT_NOW,
	INSERT_IDEMPOTENCY_KEY,
	INSERT_REQUEST_HASH,
	INSERT_REQUEST,
	INSERT_COMPENSATES,
	INSERT_NPARAMS
};
static const DurableParam step_insert_params[INSERT_NPARAMS] = {
	[INSERT_PARTITION] = {"partition", INT4OID},
	[INSERT_TASK_ID] = {"task_id", INT8OID},
	[INSERT_STEP] = {"step", TEXTOID},
	[INSERT_CLASS] = {"class", TEXTOID},
	[INSERT_ORDINAL] = {"ordinal", INT4OID},
	[INSERT_NOW] = {"now", TIMESTAMPTZOID},
	[INSERT_IDEMPOTENCY_KEY] = {"idempotency_key", TEXTOID},
	[INSERT_REQUEST_HASH] = {"request_hash", BYTEAOID},
	[INSERT_REQUEST] = {"request", JSONBOID},
	[INSERT_COMPENSATES] = {"compensates", TEXTOID},
};
static DurableStatement step_insert = {
	.name = "step_insert",
	.sql = "INSERT INTO durable.live_steps (partition_key, task_id, step, state, class,"
	" ordinal, created_at, updated_at, idempotency_key, request_hash,"
	" request, compensates)"
	" VALUES ($partition, $task_id, $step, 'planned', $class::durable.activity_class,"
	" $ordinal, $now, $now, $idempotency_key, $request_hash, $request, $compensates)"
	" ON CONFLICT (partition_key, task_id, step) DO NOTHING",
	DURABLE_PARAMS(step_insert_params),
};

/*
 * DurablePlanStep
 *		Plan a step of a held task, or find it planned: returns true when
 *		this call planned it.  A replay with another request raises 55U03,
 *		one with another class 22023.
 */
bool
DurablePlanStep(DurableTask *task, const char *name, const char *class,
				Jsonb *request, const char *target, const char *compensates,
				TimestampTz now, DurableStep *step)
{
	text	   *parts[4];
	int			nparts = 0;
	char		task_text[32];
	char	   *key;
	bytea	   *hash;
	Datum		args[INSERT_NPARAMS];
	char		nulls[INSERT_NPARAMS];
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
	args[INSERT_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task->task_id));
	args[INSERT_TASK_ID] = Int64GetDatum(task->task_id);
	args[INSERT_STEP] = CStringGetTextDatum(name);
	args[INSERT_CLASS] = CStringGetTextDatum(class);
	args[INSERT_ORDINAL] = Int32GetDatum(task->version + 1);	/* the plan event's seq */
	args[INSERT_NOW] = TimestampTzGetDatum(now);
	args[INSERT_IDEMPOTENCY_KEY] = CStringGetTextDatum(key);
	args[INSERT_REQUEST_HASH] = PointerGetDatum(hash);
	args[INSERT_REQUEST] = JsonbPGetDatum(request);
	nulls[INSERT_REQUEST] = request ? ' ' : 'n';
	args[INSERT_COMPENSATES] = compensates ? CStringGetTextDatum(compensates) : (Datum) 0;
	nulls[INSERT_COMPENSATES] = compensates ? ' ' : 'n';
	if (DurableRun(&step_insert, args, nulls, SPI_OK_INSERT, 0).rows != 1)
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

/*
 * DurableStepGetOrPlan
 *		durable_step: plan a step of a task held under fence (PLANNED), or
 *		read it back as it is.
 */
void
DurableStepGetOrPlan(int64 task_id, int64 fence, const char *name,
					 const char *class, Jsonb *request, const char *target,
					 DurableStep *step)
{
	DurableTask task;

	DurableTaskHeld(task_id, fence, &task);
	DurablePlanStep(&task, name, class, request, target, NULL,
					GetCurrentTransactionStartTimestamp(), step);
}

/*
 * change_held_step
 *		Apply a change to a step of a task the caller holds under fence, by
 *		compare-and-swap on expected; returns the step's new version.
 */
static int32
change_held_step(int64 task_id, int64 fence, const char *name,
				 int32 expected, const DurableStepChange *change)
{
	DurableTask task;
	DurableStep step;

	DurableTaskHeld(task_id, fence, &task);
	DurableStepFetchOrError(&task, name, &step);
	DurableStepCheckVersion(&task, &step, expected);
	DurableStepChangeState(&task, &step, change,
						   GetCurrentTransactionStartTimestamp());
	return step.version;
}

/*
 * DurableStepStart
 *		PLANNED -> STARTED, a new attempt, reserving reserve (unless NULL)
 *		from the task's budgets; returns the step's new version.
 */
int32
DurableStepStart(int64 task_id, int64 fence, const char *name, int32 expected,
				 Numeric reserve)
{
	DurableStepChange change = {0};

	change.to_state = DURABLE_STEP_STARTED;
	change.reserve = reserve;
	change.new_attempt = true;
	change.clear_evidence = true;
	change.kind = "step_started";
	return change_held_step(task_id, fence, name, expected, &change);
}

/*
 * DurableStepUnknown
 *		STARTED -> UNKNOWN, with the reason when given; returns the step's
 *		new version.
 */
int32
DurableStepUnknown(int64 task_id, int64 fence, const char *name,
				   int32 expected, const char *reason)
{
	DurableStepChange change = {0};
	DurableDetail detail;

	DurableDetailInit(&detail);
	if (reason != NULL)
		DurableDetailText(&detail, "reason", reason);
	change.to_state = DURABLE_STEP_UNKNOWN;
	change.kind = "step_unknown";
	change.detail = &detail;
	return change_held_step(task_id, fence, name, expected, &change);
}

/*
 * DurableSettleStep
 *		Apply a recovery decision to an in-doubt step of a task whose row
 *		the caller holds locked; receipt and evidence, when given, are
 *		recorded with the move (a completion's evidence becomes the step's
 *		result, and spent, unless NULL, what it spent: spend.c).  Returns
 *		the step's new state; the task's move, if any, is the caller's.
 */
const char *
DurableSettleStep(DurableTask *task, DurableStep *step,
				  DurableRecoveryAction action, const char *actor,
				  const char *receipt, Jsonb *evidence, Numeric spent,
				  TimestampTz now)
{
	DurableStepChange change = {0};

	change.actor = actor;
	change.spent = spent;
	change.receipt = receipt;
	change.evidence = evidence;
	switch (action)
	{
		case DURABLE_RECOVERY_RECORD_COMPLETION:
			change.to_state = DURABLE_STEP_COMMITTED;
			change.kind = "step_committed";
			change.result = evidence;
			break;
		case DURABLE_RECOVERY_RECORD_FAILURE:
		case DURABLE_RECOVERY_EXHAUSTED:
			change.to_state = DURABLE_STEP_FAILED;
			change.kind = "step_failed";
			break;
		case DURABLE_RECOVERY_RETRY_SAME_ACTIVITY:
			change.to_state = DURABLE_STEP_PLANNED;
			change.clear_evidence = true;
			change.kind = "step_replanned";
			break;
		case DURABLE_RECOVERY_RECONCILE:
		case DURABLE_RECOVERY_MANUAL_REVIEW:
			change.to_state = DURABLE_STEP_UNKNOWN;
			change.kind = "step_unknown";
			break;
		case DURABLE_RECOVERY_WAIT:
			return DurableStepStateName(step->state);
	}
	if (step->state != change.to_state)
		DurableStepChangeState(task, step, &change, now);
	return DurableStepStateName(step->state);
}

