/*-------------------------------------------------------------------------
 *
 * period.c
 *	  The periods of a spend budget on the UTC calendar: when the one that
 *	  holds a time began.
 *
 * A budget with a period starts again at each period's start.  A period
 * is a whole number of months (it starts on the first of a month, counted
 * from January of year 0) or of days and hours (counted from Monday
 * 2001-01-01 00:00 UTC: a day starts at midnight, a week on Monday, an
 * hour on the hour).  A period of months and days at once has no such
 * start and is refused.  The session's time zone plays no part.
 *
 *-------------------------------------------------------------------------
 */
#include "pure/pure.h"

#include "datatype/timestamp.h"
#include "utils/datetime.h"

/* Monday 2001-01-01 00:00 UTC, in microseconds after 2000-01-01 */
#define PERIOD_ANCHOR	((int64) 366 * USECS_PER_DAY)

/*
 * DurableCheckBudgetPeriod
 *		A budget's period, or an error (22023): positive, and of months only
 *		or of days and hours only.
 */
void
DurableCheckBudgetPeriod(const Interval *period)
{
	if (period->month < 0 || period->day < 0 || period->time < 0 ||
		(period->month == 0 && period->day == 0 && period->time == 0))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("a budget's period must be positive"));
	if (period->month > 0 && (period->day != 0 || period->time != 0))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("a budget's period must be whole months or days and hours, not both"),
				errhint("Use '1 month' or '30 days'."));
	/* an infinite period (PG 17) is months and days; any other fits */
	(void) DurableIntervalMicroseconds(period, "a budget's period");
}

/* a mod b, for b > 0, in [0, b) */
static int64
floor_mod(int64 a, int64 b)
{
	int64		r = a % b;

	return r < 0 ? r + b : r;
}

/*
 * DurableBudgetPeriodStart
 *		The start of the period (checked above) that holds at.
 */
TimestampTz
DurableBudgetPeriodStart(TimestampTz at, const Interval *period)
{
	struct pg_tm tm;
	fsec_t		fsec;
	TimestampTz start;

	if (TIMESTAMP_NOT_FINITE(at))
		return at;
	if (period->month == 0)
	{
		int64		length = DurableIntervalMicroseconds(period, "a budget's period");

		return at - floor_mod(at - PERIOD_ANCHOR, length);
	}
	if (timestamp2tm(at, NULL, &tm, &fsec, NULL, NULL) != 0)
		ereport(ERROR,
				errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				errmsg("timestamp out of range"));
	{
		int64		months = (int64) tm.tm_year * MONTHS_PER_YEAR + (tm.tm_mon - 1);

		months -= floor_mod(months, period->month);
		memset(&tm, 0, sizeof(tm));
		tm.tm_year = (int) (months / MONTHS_PER_YEAR);
		tm.tm_mon = (int) (months % MONTHS_PER_YEAR) + 1;
		tm.tm_mday = 1;
	}
	if (tm2timestamp(&tm, 0, NULL, &start) != 0)
		ereport(ERROR,
				errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				errmsg("timestamp out of range"));
	return start;
}
