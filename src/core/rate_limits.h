/*-------------------------------------------------------------------------
 *
 * rate_limits.h
 *	  What rate_limits.c and rate_buckets.c share: one limit a task names,
 *	  read from its rate_limits and its limit's definition.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_RATE_LIMITS_H
#define DURABLE_RATE_LIMITS_H

#include "core/core.h"

/* one limit a task names, with its definition and its bucket's state */
typedef struct DurableRateUse
{
	char	   *name;			/* as the task names it: prefix or prefix:key */
	char	   *prefix;			/* the definition's name */
	const char *key;			/* "" for a limit without keys */
	int64		units;
	bool		defined;
	int32		rate;
	int64		per_us;
	int32		burst;
	TimestampTz tat;
	TimestampTz booked;
} DurableRateUse;

/* at most this many limits a task */
#define DURABLE_MAX_TASK_RATE_LIMITS 8

extern int	DurableRateUsesParse(Jsonb *limits, DurableRateUse *uses);
extern bool DurableRateUseDefinition(DurableRateUse *use);

#endif							/* DURABLE_RATE_LIMITS_H */
