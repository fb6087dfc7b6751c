/*-------------------------------------------------------------------------
 *
 * schedule.c
 *	  Cron schedules: setting and removing one (durable_schedule and
 *	  durable_unschedule in api/schedules.c), and the reconciler's part,
 *	  which enqueues the occurrences that are due.
 *
 * When an expression fires in a schedule's time zone is the pure layer's
 * (pure/cron.c, pure/zone.c).
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
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

/* a backfill enqueues at most this many occurrences of a schedule a tick */
#define DURABLE_BACKFILL_PER_TICK 100

/*
 * A schedule replaced or removed is no longer the one that failed: its
 * failure leaves durable.status (tick_failures) with it.
 */
static void
forget_failure(const char *name)
{
	(void) DurablePartForget(psprintf("schedule: %s", name));
}

enum
{
	LOCKED_LAST_RUN,
	LOCKED_NCOLUMNS
};
static const DurableColumn locked_columns[LOCKED_NCOLUMNS] = {
	[LOCKED_LAST_RUN] = {"last_run", TIMESTAMPTZOID},
};
enum
{
	LOCK_NAME,
	LOCK_NPARAMS
};
static const DurableParam schedule_lock_params[LOCK_NPARAMS] = {
	[LOCK_NAME] = {"name", TEXTOID},
};
static DurableStatement schedule_lock = {
	.name = "schedule_lock",
	.sql = "SELECT last_run FROM durable.schedules WHERE schedule_name = $name FOR UPDATE",
	DURABLE_PARAMS(schedule_lock_params),
	DURABLE_COLUMNS(locked_columns),
};

enum
{
	UPSERT_NAME,
	UPSERT_CRON,
	UPSERT_TIMEZONE,
	UPSERT_QUEUE,
	UPSERT_PAYLOAD,
	UPSERT_BACKFILL,
	UPSERT_NEXT_RUN,
	UPSERT_NOW,
	UPSERT_ROLE,
	UPSERT_NPARAMS
};
static const DurableParam schedule_upsert_params[UPSERT_NPARAMS] = {
	[UPSERT_NAME] = {"name", TEXTOID},
	[UPSERT_CRON] = {"cron", TEXTOID},
	[UPSERT_TIMEZONE] = {"timezone", TEXTOID},
	[UPSERT_QUEUE] = {"queue", TEXTOID},
	[UPSERT_PAYLOAD] = {"payload", JSONBOID},
	[UPSERT_BACKFILL] = {"backfill", BOOLOID},
	[UPSERT_NEXT_RUN] = {"next_run", TIMESTAMPTZOID},
	[UPSERT_NOW] = {"now", TIMESTAMPTZOID},
	[UPSERT_ROLE] = {"role", TEXTOID},
};
static DurableStatement schedule_upsert = {
	.name = "schedule_upsert",
	.sql = "INSERT INTO durable.schedules AS s (schedule_name, cron, timezone,"
	" queue_name, payload, backfill, next_run, created_at, role)"
	" VALUES ($name, $cron, $timezone, $queue, $payload, $backfill, $next_run,"
	" $now, $role)"
	" ON CONFLICT (schedule_name) DO UPDATE SET cron = EXCLUDED.cron,"
	" timezone = EXCLUDED.timezone, queue_name = EXCLUDED.queue_name,"
	" payload = EXCLUDED.payload, backfill = EXCLUDED.backfill,"
	" next_run = EXCLUDED.next_run, role = EXCLUDED.role,"
	" last_error = NULL, last_error_at = NULL",
	DURABLE_PARAMS(schedule_upsert_params),
};

/*
 * DurableScheduleSet
 *		Create the schedule, or replace the one of that name (its next run
 *		is then counted from the later of now and its last run); return its
 *		next run.  Raises 22023 for a bad expression or zone, or one that
 *		never fires again, 42704 for an unknown queue, 42501 for a queue
 *		the caller may not enqueue into.  SPI connected.
 */
