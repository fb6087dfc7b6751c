/*-------------------------------------------------------------------------
 *
 * retry.c
 *	  Deterministic retry delays with stable jitter.
 *
 * The delay of an attempt depends only on the activity id, the attempt
 * number and the policy, so a replay computes the same plan and a storm of
 * simultaneous failures spreads out instead of waking up together.
 * Pure: no SPI, no clock.
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include <math.h>

#include "fmgr.h"
#include "utils/builtins.h"

/*
 * DurableRetryDelay
 *		Delay in whole seconds before attempt number "attempt" of an activity.
 *
 * ceiling = min(cap, base * 2^(attempt - 1)); f = the first four bytes of
 * SHA-256("<activity_id>:<attempt>") read big-endian, over 2^32 - 1;
 * delay = max(1, floor(ceiling * (0.5 + f * 0.5))).  The arguments must
 * already be checked (attempt, base and cap at least 1).
 */
int32
DurableRetryDelay(const char *activity_id, size_t len,
				  int32 attempt, int32 base, int32 cap)
{
	int64		ceiling;
	char		suffix[16];
	int			suffix_len;
	char	   *input;
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	uint32		head;
	double		f;
	double		delay;

	Assert(attempt >= 1 && base >= 1 && cap >= 1);

	/*
	 * base is below 2^31, so base << 31 and beyond are above any cap: stop
	 * doubling there instead of overflowing.
	 */
	if (attempt - 1 >= 31)
		ceiling = cap;
	else
		ceiling = Min((int64) cap, (int64) base << (attempt - 1));

	suffix_len = snprintf(suffix, sizeof(suffix), ":%d", attempt);
	input = palloc(len + suffix_len);
	memcpy(input, activity_id, len);
	memcpy(input + len, suffix, suffix_len);
	DurableSha256(input, len + suffix_len, digest);
	pfree(input);

	head = ((uint32) digest[0] << 24) | ((uint32) digest[1] << 16) |
		((uint32) digest[2] << 8) | (uint32) digest[3];
	f = (double) head / (double) PG_UINT32_MAX;
	delay = floor((double) ceiling * (0.5 + f * 0.5));

	return (int32) Max(1.0, delay);
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
