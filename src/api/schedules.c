/*-------------------------------------------------------------------------
 *
 * schedules.c
 *	  Cron schedules: durable_cron_next, durable_schedule and
 *	  durable_unschedule.
 *
 * durable_cron_next is the pure layer's (pure/cron.c, pure/zone.c); the
 * schedules themselves, and the reconciler's part that enqueues what they
 * owe, are core/schedule.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "access/xact.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

static char *
required_text(FunctionCallInfo fcinfo, int argno, const char *name)
{
	DurableRequireArg(fcinfo, argno, name);
	return text_to_cstring(PG_GETARG_TEXT_PP(argno));
}

/*
 * durable_cron_next(cron text, after timestamptz, timezone text = 'UTC')
 *		RETURNS timestamptz
 *
 * A pure function: the first time after "after" at which the cron
 * expression fires, read in the time zone.  22023 for a bad expression or
 * an unknown zone, 22004 for a NULL.
 */
PG_FUNCTION_INFO_V1(durable_cron_next);
Datum
durable_cron_next(PG_FUNCTION_ARGS)
{
	char	   *text = required_text(fcinfo, 0, "cron");
	char	   *zone = required_text(fcinfo, 2, "timezone");
	DurableCron cron;
	TimestampTz after;
	TimestampTz next;

	DurableRequireArg(fcinfo, 1, "after");
	after = PG_GETARG_TIMESTAMPTZ(1);
	DurableCronParse(text, &cron);
	if (TIMESTAMP_NOT_FINITE(after))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("after must be a finite time"));
	next = DurableCronNext(&cron, after, DurableTimeZone(zone));
	if (TIMESTAMP_NOT_FINITE(next))
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(next);
}

/*
 * durable_schedule(name text, cron text, queue text, payload jsonb = '{}',
 *		timezone text = 'UTC', backfill boolean = false) RETURNS timestamptz
 *
 * Creates the schedule, or replaces the one of that name (its next run is
 * then counted from the later of now and its last run); returns its next
 * run.  Raises 22023 for a bad
 * expression or zone, 42704 for an unknown queue, 42501 for a queue the
 * caller may not enqueue into.
 */
PG_FUNCTION_INFO_V1(durable_schedule);
Datum
durable_schedule(PG_FUNCTION_ARGS)
{
	char	   *name = DurableNameArg(fcinfo, 0, "schedule name");
	char	   *text = required_text(fcinfo, 1, "cron");
	char	   *queue = DurableNameArg(fcinfo, 2, "queue name");
	Jsonb	   *payload;
	char	   *zone = required_text(fcinfo, 4, "timezone");
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	TimestampTz next;

	DurableRequireArg(fcinfo, 3, "payload");
	payload = DurableJsonbArg(fcinfo, 3, "payload");
	DurableRequireArg(fcinfo, 5, "backfill");

	SPI_connect();
	next = DurableScheduleSet(name, text, zone, queue, payload,
							  PG_GETARG_BOOL(5), now);
	SPI_finish();
	PG_RETURN_TIMESTAMPTZ(next);
}

/*
 * durable_unschedule(name text) RETURNS boolean
 *
 * Removes a schedule; false when there was none.  Occurrences already
 * enqueued stay.
 */
PG_FUNCTION_INFO_V1(durable_unschedule);
Datum
durable_unschedule(PG_FUNCTION_ARGS)
{
	char	   *name = DurableNameArg(fcinfo, 0, "schedule name");
	bool		removed;

	SPI_connect();
	removed = DurableUnschedule(name);
	SPI_finish();
	PG_RETURN_BOOL(removed);
}

/*
 * durable_pause_schedule(name text) RETURNS void
 * durable_resume_schedule(name text) RETURNS timestamptz
 *
 * A paused schedule enqueues nothing until it is resumed; resumed, it runs
 * on from its next occurrence after now (none of those it missed), whose
 * time it returns.  42704 for no schedule.
 */
PG_FUNCTION_INFO_V1(durable_pause_schedule);
Datum
durable_pause_schedule(PG_FUNCTION_ARGS)
{
	char	   *name = DurableNameArg(fcinfo, 0, "schedule name");

	SPI_connect();
	(void) DurableSchedulePause(name, true, GetCurrentTransactionStartTimestamp());
	SPI_finish();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(durable_resume_schedule);
Datum
durable_resume_schedule(PG_FUNCTION_ARGS)
{
	char	   *name = DurableNameArg(fcinfo, 0, "schedule name");
	TimestampTz next;

	SPI_connect();
	next = DurableSchedulePause(name, false, GetCurrentTransactionStartTimestamp());
	SPI_finish();
	PG_RETURN_TIMESTAMPTZ(next);
}

/*
 * durable_trigger_schedule(name text) RETURNS bigint
 *
 * Enqueues an occurrence of the schedule now, outside its expression,
 * paused or not; returns its task.  42704 for no schedule, 42501 for a
 * queue the caller may not enqueue into.
 */
PG_FUNCTION_INFO_V1(durable_trigger_schedule);
Datum
durable_trigger_schedule(PG_FUNCTION_ARGS)
{
	char	   *name = DurableNameArg(fcinfo, 0, "schedule name");
	int64		task_id;

	SPI_connect();
	task_id = DurableScheduleTrigger(name, GetCurrentTransactionStartTimestamp());
	SPI_finish();
	PG_RETURN_INT64(task_id);
}
