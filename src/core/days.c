/*-------------------------------------------------------------------------
 *
 * days.c
 *	  The days of history exist before anything is written to them, with or
 *	  without a reconciler.
 *
 * Finished tasks, their steps and their events go to a partition of history
 * per day (by finished_at, or at for events), which durable.maintain_history
 * makes three days ahead.  The reconciler's tick calls it; a database no
 * reconciler serves and no pg_cron schedule reaches would otherwise write
 * every finished task into the default partitions, which carry one more
 * index each and which retention empties row by row.  So each backend that
 * writes history checks, once a day and from its own cache the rest of the
 * time, that tomorrow's partitions exist; when they do not, it starts a
 * one-shot background worker (process/days_worker.c) that runs
 * maintain_history in a transaction of its own.  The writer holds no lock
 * for it and does not wait for it: a day is made ahead of its first row, so
 * the rows of today that came first stay in the default partition only on
 * the first day.  Nothing is made by CREATE EXTENSION, so that a restore,
 * whose dump makes the days it had, never clashes with days made for it.
 *
 * On Citus the days are distributed partitions, made ahead and dropped by
 * the coordinator alone (its reconciler, a durable_reconcile() there, or
 * the worker a writer there starts); writers on the workers never ask.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/datetime.h"

/* how long a backend waits before it asks again for days not made */
#define DAYS_RETRY_USECS (60 * USECS_PER_SEC)

/* the end of the last day that every history table has, as last read */
static TimestampTz days_until = 0;

/* when this backend may look, or ask, again */
static TimestampTz days_next_check = 0;

/*
 * The last day all three history tables have a partition of, by the
 * partitions' names (as maintain_history names and reads them), or NULL
 * when one of them has none.
 */
enum
{
	DAYS_LAST,
	DAYS_NCOLUMNS
};

static const DurableColumn days_columns[DAYS_NCOLUMNS] = {
	[DAYS_LAST] = {"last_day", TEXTOID},
};

static DurableStatement days_last = {
	.name = "days_last",
	.sql = "SELECT CASE WHEN pg_catalog.bool_or(d.last_day IS NULL) THEN NULL"
	" ELSE pg_catalog.min(d.last_day) END AS last_day"
	" FROM (SELECT pg_catalog.max(pg_catalog.substring(c.relname,"
	"  '^(?:task_history|step_history|event_log)_p([0-9]{8})$')) AS last_day"
	"  FROM pg_catalog.pg_class p"
	"  LEFT JOIN pg_catalog.pg_inherits i ON i.inhparent OPERATOR(pg_catalog.=) p.oid"
	"  LEFT JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid"
	"  WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY["
	"   'durable.task_history'::pg_catalog.regclass,"
	"   'durable.step_history'::pg_catalog.regclass,"
	"   'durable.event_log'::pg_catalog.regclass]::pg_catalog.oid[])"
	"  GROUP BY p.oid) d",
	DURABLE_COLUMNS(days_columns),
};

/* the end of the day a "YYYYMMDD" names, midnight UTC after it */
static TimestampTz
end_of_day(const char *name)
{
	int			ymd = atoi(name);
	int			days = date2j(ymd / 10000, ymd / 100 % 100, ymd % 100) -
		POSTGRES_EPOCH_JDATE + 1;

	return (TimestampTz) days * USECS_PER_DAY;
}

/*
 * make_days
 *		Start the one-shot worker that makes the days, for this database;
 *		with wait, wait for it to finish.  Returns whether it ran.
 */
static bool
make_days(bool wait)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;

	DurableWorkerSpec(&worker, "durable_days_main", "durable history days",
					  BGW_NEVER_RESTART);
	worker.bgw_main_arg = ObjectIdGetDatum(MyDatabaseId);
	worker.bgw_notify_pid = wait ? MyProcPid : 0;
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		ereport(DEBUG1,
				errmsg("no background worker slot is free to make the days of history"));
		return false;
	}
	return wait && WaitForBackgroundWorkerShutdown(handle) == BGWH_STOPPED;
}

