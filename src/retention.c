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
 * messages older than durable.inbox_retention, and expired idempotency
 * keys, a batch of each.
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "utils/builtins.h"
#include "utils/timestamp.h"

/* columns of STMT_MAINTAIN_HISTORY */
enum
{
	HISTORY_TASK_ID = 1,
	HISTORY_ACTION,
	HISTORY_PART,
	HISTORY_ERROR_CODE,
	HISTORY_ERROR_MESSAGE
};

/* what a part of retention works on */
typedef struct RetentionWork
{
	DurableStmt stmt;
	TimestampTz cutoff;
	TimestampTz now;
	int			batch;
	DurableSettledCallback callback;
	void	   *arg;
} RetentionWork;

/* subtract seconds from a time, for retention cutoffs */
static TimestampTz
seconds_before(TimestampTz t, int seconds)
{
	return t - (TimestampTz) seconds * USECS_PER_SEC;
}

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
	RetentionWork *work = (RetentionWork *) arg;
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	uint64		rows;
	uint64		removed = 0;
	bool		busy = false;
	List	   *failed = NIL;
	char	  **parts;
	uint64		nparts;

	args[0] = TimestampTzGetDatum(work->now);
	args[1] = Int32GetDatum(durable_retention);
	nulls[1] = durable_retention >= 0 ? ' ' : 'n';
	args[2] = Int32GetDatum(work->batch);
	rows = DurableExecute(STMT_MAINTAIN_HISTORY, args, nulls, SPI_OK_SELECT, 0);
	for (uint64 row = 0; row < rows; row++)
	{
		bool		isnull;
		Datum		id = DurableResultDatum(row, HISTORY_TASK_ID, &isnull);
		char	   *action = DurableResultText(row, HISTORY_ACTION);

		if (strcmp(action, "busy") == 0)
			busy = true;
		else if (strcmp(action, "failed") == 0)
			failed = lappend(failed, list_make3(DurableResultText(row, HISTORY_PART),
												DurableResultText(row, HISTORY_ERROR_CODE),
												DurableResultText(row, HISTORY_ERROR_MESSAGE)));
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

static uint64
retain_table(void *arg)
{
	RetentionWork *work = (RetentionWork *) arg;
	Datum		args[2];

	args[0] = TimestampTzGetDatum(work->cutoff);
	args[1] = Int32GetDatum(work->batch);
	return DurableExecute(work->stmt, args, NULL, SPI_OK_DELETE, 0);
}

/*
 * DurableApplyRetention
 *		Each part of retention in its own subtransaction: history, then a
 *		batch each of events, inbox entries, outbox messages and expired
 *		request keys.  Returns the largest count removed.
 *
 *		On Citus, the coordinator removes expired inbox entries, outbox
 *		messages and request keys by statements on every shard.  History is
 *		not maintained there yet: its days are made by DDL, which only the
 *		coordinator may run, and its retention locks rows in statements on
 *		many shards, which Citus refuses.  Finished tasks stay in the default
 *		partitions.
 */
uint64
DurableApplyRetention(TimestampTz now, int batch,
					  DurableSettledCallback callback, void *arg)
{
	bool		everywhere = DurableDistributed();
	TimestampTz inbox_cutoff = durable_inbox_retention >= 0 ?
		seconds_before(now, durable_inbox_retention) : DT_NOBEGIN;
	RetentionWork work = {0, 0, now, batch, callback, arg};
	uint64		removed = 0;
	uint64		n;

	if (DurableCitusWorker())
		return 0;
	if (!everywhere)
	{
		(void) DurableRunPart("history", maintain_history, &work, &removed);

		/* the events awaited or emitted before retention's horizon */
		if (durable_retention >= 0)
		{
			work.stmt = STMT_RETAIN_EVENTS;
			work.cutoff = seconds_before(now, durable_retention);
			if (DurableRunPart("retention: events", retain_table, &work, &n))
				removed = Max(removed, n);
		}
	}

	work.stmt = everywhere ? STMT_RETAIN_INBOX_ALL : STMT_RETAIN_INBOX;
	work.cutoff = inbox_cutoff;
	if (DurableRunPart("retention: durable.inbox", retain_table, &work, &n))
		removed = Max(removed, n);
	work.stmt = everywhere ? STMT_RETAIN_OUTBOX_ALL : STMT_RETAIN_OUTBOX;
	if (DurableRunPart("retention: durable.outbox", retain_table, &work, &n))
		removed = Max(removed, n);
	work.stmt = everywhere ? STMT_RETAIN_KEYS_ALL : STMT_RETAIN_KEYS;
	work.cutoff = now;
	if (DurableRunPart("retention: durable.idempotency_keys", retain_table, &work, &n))
		removed = Max(removed, n);
	return removed;
}
