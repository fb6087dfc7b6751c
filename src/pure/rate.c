/*-------------------------------------------------------------------------
 *
 * rate.c
 *	  The generic cell rate algorithm (GCRA) of a rate limit: whether units
 *	  taken now conform, and if not, from when they will.
 *
 * A limit of rate units per period with a burst admits at most burst
 * units at once and rate units per period after that.  Its state is one
 * time, tat (the theoretical arrival time): when every unit taken so far
 * is paid back, at one unit per emission interval T = period / rate.  n
 * units taken at now conform when, from max(tat, now), paying them back
 * would end no later than now + burst * T; they then move tat on by n * T.
 * So in any window of length w the units taken are at most burst + w / T:
 * tat ends no later than the window's end + burst * T and grew from no
 * earlier than its start by every unit taken in it.  Times are rounded
 * against the caller: what is paid back up, the tolerance down, so that
 * rounding never admits a unit more.
 *
 *-------------------------------------------------------------------------
 */
#include "pure/pure.h"

#include <math.h>

/*
 * DurableRateTake
 *		Whether units of a limit (rate units per per_us microseconds, at
 *		most burst at once) taken at now conform to its state tat (-infinity
 *		for none yet).  If so, *next is its state after them; if not,
 *		*admit_at is the first time they will conform, with nothing taken
 *		meanwhile.  More units than burst (a limit lowered since the task
 *		named them) conform once the bucket is empty, and are paid back in
 *		full.
 */
bool
DurableRateTake(TimestampTz tat, TimestampTz now, int64 per_us, int32 rate,
				int32 burst, int64 units, TimestampTz *next, TimestampTz *admit_at)
{
	double		emission = (double) per_us / rate;
	TimestampTz start = Max(tat, now);
	int64		checked = Min(units, (int64) burst);
	double		slack = floor((burst - checked) * emission);
	double		paid = ceil(units * emission);

	if ((double) (start - now) <= slack)
	{
		/* a tat past the last finite time only ever holds the limit shut */
		*next = paid >= (double) (END_TIMESTAMP - 1 - start) ?
			END_TIMESTAMP - 1 : start + (int64) paid;
		return true;
	}
	*admit_at = start - (int64) slack;
	return false;
}