TimestampTz
DurableScheduleSet(const char *name, const char *text, const char *zone,
				   const char *queue, Jsonb *payload, bool backfill,
				   TimestampTz now)
{
	DurableResult res;
	TimestampTz after = now;
	DurableCron cron;
	pg_tz	   *tz;
	DurableQueue settings;
	TimestampTz next;
	Datum		lock[LOCK_NPARAMS];
	Datum		args[UPSERT_NPARAMS];

	DurableCronParse(text, &cron);
	tz = DurableTimeZone(zone);
	DurableQueueGetShared(queue, &settings);
	DurableCheckRestrictedQueue(queue, settings.restricted, DURABLE_PRIV_ENQUEUE);

	/*
	 * A schedule replaced runs on from the later of now and its last run:
	 * a reconciler may have enqueued an occurrence after this transaction
	 * began, and that one must not come again (with the new payload, its
	 * key would be taken by another request).  Its row lock, waited for,
	 * shows the last run committed.
	 */
	lock[LOCK_NAME] = CStringGetTextDatum(name);
	res = DurableRun(&schedule_lock, lock, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 1)
	{
		bool		isnull;
		Datum		last_run = DurableGetDatum(res, 0, LOCKED_LAST_RUN, &isnull);

		if (!isnull)
			after = Max(after, DatumGetTimestampTz(last_run));
	}
	next = DurableCronNext(&cron, after, tz);
	if (TIMESTAMP_NOT_FINITE(next))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("cron expression \"%s\" never fires after now", text));
	args[UPSERT_NAME] = CStringGetTextDatum(name);
	args[UPSERT_CRON] = CStringGetTextDatum(text);
	args[UPSERT_TIMEZONE] = CStringGetTextDatum(zone);
	args[UPSERT_QUEUE] = CStringGetTextDatum(queue);
	args[UPSERT_PAYLOAD] = JsonbPGetDatum(payload);
	args[UPSERT_BACKFILL] = BoolGetDatum(backfill);
	args[UPSERT_NEXT_RUN] = TimestampTzGetDatum(next);
	args[UPSERT_NOW] = TimestampTzGetDatum(now);
	args[UPSERT_ROLE] = CStringGetTextDatum(DurableCallerName());
	(void) DurableRun(&schedule_upsert, args, NULL, SPI_OK_INSERT, 0);
	forget_failure(name);
	return next;
}

enum
{
	DELETE_NAME,
	DELETE_NPARAMS
};
static const DurableParam schedule_delete_params[DELETE_NPARAMS] = {
	[DELETE_NAME] = {"name", TEXTOID},
};
static DurableStatement schedule_delete = {
	.name = "schedule_delete",
	.sql = "DELETE FROM durable.schedules WHERE schedule_name = $name",
	DURABLE_PARAMS(schedule_delete_params),
};

/*
 * DurableUnschedule
 *		Remove a schedule; false when there was none.  Occurrences already
 *		enqueued stay.  SPI connected.
 */
bool
DurableUnschedule(const char *name)
{
	Datum		args[DELETE_NPARAMS];
	bool		removed;

	args[DELETE_NAME] = CStringGetTextDatum(name);
	removed = DurableRun(&schedule_delete, args, NULL, SPI_OK_DELETE, 0).rows > 0;
	forget_failure(name);
	return removed;
}

/*
 * enqueue_run
 *		Enqueue a run of a schedule under key: an occurrence of its
 *		expression (its metadata names it), or one an operator asked for
 *		now (triggered: its metadata names the role, whose queue grant is
 *		checked as a schedule's creator's is).
 */
static int64
enqueue_run(const char *name, const char *queue, Jsonb *payload, char *key,
			TimestampTz occurrence, bool triggered, TimestampTz now)
{
	DurableEnqueueRequest req = {0};
	DurableQueue settings;
	DurableDetail metadata;

	DurableQueueGetShared(queue, &settings);
	if (triggered)
		DurableCheckRestrictedQueue(queue, settings.restricted, DURABLE_PRIV_ENQUEUE);
	req.queue = queue;
	req.payload = payload;
	req.idempotency_key = key;
	req.class = "idempotent";
	DurableDetailInit(&metadata);
	DurableDetailText(&metadata, "schedule", name);
	if (triggered)
		DurableDetailText(&metadata, "triggered_by", DurableCallerName());
	else
		DurableDetailTime(&metadata, "occurrence", occurrence);
	req.metadata = DurableDetailFinish(&metadata);
	return DurableEnqueue(&req, &settings, now);
}

