/*-------------------------------------------------------------------------
 *
 * retention.c
 *	  The reconciler's retention: history a day at a time, and the tables
 *	  that keep what answers duplicates for a while.
 *
 * Finished tasks, with their steps and events, go a whole day of history
 * at a time once it is older than durable.retention
 * (durable.maintain_history, which also makes the coming days, each day a
 * part of its own); then, each table a part of the tick, events emitted
 * (or only awaited) before that, inbox entries and published outbox
 * messages older than durable.inbox_retention, expired idempotency keys,
 * and the debounce and throttle keys that are done, a batch of each.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* retention of finished tasks, and of inbox and outbox entries, in seconds */
int			durable_retention = 7 * 24 * 3600;
int			durable_inbox_retention = 7 * 24 * 3600;

/*
 * On Citus, how often the coordinator's reconciler removes history, events,
 * inbox entries, outbox messages and request keys when the last time left
 * nothing over: each time is a statement on every shard of each table,
 * tens of milliseconds of the whole cluster's CPU.  The ticks in between
 * make the coming days only, which reads the coordinator's catalog.
 */
#define CITUS_HISTORY_USECS (60 * USECS_PER_SEC)

/* when this process's reconciler maintains history next, on Citus */
static TimestampTz citus_history_next = 0;

/* what a part of retention works on */
typedef struct RetentionWork
{
	DurableStatement *stmt;
	TimestampTz cutoff;
	TimestampTz now;
	int			batch;
	DurableSettledCallback callback;
	void	   *arg;
	bool		days_only;		/* history: make the coming days, remove nothing */
} RetentionWork;

/* subtract seconds from a time, for retention cutoffs */
static TimestampTz
seconds_before(TimestampTz t, int seconds)
{
	return t - (TimestampTz) seconds * USECS_PER_SEC;
}

enum
{
	HISTORY_TASK_ID,
	HISTORY_ACTION,
	HISTORY_PART,
	HISTORY_ERROR_CODE,
	HISTORY_ERROR_MESSAGE,
	HISTORY_NCOLUMNS
};
static const DurableColumn history_columns[HISTORY_NCOLUMNS] = {
	[HISTORY_TASK_ID] = {"task_id", INT8OID},
	[HISTORY_ACTION] = {"action", TEXTOID},
	[HISTORY_PART] = {"part", TEXTOID},
	[HISTORY_ERROR_CODE] = {"error_code", TEXTOID},
	[HISTORY_ERROR_MESSAGE] = {"error_message", TEXTOID},
};
enum
{
	HISTORY_NOW,
	HISTORY_RETENTION,
	HISTORY_BATCH,
	HISTORY_NPARAMS
};
static const DurableParam maintain_history_params[HISTORY_NPARAMS] = {
	[HISTORY_NOW] = {"now", TIMESTAMPTZOID},
	[HISTORY_RETENTION] = {"retention", INT4OID},
	[HISTORY_BATCH] = {"batch", INT4OID},
};
static DurableStatement maintain_history_stmt = {
	.name = "maintain_history",
	.sql = "SELECT task_id, action, part, error_code, error_message"
	" FROM durable.maintain_history($now,"
	" pg_catalog.make_interval(secs => $retention), $batch)",
	DURABLE_PARAMS(maintain_history_params),
	DURABLE_COLUMNS(history_columns),
};

/*
 * maintain_history
 *		Make the coming days of history and drop those past retention;
 *		maintain_history runs each day in a subtransaction of its own and
 *		says which failed, which are recorded as failing parts.  A part of
 *		history that was failing and did not fail now has recovered, unless
 *		another maintainer held history meanwhile ('busy').
 */
static uint64
maintain_history(void *arg)
{
	DurableResult res;
	RetentionWork *work = (RetentionWork *) arg;
	Datum		args[HISTORY_NPARAMS];
	char		nulls[HISTORY_NPARAMS] = {' ', ' ', ' '};
	uint64		rows;
	uint64		removed = 0;
	bool		busy = false;
	List	   *failed = NIL;
	char	  **parts;
	uint64		nparts;

	args[HISTORY_NOW] = TimestampTzGetDatum(work->now);
	args[HISTORY_RETENTION] = Int32GetDatum(durable_retention);
	nulls[HISTORY_RETENTION] = durable_retention >= 0 && !work->days_only ? ' ' : 'n';
	args[HISTORY_BATCH] = Int32GetDatum(work->batch);
	res = DurableRun(&maintain_history_stmt, args, nulls, SPI_OK_SELECT, 0);
	rows = res.rows;
	for (uint64 row = 0; row < rows; row++)
	{
		bool		isnull;
		Datum		id = DurableGetDatum(res, row, HISTORY_TASK_ID, &isnull);
		char	   *action = DurableGetText(res, row, HISTORY_ACTION);

		if (strcmp(action, "busy") == 0)
			busy = true;
		else if (strcmp(action, "failed") == 0)
			failed = lappend(failed, list_make3(DurableGetText(res, row, HISTORY_PART),
												DurableGetText(res, row, HISTORY_ERROR_CODE),
												DurableGetText(res, row, HISTORY_ERROR_MESSAGE)));
		else
		{
			removed++;
			if (work->callback)
				work->callback(isnull ? 0 : DatumGetInt64(id), action, work->arg);
		}
	}

	/* the next statements replace the result: take the names first */
	parts = busy ? NULL : DurableFailingParts("history: ", &nparts);
	for (uint64 i = 0; parts != NULL && i < nparts; i++)
	{
		ListCell   *lc;
		bool		still = false;

		foreach(lc, failed)
			still |= strcmp(linitial((List *) lfirst(lc)), parts[i]) == 0;
		if (!still)
			DurablePartSucceeded(parts[i]);
	}
	{
		ListCell   *lc;

		foreach(lc, failed)
		{
			List	   *f = (List *) lfirst(lc);

			DurablePartFailedWith(linitial(f), lsecond(f), lthird(f), false);
		}
	}
	return removed;
}

