/*-------------------------------------------------------------------------
 *
 * spend.h
 *	  What spend.c (budgets, the budgets a task names, the tick's part) and
 *	  spend_reserve.c (what steps reserve and settle) share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_SPEND_H
#define DURABLE_SPEND_H

#include "core/core.h"

#include "utils/timestamp.h"

/* the start of the period of a budget that holds now; NULL without one */
static inline Datum
DurableBudgetPeriodStartArg(const Interval *period, TimestampTz now, char *isnull)
{
	*isnull = period ? ' ' : 'n';
	return period ? TimestampTzGetDatum(DurableBudgetPeriodStart(now, period)) : (Datum) 0;
}

extern void DurableBudgetFold(const char *name, const Interval *period, TimestampTz now);

#endif							/* DURABLE_SPEND_H */
