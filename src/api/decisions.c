/*-------------------------------------------------------------------------
 *
 * decisions.c
 *	  The pure functions of the SQL API: the decision tables, the retry
 *	  delay, request hashes and idempotency keys (README, "The decision
 *	  functions").  Each checks its arguments and calls the pure layer.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

static void
check_attempt_counts(int32 attempts, int32 max_attempts)
{
	if (attempts < 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("attempts must not be negative"),
				errdetail("Attempts %d was given.", attempts));
	if (max_attempts < 1)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("max_attempts must be at least 1"),
				errdetail("Max attempts %d was given.", max_attempts));
}

/*
 * durable_next_action(attempts int, max_attempts int, elapsed interval,
 *					   deadline interval, error_class text,
 *					   next_delay interval = '0') RETURNS text
 *
 * A NULL deadline means there is none; every other NULL is 22004.  An
 * unknown error class, negative attempts or times, and max_attempts below
 * 1 are 22023.
 */
PG_FUNCTION_INFO_V1(durable_next_action);
Datum
durable_next_action(PG_FUNCTION_ARGS)
{
	int32		attempts;
	int32		max_attempts;
	int64		elapsed;
	int64		deadline = DURABLE_NO_DEADLINE;
	int64		next_delay;
	DurableErrorClass error_class;

	DurableRequireArg(fcinfo, 0, "attempts");
	DurableRequireArg(fcinfo, 1, "max_attempts");
	DurableRequireArg(fcinfo, 2, "elapsed");
	DurableRequireArg(fcinfo, 4, "error_class");
	DurableRequireArg(fcinfo, 5, "next_delay");

	attempts = PG_GETARG_INT32(0);
	max_attempts = PG_GETARG_INT32(1);
	check_attempt_counts(attempts, max_attempts);
	elapsed = DurableDelayArg(fcinfo, 2, "elapsed");
	if (!PG_ARGISNULL(3))
		deadline = DurableDelayArg(fcinfo, 3, "deadline");
	next_delay = DurableDelayArg(fcinfo, 5, "next_delay");
	error_class = DurableParseErrorClass(text_to_cstring(PG_GETARG_TEXT_PP(4)));

	PG_RETURN_TEXT_P(cstring_to_text(DurableNextActionName(
						 DurableDecideNext(attempts, max_attempts, elapsed,
										   deadline, error_class,
										   next_delay))));
}

/*
 * durable_recovery_action(lease_expired bool, receipt text, retry_safe bool,
 *						   attempts int, max_attempts int,
 *						   queryable bool = false) RETURNS text
 *
 * A NULL receipt means no evidence yet; every other NULL is 22004.  An
 * unknown receipt, negative attempts and max_attempts below 1 are 22023.
 */
PG_FUNCTION_INFO_V1(durable_recovery_action);
Datum
durable_recovery_action(PG_FUNCTION_ARGS)
{
	DurableReceipt receipt = DURABLE_RECEIPT_NONE;

	DurableRequireArg(fcinfo, 0, "lease_expired");
	DurableRequireArg(fcinfo, 2, "retry_safe");
	DurableRequireArg(fcinfo, 3, "attempts");
	DurableRequireArg(fcinfo, 4, "max_attempts");
	DurableRequireArg(fcinfo, 5, "queryable");

	check_attempt_counts(PG_GETARG_INT32(3), PG_GETARG_INT32(4));
	if (!PG_ARGISNULL(1))
		receipt = DurableParseReceipt(text_to_cstring(PG_GETARG_TEXT_PP(1)));

	PG_RETURN_TEXT_P(cstring_to_text(DurableRecoveryActionName(
						 DurableDecideRecovery(PG_GETARG_BOOL(0), receipt,
											   PG_GETARG_BOOL(2),
											   PG_GETARG_INT32(3),
											   PG_GETARG_INT32(4),
											   PG_GETARG_BOOL(5)))));
}

/*
 * durable_retry_delay(activity_id text, attempt int, base int = 2,
 *					   cap int = 60) RETURNS int
 *
 * Strict and immutable.  Raises 22023 when attempt, base or cap is below 1.
 */
PG_FUNCTION_INFO_V1(durable_retry_delay);
Datum
durable_retry_delay(PG_FUNCTION_ARGS)
{
	text	   *activity_id;
	int32		attempt;
	int32		base;
	int32		cap;

	/* not strict since 0.2.0: a NULL is a mistake, not an unknown delay */
	DurableRequireArg(fcinfo, 0, "activity_id");
	DurableRequireArg(fcinfo, 1, "attempt");
	DurableRequireArg(fcinfo, 2, "base");
	DurableRequireArg(fcinfo, 3, "cap");
	activity_id = PG_GETARG_TEXT_PP(0);
	attempt = PG_GETARG_INT32(1);
	base = PG_GETARG_INT32(2);
	cap = PG_GETARG_INT32(3);

	if (attempt < 1)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("attempt must be at least 1"),
				errdetail("Attempt %d was given; attempts are numbered from 1.",
						  attempt));
	if (base < 1)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("retry base must be at least 1 second"),
				errdetail("Base %d was given.", base));
	if (cap < 1)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("retry cap must be at least 1 second"),
				errdetail("Cap %d was given.", cap));

	PG_RETURN_INT32(DurableRetryDelay(VARDATA_ANY(activity_id),
									  VARSIZE_ANY_EXHDR(activity_id),
									  attempt, base, cap));
}

/*
 * durable_request_hash(request jsonb) RETURNS bytea
 *
 * SHA-256 of the canonical text of the request.  Immutable; a NULL
 * request is 22004 (since 0.2.0: a NULL hash would compare as unknown, and
 * a caller that binds keys to it would bind them to nothing).
 */
PG_FUNCTION_INFO_V1(durable_request_hash);
Datum
durable_request_hash(PG_FUNCTION_ARGS)
{
	DurableRequireArg(fcinfo, 0, "request");
	PG_RETURN_BYTEA_P(DurableJsonbHash(PG_GETARG_JSONB_P(0)));
}

/*
 * durable_idempotency_key(VARIADIC parts text[]) RETURNS text
 *
 * Strict and immutable.  A NULL part is 22004; no part at all, or a
 * multi-dimensional array, is 22023.
 */
PG_FUNCTION_INFO_V1(durable_idempotency_key);
Datum
durable_idempotency_key(PG_FUNCTION_ARGS)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("idempotency key parts must be a one-dimensional array"));

	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &nelems);
	if (nelems == 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("an idempotency key needs at least one part"));
	for (int i = 0; i < nelems; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					errmsg("idempotency key part %d is null", i + 1),
					errhint("Every part of the logical operation's name must be known when its key is derived."));
		elems[i] = PointerGetDatum(PG_DETOAST_DATUM_PACKED(elems[i]));
	}

	PG_RETURN_TEXT_P(cstring_to_text(DurableIdempotencyKey(nelems,
														   (text *const *) elems)));
}