/* a schedule's row, locked, for a pause, a resume or an occurrence now */
enum
{
	HELD_CRON,
	HELD_TIMEZONE,
	HELD_QUEUE,
	HELD_PAYLOAD,
	HELD_NEXT_RUN,
	HELD_PAUSED,
	HELD_NCOLUMNS
};
static const DurableColumn held_columns[HELD_NCOLUMNS] = {
	[HELD_CRON] = {"cron", TEXTOID},
	[HELD_TIMEZONE] = {"timezone", TEXTOID},
	[HELD_QUEUE] = {"queue_name", TEXTOID},
	[HELD_PAYLOAD] = {"payload", JSONBOID},
	[HELD_NEXT_RUN] = {"next_run", TIMESTAMPTZOID},
	[HELD_PAUSED] = {"paused", BOOLOID},
};
static DurableStatement schedule_held = {
	.name = "schedule_held",
	.sql = "SELECT cron, timezone, queue_name, payload, next_run, paused_at IS NOT NULL AS paused"
	" FROM durable.schedules WHERE schedule_name = $name FOR NO KEY UPDATE",
	DURABLE_PARAMS(schedule_lock_params),
	DURABLE_COLUMNS(held_columns),
};

enum
{
	PAUSE_NAME,
	PAUSE_NOW,
	PAUSE_NEXT_RUN,
	PAUSE_NPARAMS
};
static const DurableParam schedule_pause_params[PAUSE_NPARAMS] = {
	[PAUSE_NAME] = {"name", TEXTOID},
	[PAUSE_NOW] = {"now", TIMESTAMPTZOID},
	[PAUSE_NEXT_RUN] = {"next_run", TIMESTAMPTZOID},
};
/* paused: now NULL is a resume, with the next run counted from now */
static DurableStatement schedule_pause = {
	.name = "schedule_pause",
	.sql = "UPDATE durable.schedules SET paused_at = $now,"
	" next_run = COALESCE($next_run, next_run)"
	" WHERE schedule_name = $name",
	DURABLE_PARAMS(schedule_pause_params),
};

/* the row of a schedule, locked; 42704 when there is none */
static DurableResult
hold_schedule(const char *name)
{
	Datum		args[LOCK_NPARAMS];
	DurableResult res;

	args[LOCK_NAME] = CStringGetTextDatum(name);
	res = DurableRun(&schedule_held, args, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 0)
		ereport(ERROR,
				errcode(ERRCODE_UNDEFINED_OBJECT),
				errmsg("schedule \"%s\" does not exist", name));
	return res;
}

/*
 * DurableSchedulePause
 *		Pause a schedule (pause) or resume it; returns its next run.  A
 *		paused schedule enqueues nothing; resumed, it runs on from its next
 *		occurrence after now: what fell due while it was paused is not
 *		enqueued, even for a schedule that backfills.  Pausing a paused
 *		schedule, or resuming a running one, changes nothing.  42704 for no
 *		schedule, 22023 for one whose expression does not parse (every one
 *		that does fires again).  SPI connected.
 */
TimestampTz
DurableSchedulePause(const char *name, bool pause, TimestampTz now)
{
	DurableResult res = hold_schedule(name);
	bool		isnull;
	TimestampTz next = DatumGetTimestampTz(DurableGetDatum(res, 0, HELD_NEXT_RUN, &isnull));
	Datum		args[PAUSE_NPARAMS];
	char		nulls[PAUSE_NPARAMS] = {' ', ' ', 'n'};

	if (DurableGetBool(res, 0, HELD_PAUSED) == pause)
		return next;
	if (!pause)
	{
		DurableCron cron;

		DurableCronParse(DurableGetText(res, 0, HELD_CRON), &cron);
		next = DurableCronNext(&cron, now, DurableTimeZone(DurableGetText(res, 0, HELD_TIMEZONE)));

		args[PAUSE_NEXT_RUN] = TimestampTzGetDatum(next);
		nulls[PAUSE_NEXT_RUN] = ' ';
	}
	args[PAUSE_NAME] = CStringGetTextDatum(name);
	args[PAUSE_NOW] = TimestampTzGetDatum(now);
	nulls[PAUSE_NOW] = pause ? ' ' : 'n';
	(void) DurableRun(&schedule_pause, args, nulls, SPI_OK_UPDATE, 0);
	return next;
}

/*
 * DurableScheduleTrigger
 *		Enqueue an occurrence of a schedule now, apart from its expression
 *		(paused or not): its key is "schedule:<name>:now:<microseconds>",
 *		its metadata says it was asked for.  Returns the task.  42704 for
 *		no schedule, 42501 for a queue the caller may not enqueue into.
 *		SPI connected.
 */