/* read the end of the last day every history table has */
static void
read_days(void)
{
	DurableResult res = DurableRun(&days_last, NULL, NULL, SPI_OK_SELECT, 1);

	if (res.rows == 1 &&
		!DurableGetIsNull(res, 0, DAYS_LAST))
		days_until = end_of_day(DurableGetText(res, 0, DAYS_LAST));
}

/*
 * DurableEnsureHistoryDays
 *		Called by what writes history, at the transaction time now, before
 *		it writes: ask for the coming days of history when tomorrow's are
 *		not made yet.  One comparison on the way of every call; while days
 *		are missing, a catalog read and a worker at most once a minute.
 *		When today itself is missing (a new installation, or one that no
 *		writer touched for days), the writer waits for the worker, a few
 *		milliseconds once, so that what it writes goes to its day: a day
 *		with rows in the default partition is never made.  Not on a Citus
 *		worker, where the days are DDL that only the coordinator may run (a
 *		day the coordinator attaches is attached on every shard; the worker
 *		would fail), nor in a background worker (the reconciler makes them
 *		itself), nor on a standby.
 */
void
DurableEnsureHistoryDays(TimestampTz now)
{
	if (now + USECS_PER_DAY < days_until || now < days_next_check)
		return;
	days_next_check = now + DAYS_RETRY_USECS;
	if (MyBackendType != B_BACKEND || RecoveryInProgress() || DurableCitusWorker())
		return;
	read_days();
	if (now + USECS_PER_DAY < days_until)
		return;
	if (make_days(now >= days_until))
		read_days();
}

/*
 * What maintain_history could not make, when it runs without retention:
 * the coming days only, nothing removed.
 */
enum
{
	DAYS_MADE_PART,
	DAYS_MADE_ERROR_CODE,
	DAYS_MADE_ERROR_MESSAGE,
	DAYS_MADE_NCOLUMNS
};

static const DurableColumn days_made_columns[DAYS_MADE_NCOLUMNS] = {
	[DAYS_MADE_PART] = {"part", TEXTOID},
	[DAYS_MADE_ERROR_CODE] = {"error_code", TEXTOID},
	[DAYS_MADE_ERROR_MESSAGE] = {"error_message", TEXTOID},
};

enum
{
	MAKE_NOW,
	MAKE_NPARAMS
};
static const DurableParam days_make_params[MAKE_NPARAMS] = {
	[MAKE_NOW] = {"now", TIMESTAMPTZOID},
};
static DurableStatement days_make = {
	.name = "days_make",
	.sql = "SELECT part, error_code, error_message"
	" FROM durable.maintain_history($now, NULL, 0)"
	" WHERE action OPERATOR(pg_catalog.=) 'failed'",
	DURABLE_PARAMS(days_make_params),
	DURABLE_COLUMNS(days_made_columns),
};

/*
 * DurableMakeHistoryDays
 *		Make the coming days of history, as the tick does, and log what
 *		could not be made, once.
 */
void
DurableMakeHistoryDays(TimestampTz now)
{
	DurableResult res;
	Datum		args[MAKE_NPARAMS];
	uint64		n;

	args[MAKE_NOW] = TimestampTzGetDatum(now);
	res = DurableRun(&days_make, args, NULL, SPI_OK_SELECT, 0);
	n = res.rows;

	for (uint64 i = 0; i < n; i++)
		ereport(WARNING,
				errmsg("could not make %s: %s",
					   DurableGetText(res, i, DAYS_MADE_PART),
					   DurableGetText(res, i, DAYS_MADE_ERROR_MESSAGE)),
				errdetail("SQLSTATE %s.", DurableGetText(res, i, DAYS_MADE_ERROR_CODE)),
				errhint("The next writer that finds the day missing asks again a minute later; the reconciler's tick makes the days too."));
}
