/*-------------------------------------------------------------------------
 *
 * zone.c
 *	  Cron expressions read in a time zone, as pure functions.
 *
 * A wall-clock time is read in the schedule's time zone as PostgreSQL reads
 * a local timestamp: a time the clock skips at a DST change fires as far
 * past the change (02:30 becomes 03:30), and a time the clock passes twice
 * fires once, the second time.
 *
 * This is cron.c's other half, the one that needs the server's time zone
 * code (pg_tzset, timestamp2tm): cron.c needs nothing of the server but
 * ereport, so that tools/fuzz can link it outside, and this file would
 * keep it from linking.  No SPI.
 *
 *-------------------------------------------------------------------------
 */
#include "pure/pure.h"

#include "pgtime.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

/*
 * DurableTimeZone
 *		The time zone of that name; 22023 for one not recognized.
 */
pg_tz *
DurableTimeZone(const char *name)
{
	pg_tz	   *tz = pg_tzset(name);

	if (tz == NULL)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("time zone \"%s\" not recognized", name),
				errhint("Name a zone of the IANA database, such as \"Europe/Berlin\", or \"UTC\"."));
	return tz;
}

/* the wall-clock minute of an instant in tz */
static void
wall_time(TimestampTz at, pg_tz *tz, DurableWallTime *wall)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			offset;

	if (timestamp2tm(at, &offset, &tm, &fsec, NULL, tz) != 0)
		ereport(ERROR,
				errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				errmsg("timestamp out of range"));
	wall->year = tm.tm_year;
	wall->month = tm.tm_mon;
	wall->day = tm.tm_mday;
	wall->hour = tm.tm_hour;
	wall->minute = tm.tm_min;
}

/* the instant a wall-clock minute in tz stands for; false out of range */
static bool
wall_instant(const DurableWallTime *wall, pg_tz *tz, TimestampTz *result)
{
	struct pg_tm tm = {0};
	int			offset;

	tm.tm_year = wall->year;
	tm.tm_mon = wall->month;
	tm.tm_mday = wall->day;
	tm.tm_hour = wall->hour;
	tm.tm_min = wall->minute;
	offset = DetermineTimeZoneOffset(&tm, tz);
	return tm2timestamp(&tm, 0, &offset, result) == 0;
}

/*
 * DurableCronNext
 *		The first time after "after" at which the expression fires in tz;
 *		DT_NOEND when there is none within the range of timestamps.
 */
TimestampTz
DurableCronNext(const DurableCron *cron, TimestampTz after, pg_tz *tz)
{
	DurableWallTime wall;
	TimestampTz result;

	/*
	 * Local times map to instants in order, except around a DST change:
	 * skip a candidate that maps to "after" or before it.
	 */
	wall_time(after, tz, &wall);
	while (DurableCronNextWall(cron, &wall) && wall_instant(&wall, tz, &result))
	{
		if (result > after)
			return result;
	}
	return DT_NOEND;
}

/*
 * DurableCronLatest
 *		The latest time at or before "at" at which the expression fires in
 *		tz; DT_NOBEGIN when there is none.  It walks back from "at", not
 *		forward from some earlier time, so that it costs the same after an
 *		hour or a century of downtime.
 */
TimestampTz
DurableCronLatest(const DurableCron *cron, TimestampTz at, pg_tz *tz)
{
	DurableWallTime wall;
	TimestampTz result;

	/* around a DST change, skip a candidate that maps after "at" */
	wall_time(at, tz, &wall);
	for (bool first = true;
		 DurableCronPrevWall(cron, &wall, first) && wall_instant(&wall, tz, &result);
		 first = false)
	{
		if (result <= at)
			return result;
	}
	return DT_NOBEGIN;
}