int64
DurableScheduleTrigger(const char *name, TimestampTz now)
{
	DurableResult res = hold_schedule(name);
	bool		isnull;

	return enqueue_run(name, pstrdup(DurableGetText(res, 0, HELD_QUEUE)),
					   DatumGetJsonbPCopy(DurableGetDatum(res, 0, HELD_PAYLOAD, &isnull)),
					   psprintf("schedule:%s:now:" INT64_FORMAT, name, (int64) now),
					   0, true, now);
}

enum
{
	DUE_NAME,
	DUE_CRON,
	DUE_TIMEZONE,
	DUE_QUEUE,
	DUE_PAYLOAD,
	DUE_BACKFILL,
	DUE_NEXT_RUN,
	DUE_NCOLUMNS
};
static const DurableColumn due_columns[DUE_NCOLUMNS] = {
	[DUE_NAME] = {"schedule_name", TEXTOID},
	[DUE_CRON] = {"cron", TEXTOID},
	[DUE_TIMEZONE] = {"timezone", TEXTOID},
	[DUE_QUEUE] = {"queue_name", TEXTOID},
	[DUE_PAYLOAD] = {"payload", JSONBOID},
	[DUE_BACKFILL] = {"backfill", BOOLOID},
	[DUE_NEXT_RUN] = {"next_run", TIMESTAMPTZOID},
};
enum
{
	DUE_NOW,
	DUE_BATCH,
	DUE_NPARAMS
};
static const DurableParam schedules_due_params[DUE_NPARAMS] = {
	[DUE_NOW] = {"now", TIMESTAMPTZOID},
	[DUE_BATCH] = {"batch", INT4OID},
};
static DurableStatement schedules_due = {
	.name = "schedules_due",
	.sql = "SELECT s.schedule_name, s.cron, s.timezone, s.queue_name, s.payload,"
	" s.backfill, s.next_run"
	" FROM durable.schedules s"
	" JOIN durable.queues q ON q.queue_name = s.queue_name"
	" WHERE s.next_run <= $now AND s.paused_at IS NULL"
	" ORDER BY s.next_run LIMIT $batch"
	" FOR NO KEY UPDATE OF s SKIP LOCKED",
	DURABLE_PARAMS(schedules_due_params),
	DURABLE_COLUMNS(due_columns),
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
	return enqueue_run(due->name, due->queue, due->payload,
					   psprintf("schedule:%s:" INT64_FORMAT, due->name,
								(int64) timestamptz_to_time_t(occurrence)),
					   occurrence, false, due->now);
}

enum
{
	ADVANCE_NAME,
	ADVANCE_NEXT_RUN,
	ADVANCE_LAST_RUN,
	ADVANCE_TASK_ID,
	ADVANCE_NPARAMS
};
static const DurableParam schedule_advance_params[ADVANCE_NPARAMS] = {
	[ADVANCE_NAME] = {"name", TEXTOID},
	[ADVANCE_NEXT_RUN] = {"next_run", TIMESTAMPTZOID},
	[ADVANCE_LAST_RUN] = {"last_run", TIMESTAMPTZOID},
	[ADVANCE_TASK_ID] = {"task_id", INT8OID},
};
static DurableStatement schedule_advance = {
	.name = "schedule_advance",
	.sql = "UPDATE durable.schedules SET next_run = $next_run, last_run = $last_run,"
	" last_task_id = COALESCE($task_id, last_task_id),"
	" last_error = NULL, last_error_at = NULL"
	" WHERE schedule_name = $name",
	DURABLE_PARAMS(schedule_advance_params),
};