/* the parameters of every retain statement: rows before the cutoff, a batch */
enum
{
	RETAIN_CUTOFF,
	RETAIN_BATCH,
	RETAIN_NPARAMS
};
static const DurableParam retain_params[RETAIN_NPARAMS] = {
	[RETAIN_CUTOFF] = {"cutoff", TIMESTAMPTZOID},
	[RETAIN_BATCH] = {"batch", INT4OID},
};

/* retention of one table each, a part of the tick apiece */
#define RETAIN(table, column) \
	"DELETE FROM durable." table " WHERE ctid = ANY (ARRAY(" \
	" SELECT ctid FROM durable." table " WHERE " column " < $cutoff" \
	" LIMIT $batch FOR UPDATE SKIP LOCKED))"

static DurableStatement retain_inbox = {
	.name = "retain_inbox",
	.sql = RETAIN("inbox", "received_at"),
	DURABLE_PARAMS(retain_params),
};
static DurableStatement retain_outbox = {
	.name = "retain_outbox",
	.sql = RETAIN("outbox", "published_at"),
	DURABLE_PARAMS(retain_params),
};
static DurableStatement retain_keys = {
	.name = "retain_keys",
	.sql = RETAIN("idempotency_keys", "expires_at"),
	DURABLE_PARAMS(retain_params),
};

/*
 * On Citus, where rows are locked (SKIP LOCKED) only in a statement on one
 * shard: each table in one statement on all shards, without a batch
 * limit, run by the coordinator's reconciler alone ($batch unused).
 */
static DurableStatement retain_inbox_all = {
	.name = "retain_inbox_all",
	.sql = "DELETE FROM durable.inbox WHERE received_at < $cutoff"
	" AND $batch IS NOT NULL",
	DURABLE_PARAMS(retain_params),
};
static DurableStatement retain_outbox_all = {
	.name = "retain_outbox_all",
	.sql = "DELETE FROM durable.outbox WHERE published_at < $cutoff"
	" AND $batch IS NOT NULL",
	DURABLE_PARAMS(retain_params),
};
static DurableStatement retain_keys_all = {
	.name = "retain_keys_all",
	.sql = "DELETE FROM durable.idempotency_keys WHERE expires_at < $cutoff"
	" AND $batch IS NOT NULL",
	DURABLE_PARAMS(retain_params),
};

/* the events emitted before the cutoff, or awaited then and no more */
static DurableStatement retain_events = {
	.name = "retain_events",
	.sql = "DELETE FROM durable.emitted_events WHERE ctid = ANY (ARRAY("
	" SELECT e.ctid FROM durable.emitted_events e"
	" WHERE COALESCE(e.emitted_at, e.created_at) < $cutoff"
	" AND (e.emitted_at IS NOT NULL OR NOT EXISTS (SELECT FROM durable.event_waits w"
	"  WHERE w.partition_key = e.partition_key AND w.queue_name = e.queue_name"
	"  AND w.event = e.event))"
	" LIMIT $batch FOR UPDATE SKIP LOCKED))",
	DURABLE_PARAMS(retain_params),
};

/* on Citus: on every shard in one statement, as the tables below */
static DurableStatement retain_events_all = {
	.name = "retain_events_all",
	.sql = "DELETE FROM durable.emitted_events e"
	" WHERE COALESCE(e.emitted_at, e.created_at) < $cutoff AND $batch IS NOT NULL"
	" AND (e.emitted_at IS NOT NULL OR NOT EXISTS (SELECT FROM durable.event_waits w"
	"  WHERE w.partition_key = e.partition_key AND w.queue_name = e.queue_name"
	"  AND w.event = e.event))",
	DURABLE_PARAMS(retain_params),
};

/*
 * The keys of debounce and throttle past their expiry whose task no
 * longer waits for its first claim.  The cutoff is FLOW_KEY_GRACE before
 * the tick's time: a call that made a key's new task after this
 * statement's snapshot set the row's expiry after the call's start, which
 * the row's lock then shows (the test of the task is made in the
 * snapshot, which does not see that task).
 */
