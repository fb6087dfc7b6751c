/*-------------------------------------------------------------------------
 *
 * steps.c
 *	  The steps of the SQL API (README, "Steps"): planning, starting and
 *	  settling steps, receipts, reconcile claims, checkpoints and
 *	  compensations.  Each checks its arguments and calls the core
 *	  (step.c, outcome.c).
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/tuplestore.h"

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

/* one row of durable_step's result */
static void
put_step_row(ReturnSetInfo *rsinfo, const DurableStep *step)
{
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};

	values[0] = CStringGetTextDatum(DurableStepStateName(step->state));
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
	DurableStepGetOrPlan(task_id, fence, name, class, request, target, &step);
	put_step_row((ReturnSetInfo *) fcinfo->resultinfo, &step);
	SPI_finish();
	return (Datum) 0;
}

/*
 * durable_step_start(task_id bigint, fence bigint, step text,
 *					  expected_version int, reserve numeric = NULL) RETURNS int
 *
 * PLANNED -> STARTED, a new attempt; returns the step's new version.  Call
 * it, and commit, before the external call, so that a crash after the call
 * leaves a step that recovery knows may have taken effect.  With reserve,
 * takes that much from every budget the task names, or none (55U05 when
 * one has too little left; the step stays planned).
 */
PG_FUNCTION_INFO_V1(durable_step_start);
Datum
durable_step_start(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	char	   *name = step_name_arg(fcinfo, 2);
	int32		expected = expected_version_arg(fcinfo, 3);
	Numeric		reserve = DurableNumericArg(fcinfo, 4);
	int32		version;

	SPI_connect();
	version = DurableStepStart(task_id, fence, name, expected, reserve);
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
	char	   *reason = NULL;
	int32		version;

	if (!PG_ARGISNULL(4))
		reason = DurableTextArgCString(fcinfo, 4, "reason");
	SPI_connect();
	version = DurableStepUnknown(task_id, fence, name, expected, reason);
	SPI_finish();
	PG_RETURN_INT32(version);
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
	char		state[NAMEDATALEN];

	DurableRequireArg(fcinfo, 3, "receipt");
	receipt_name = text_to_cstring(PG_GETARG_TEXT_PP(3));
	receipt = DurableParseReceipt(receipt_name);
	if (!PG_ARGISNULL(4))
		effect_id = DurableTextArgCString(fcinfo, 4, "effect_id");

	SPI_connect();
	strlcpy(state, DurableRecordReceipt(task_id, fence, name, receipt,
										receipt_name, effect_id, evidence),
			sizeof(state));
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
	int32		version;

	DurableRequireArg(fcinfo, 2, "checkpoint");
	checkpoint = DurableJsonbArg(fcinfo, 2, "checkpoint");

	SPI_connect();
	version = DurableSaveCheckpoint(task_id, fence, checkpoint, expected);
	SPI_finish();
	PG_RETURN_INT32(version);
}

/*
 * compensation_classes
 *		The classes argument of durable_compensate: a jsonb object of step
 *		names and class names, each checked (22023), into names and
 *		classes.  Returns how many.
 */
static int
compensation_classes(Jsonb *arg, const char ***names, const char ***classes)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken token;
	int			n = 0;

	if (!JB_ROOT_IS_OBJECT(arg) || JB_ROOT_IS_SCALAR(arg))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("classes must be a JSON object"),
				errhint("Give the class of each step's compensation by the step's name, as in {\"charge\": \"queryable\"}."));
	*names = palloc(sizeof(char *) * Max(JB_ROOT_COUNT(arg), 1));
	*classes = palloc(sizeof(char *) * Max(JB_ROOT_COUNT(arg), 1));
	it = JsonbIteratorInit(&arg->root);
	while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (token == WJB_KEY)
			(*names)[n] = pnstrdup(v.val.string.val, v.val.string.len);
		else if (token == WJB_VALUE)
		{
			if (v.type != jbvString)
				ereport(ERROR,
						errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("the class of step \"%s\" in classes must be a string",
							   (*names)[n]));
			(*classes)[n] = pnstrdup(v.val.string.val, v.val.string.len);
			(void) DurableParseActivityClass((*classes)[n]);
			n++;
		}
	}
	return n;
}

/*
 * durable_compensate(task_id bigint, fence bigint, classes jsonb = NULL)
 *		RETURNS TABLE(step text, compensates text, state text, version int,
 *					  idempotency_key text)
 *
 * Plans one compensation step, "compensate:<step>", for each committed
 * step, and returns them newest first: the order in which to run them.
 * Each takes the class classes names for its step, else its step's (a
 * compensation planned already keeps its own).  Committing a compensation
 * step moves its step to COMPENSATED.  Calling it again plans nothing new
 * and returns the same steps, so a compensation never takes effect twice.
 * The SQL function of 0.8.0 and before has no classes (PG_NARGS() 2).
 */
PG_FUNCTION_INFO_V1(durable_compensate);
Datum
durable_compensate(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	DurableCompensation *steps;
	uint64		n;
	int			nclasses = 0;
	const char **names = NULL;
	const char **classes = NULL;

	if (PG_NARGS() > 2 && !PG_ARGISNULL(2))
		nclasses = compensation_classes(DurableJsonbArg(fcinfo, 2, "classes"),
										&names, &classes);
	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	n = DurableCompensate(task_id, fence, nclasses, names, classes, &steps);
	for (uint64 i = 0; i < n; i++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		values[0] = CStringGetTextDatum(steps[i].name);
		values[1] = CStringGetTextDatum(steps[i].compensates);
		values[2] = CStringGetTextDatum(DurableStepStateName(steps[i].step.state));
		values[3] = Int32GetDatum(steps[i].step.version);
		values[4] = CStringGetTextDatum(steps[i].step.idempotency_key);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}