/* an occurrence that could not be enqueued is skipped, with why */
enum
{
	SKIP_NAME,
	SKIP_NEXT_RUN,
	SKIP_ERROR,
	SKIP_NOW,
	SKIP_NPARAMS
};
static const DurableParam schedule_skip_params[SKIP_NPARAMS] = {
	[SKIP_NAME] = {"name", TEXTOID},
	[SKIP_NEXT_RUN] = {"next_run", TIMESTAMPTZOID},
	[SKIP_ERROR] = {"error", TEXTOID},
	[SKIP_NOW] = {"now", TIMESTAMPTZOID},
};
static DurableStatement schedule_skip = {
	.name = "schedule_skip",
	.sql = "UPDATE durable.schedules SET next_run = $next_run, last_error = $error,"
	" last_error_at = COALESCE(last_error_at, $now)"
	" WHERE schedule_name = $name",
	DURABLE_PARAMS(schedule_skip_params),
};

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
	pg_tz	   *tz = DurableTimeZone(due->timezone);
	TimestampTz occurrence = due->next_run;
	TimestampTz next;
	int64		task_id = 0;
	uint64		enqueued = 0;
	Datum		advance[ADVANCE_NPARAMS];
	char		nulls[ADVANCE_NPARAMS] = {' ', ' ', ' ', ' '};

	DurableCronParse(due->cron, &cron);
	if (!due->backfill)
		occurrence = Max(occurrence, DurableCronLatest(&cron, due->now, tz));
	for (int i = 0; i < DURABLE_BACKFILL_PER_TICK; i++)
	{
		next = DurableCronNext(&cron, occurrence, tz);
		if (due->skip != 0 && occurrence >= due->skip)
		{
			Datum		skip[SKIP_NPARAMS];

			skip[SKIP_NAME] = CStringGetTextDatum(due->name);
			skip[SKIP_NEXT_RUN] = TimestampTzGetDatum(next);
			skip[SKIP_ERROR] = CStringGetTextDatum(due->error);
			skip[SKIP_NOW] = TimestampTzGetDatum(due->now);
			DurableRun(&schedule_skip, skip, NULL, SPI_OK_UPDATE, 0);
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
	advance[ADVANCE_NAME] = CStringGetTextDatum(due->name);
	advance[ADVANCE_NEXT_RUN] = TimestampTzGetDatum(next);
	advance[ADVANCE_LAST_RUN] = TimestampTzGetDatum(occurrence);
	advance[ADVANCE_TASK_ID] = Int64GetDatum(task_id);
	nulls[ADVANCE_TASK_ID] = task_id != 0 ? ' ' : 'n';
	DurableRun(&schedule_advance, advance, nulls, SPI_OK_UPDATE, 0);
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
 *		durable.status say why.  One blocked by a lock another transaction
 *		holds (its occurrence's key inserted and not yet committed, its
 *		schedule's row) is not skipped: the schedule stays due, is shown
 *		in durable.status and runs again next tick.  Reports each task enqueued as 'scheduled'.
 *		Returns how many.
 */
uint64
DurableRunSchedules(TimestampTz now, int batch, DurableSettledCallback callback,
					void *arg)
{
	DurableResult res;
	Datum		args[DUE_NPARAMS];
	uint64		n;
	DueSchedule *due;
	uint64		enqueued = 0;

	args[DUE_NOW] = TimestampTzGetDatum(now);
	args[DUE_BATCH] = Int32GetDatum(batch);
	res = DurableRun(&schedules_due, args, NULL, SPI_OK_SELECT, 0);
	n = res.rows;
	if (n == 0)
		return 0;
	due = palloc0(sizeof(DueSchedule) * n);
	for (uint64 r = 0; r < n; r++)
	{
		bool		isnull;

		due[r].name = DurableGetText(res, r, DUE_NAME);
		due[r].cron = DurableGetText(res, r, DUE_CRON);
		due[r].timezone = DurableGetText(res, r, DUE_TIMEZONE);
		due[r].queue = DurableGetText(res, r, DUE_QUEUE);
		due[r].payload = DatumGetJsonbPCopy(DurableGetDatum(res, r, DUE_PAYLOAD, &isnull));
		due[r].backfill = DurableGetBool(res, r, DUE_BACKFILL);
		due[r].next_run = DatumGetTimestampTz(DurableGetDatum(res, r, DUE_NEXT_RUN, &isnull));
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

		if (DurableTryPart(run_schedule, &due[r], &done, &failure))
		{
			DurablePartSucceeded(part);
			enqueued += done;
			continue;
		}
		if (DurablePartBlocked(failure))
		{
			/* its key or row held by an open transaction: again next tick */
			DurablePartFailed(part, failure);
			FreeErrorData(failure);
			continue;
		}
		due[r].skip = due[r].attempting != 0 ? due[r].attempting : due[r].next_run;
		due[r].error = psprintf("%s (SQLSTATE %s)", failure->message,
								unpack_sql_state(failure->sqlerrcode));
		if (DurableTryPart(run_schedule, &due[r], &done, &again))
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
