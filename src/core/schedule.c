/*-------------------------------------------------------------------------
 *
 * schedule.c
 *	  Cron schedules: durable_cron_next, durable_schedule, durable_unschedule
 *	  and the reconciler's part, which enqueues the occurrences that are due.
 *
 * A wall-clock time is read in the schedule's time zone as PostgreSQL reads
 * a local timestamp: a time the clock skips at a DST change fires as far
 * past the change (02:30 becomes 03:30), and a time the clock passes twice
 * fires once, the second time.
 *
 * Each occurrence is enqueued with the idempotency key
 * "schedule:<name>:<epoch seconds>", so that it is enqueued once whoever
 * enqueues it: the due schedules are taken FOR NO KEY UPDATE SKIP LOCKED,
 * and a second reconciler, or durable_reconcile() from pg_cron, that got
 * there too would find the key taken.  After downtime only the latest
 * occurrence missed is enqueued, unless the schedule asks to backfill.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "access/xact.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

/* a backfill enqueues at most this many occurrences of a schedule a tick */
#define DURABLE_BACKFILL_PER_TICK 100

static pg_tz *
time_zone(const char *name)
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
 * cron_next
 *		The first time after "after" at which the expression fires in tz;
 *		DT_NOEND when there is none within the range of timestamps.
 */
static TimestampTz
cron_next(const DurableCron *cron, TimestampTz after, pg_tz *tz)
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
 * cron_latest
 *		The latest time at or before "at" at which the expression fires in
 *		tz; DT_NOBEGIN when there is none.  It walks back from "at", not
 *		forward from some earlier time, so that it costs the same after an
 *		hour or a century of downtime.
 */
static TimestampTz
cron_latest(const DurableCron *cron, TimestampTz at, pg_tz *tz)
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

/*
 * A schedule replaced or removed is no longer the one that failed: its
 * failure leaves durable.status (tick_failures) with it.
 */
static void
forget_failure(const char *name)
{
	Datum		part = CStringGetTextDatum(psprintf("schedule: %s", name));

	DurableExecuteStmt(STMT_TICK_FAILURE_CLEAR, &part, NULL, SPI_OK_DELETE, 0);
}

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
	next = cron_next(&cron, after, time_zone(zone));
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
	TimestampTz after = now;
	DurableCron cron;
	pg_tz	   *tz;
	DurableQueue settings;
	TimestampTz next;
	Datum		arg;
	Datum		args[9];

	DurableRequireArg(fcinfo, 3, "payload");
	payload = DurableJsonbArg(fcinfo, 3, "payload");
	DurableRequireArg(fcinfo, 5, "backfill");
	DurableCronParse(text, &cron);
	tz = time_zone(zone);

	SPI_connect();
	DurableQueueGetShared(queue, &settings);
	DurableCheckRestrictedQueue(queue, settings.restricted, DURABLE_PRIV_ENQUEUE);

	/*
	 * A schedule replaced runs on from the later of now and its last run:
	 * a reconciler may have enqueued an occurrence after this transaction
	 * began, and that one must not come again (with the new payload, its
	 * key would be taken by another request).  Its row lock, waited for,
	 * shows the last run committed.
	 */
	arg = CStringGetTextDatum(name);
	if (DurableExecuteStmt(STMT_SCHEDULE_LOCK, &arg, NULL, SPI_OK_SELECT, 1) == 1)
	{
		bool		isnull;
		Datum		last_run = DurableResultDatum(0, 1, &isnull);

		if (!isnull)
			after = Max(after, DatumGetTimestampTz(last_run));
	}
	next = cron_next(&cron, after, tz);
	if (TIMESTAMP_NOT_FINITE(next))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("cron expression \"%s\" never fires after now", text));
	args[0] = CStringGetTextDatum(name);
	args[1] = CStringGetTextDatum(text);
	args[2] = CStringGetTextDatum(zone);
	args[3] = CStringGetTextDatum(queue);
	args[4] = JsonbPGetDatum(payload);
	args[5] = PG_GETARG_DATUM(5);
	args[6] = TimestampTzGetDatum(next);
	args[7] = TimestampTzGetDatum(now);
	args[8] = CStringGetTextDatum(DurableCallerName());
	DurableExecuteStmt(STMT_SCHEDULE_UPSERT, args, NULL, SPI_OK_INSERT, 0);
	forget_failure(name);
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
	Datum		arg = CStringGetTextDatum(name);
	bool		removed;

	SPI_connect();
	removed = DurableExecuteStmt(STMT_SCHEDULE_DELETE, &arg, NULL, SPI_OK_DELETE, 0) > 0;
	forget_failure(name);
	SPI_finish();
	PG_RETURN_BOOL(removed);
}

/* columns of STMT_SCHEDULES_DUE */
enum
{
	DUE_NAME = 1,
	DUE_CRON,
	DUE_TIMEZONE,
	DUE_QUEUE,
	DUE_PAYLOAD,
	DUE_BACKFILL,
	DUE_NEXT_RUN
};

typedef struct DueSchedule
{
	char	   *name;
	char	   *cron;
	char	   *timezone;
	char	   *queue;
	Jsonb	   *payload;
	bool		backfill;
	TimestampTz next_run;

	/* what running it does */
	TimestampTz now;
	DurableSettledCallback callback;
	void	   *arg;
	TimestampTz attempting;		/* the occurrence being enqueued */
	TimestampTz skip;			/* skip this occurrence, or 0 */
	const char *error;			/* why it is skipped */
} DueSchedule;

