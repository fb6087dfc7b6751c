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
#include "pure/pure.h"

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