#define FLOW_KEY_GRACE (5 * 60)
#define FLOW_KEY_DONE(f) \
	f ".expires_at < $cutoff AND NOT EXISTS (SELECT FROM durable.live_tasks t" \
	" WHERE t.partition_key = " f ".partition_key AND t.task_id = " f ".task_id" \
	" AND t.state = 'ready' AND t.fence = 0)"
static DurableStatement retain_flow_keys = {
	.name = "retain_flow_keys",
	.sql = "DELETE FROM durable.flow_keys WHERE ctid = ANY (ARRAY("
	" SELECT f.ctid FROM durable.flow_keys f WHERE " FLOW_KEY_DONE("f")
	" LIMIT $batch FOR UPDATE SKIP LOCKED))",
	DURABLE_PARAMS(retain_params),
};
static DurableStatement retain_flow_keys_all = {
	.name = "retain_flow_keys_all",
	.sql = "DELETE FROM durable.flow_keys f WHERE " FLOW_KEY_DONE("f")
	" AND $batch IS NOT NULL",
	DURABLE_PARAMS(retain_params),
};

static uint64
retain_table(void *arg)
{
	RetentionWork *work = (RetentionWork *) arg;
	Datum		args[RETAIN_NPARAMS];

	args[RETAIN_CUTOFF] = TimestampTzGetDatum(work->cutoff);
	args[RETAIN_BATCH] = Int32GetDatum(work->batch);
	return DurableRun(work->stmt, args, NULL, SPI_OK_DELETE, 0).rows;
}

/* the tables kept for a while to answer duplicates, a part of the tick each */
typedef struct RetainedTable
{
	const char *part;
	DurableStatement *local;	/* a batch, SKIP LOCKED */
	DurableStatement *everywhere;	/* on Citus: every shard, no batch */
	bool		by_inbox_retention; /* else until the row's own expiry */
	int			grace;			/* seconds past the expiry */
} RetainedTable;

static const RetainedTable retained_tables[] = {
	{"retention: durable.inbox", &retain_inbox, &retain_inbox_all, true, 0},
	{"retention: durable.outbox", &retain_outbox, &retain_outbox_all, true, 0},
	{"retention: durable.idempotency_keys", &retain_keys, &retain_keys_all, false, 0},
	{"retention: durable.flow_keys", &retain_flow_keys, &retain_flow_keys_all, false,
	FLOW_KEY_GRACE},
};

/*
 * DurableApplyRetention
 *		Each part of retention in its own subtransaction: history, then a
 *		batch each of events, inbox entries, outbox messages and expired
 *		request keys and flow keys done.  Returns the largest count
 *		removed.
 *
 *		On Citus, the coordinator does it all, and a worker's reconciler
 *		none of it: history's days are made and dropped by DDL, which only
 *		the coordinator may run (a day attached or dropped there is
 *		attached or dropped on every shard), and maintain_history deletes
 *		the default partitions' rows and the keys of tasks gone a shard at
 *		a time, since Citus refuses a statement that locks rows on many
 *		shards.  Events, expired inbox entries, outbox messages and request
 *		keys go by one statement on every shard each.  The reconciler
 *		removes rows there once a minute, or at every tick while history's
 *		batches come back full, and makes the coming days at every tick;
 *		durable_reconcile() does both at every call.
 */
uint64
DurableApplyRetention(TimestampTz now, int batch,
					  DurableSettledCallback callback, void *arg)
{
	bool		everywhere = DurableDistributed();
	TimestampTz inbox_cutoff = durable_inbox_retention >= 0 ?
		seconds_before(now, durable_inbox_retention) : DT_NOBEGIN;
	RetentionWork work = {NULL, 0, now, batch, callback, arg, false};
	uint64		removed = 0;
	uint64		n;

	if (DurableCitusWorker())
		return 0;
	work.days_only = everywhere && MyBackendType == B_BG_WORKER && now < citus_history_next;
	(void) DurableRunPart("history", maintain_history, &work, &removed);
	if (work.days_only)
		return removed;
	/* a full batch: more is waiting, go on at the next tick */
	citus_history_next = removed >= (uint64) batch ? now : now + CITUS_HISTORY_USECS;

	/* the events awaited or emitted before retention's horizon */
	if (durable_retention >= 0)
	{
		work.stmt = everywhere ? &retain_events_all : &retain_events;
		work.cutoff = seconds_before(now, durable_retention);
		if (DurableRunPart("retention: events", retain_table, &work, &n))
			removed = Max(removed, n);
	}

	for (size_t i = 0; i < lengthof(retained_tables); i++)
	{
		const RetainedTable *t = &retained_tables[i];

		work.stmt = everywhere ? t->everywhere : t->local;
		work.cutoff = t->by_inbox_retention ? inbox_cutoff : seconds_before(now, t->grace);
		if (DurableRunPart(t->part, retain_table, &work, &n))
			removed = Max(removed, n);
	}
	return removed;
}