/* enqueue one occurrence of a schedule */
static int64
enqueue_occurrence(const DueSchedule *due, TimestampTz occurrence)
{
	DurableEnqueueRequest req = {0};
	DurableQueue settings;
	DurableDetail metadata;

	DurableQueueGetShared(due->queue, &settings);
	req.queue = due->queue;
	req.payload = due->payload;
	req.idempotency_key = psprintf("schedule:%s:" INT64_FORMAT, due->name,
								   (int64) timestamptz_to_time_t(occurrence));
	req.class = "idempotent";
	DurableDetailInit(&metadata);
	DurableDetailText(&metadata, "schedule", due->name);
	DurableDetailTime(&metadata, "occurrence", occurrence);
	req.metadata = DurableDetailFinish(&metadata);
	return DurableEnqueue(&req, &settings, due->now);
}

/*
 * run_schedule
 *		Enqueue what one due schedule owes and move its next run on: every
 *		occurrence missed (at most DURABLE_BACKFILL_PER_TICK a tick) when it
 *		backfills, else the latest one only, found from now backwards.  An
 *		occurrence equal to due->skip is not enqueued: the schedule's next
 *		run moves past it, and last_error says why.
 */
static uint64
run_schedule(void *arg)
{
	DueSchedule *due = (DueSchedule *) arg;
	DurableCron cron;
	pg_tz	   *tz = time_zone(due->timezone);
	TimestampTz occurrence = due->next_run;
	TimestampTz next;
	int64		task_id = 0;
	uint64		enqueued = 0;
	Datum		advance[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	DurableCronParse(due->cron, &cron);
	if (!due->backfill)
		occurrence = Max(occurrence, cron_latest(&cron, due->now, tz));
	for (int i = 0; i < DURABLE_BACKFILL_PER_TICK; i++)
	{
		next = cron_next(&cron, occurrence, tz);
		if (due->skip != 0 && occurrence >= due->skip)
		{
			advance[0] = CStringGetTextDatum(due->name);
			advance[1] = TimestampTzGetDatum(next);
			advance[2] = CStringGetTextDatum(due->error);
			advance[3] = TimestampTzGetDatum(due->now);
			DurableExecuteStmt(STMT_SCHEDULE_SKIP, advance, NULL, SPI_OK_UPDATE, 0);
			return enqueued;
		}
		due->attempting = occurrence;
		task_id = enqueue_occurrence(due, occurrence);
		if (due->callback)
			due->callback(task_id, "scheduled", due->arg);
		enqueued++;
		if (!due->backfill || next > due->now)
			break;
		occurrence = next;
	}
	advance[0] = CStringGetTextDatum(due->name);
	advance[1] = TimestampTzGetDatum(next);
	advance[2] = TimestampTzGetDatum(occurrence);
	advance[3] = Int64GetDatum(task_id);
	nulls[3] = task_id != 0 ? ' ' : 'n';
	DurableExecuteStmt(STMT_SCHEDULE_ADVANCE, advance, nulls, SPI_OK_UPDATE, 0);
	return enqueued;
}

/*
 * DurableRunSchedules
 *		Enqueue the occurrences of up to batch schedules that are due, and
 *		move each schedule's next run on; each schedule is a part of the
 *		tick of its own ("schedule: <name>").  An occurrence that cannot be
 *		enqueued (its key taken by another request, its payload over a
 *		lowered size limit, its queue paused for drop ...) is skipped: run
 *		again with it skipped, the schedule's occurrences before it are
 *		enqueued, its next run moves past it, and its last_error and
 *		durable.status say why.  Reports each task enqueued as 'scheduled'.
 *		Returns how many.
 */
uint64
DurableRunSchedules(TimestampTz now, int batch, DurableSettledCallback callback,
					void *arg)
{
	Datum		args[2];
	uint64		n;
	DueSchedule *due;
	uint64		enqueued = 0;

	args[0] = TimestampTzGetDatum(now);
	args[1] = Int32GetDatum(batch);
	n = DurableExecuteStmt(STMT_SCHEDULES_DUE, args, NULL, SPI_OK_SELECT, 0);
	if (n == 0)
		return 0;
	due = palloc0(sizeof(DueSchedule) * n);
	for (uint64 r = 0; r < n; r++)
	{
		bool		isnull;

		due[r].name = DurableResultText(r, DUE_NAME);
		due[r].cron = DurableResultText(r, DUE_CRON);
		due[r].timezone = DurableResultText(r, DUE_TIMEZONE);
		due[r].queue = DurableResultText(r, DUE_QUEUE);
		due[r].payload = DatumGetJsonbPCopy(DurableResultDatum(r, DUE_PAYLOAD, &isnull));
		due[r].backfill = DatumGetBool(DurableResultDatum(r, DUE_BACKFILL, &isnull));
		due[r].next_run = DatumGetTimestampTz(DurableResultDatum(r, DUE_NEXT_RUN, &isnull));
		due[r].now = now;
		due[r].callback = callback;
		due[r].arg = arg;
	}

	for (uint64 r = 0; r < n; r++)
	{
		char	   *part = psprintf("schedule: %s", due[r].name);
		ErrorData  *failure;
		ErrorData  *again;
		uint64		done;

		if (DurableTry(run_schedule, &due[r], &done, &failure))
		{
			DurablePartSucceeded(part);
			enqueued += done;
			continue;
		}
		due[r].skip = due[r].attempting != 0 ? due[r].attempting : due[r].next_run;
		due[r].error = psprintf("%s (SQLSTATE %s)", failure->message,
								unpack_sql_state(failure->sqlerrcode));
		if (DurableTry(run_schedule, &due[r], &done, &again))
		{
			enqueued += done;
			DurablePartFailed(part, failure);
		}
		else
		{
			/* not even skipping works: the schedule stays due */
			DurablePartFailed(part, again);
			FreeErrorData(again);
		}
		FreeErrorData(failure);
	}
	return enqueued;
}
