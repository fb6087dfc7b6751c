/*-------------------------------------------------------------------------
 *
 * part.c
 *	  A part of a reconciler tick, isolated from the others.
 *
 * A tick is one transaction, and no single row, setting or partition may
 * stop it: each of its parts (a partition's expired leases, a partition's
 * stuck alarms, a day of history, retention of one table, a due schedule,
 * one queue's retry tokens) runs in a subtransaction of its own.  A part
 * that fails is rolled back and skipped for this tick; the others go on.
 *
 * A failing part is said once: durable.tick_failures keeps it from the
 * tick in which it first failed to the one in which it next succeeds, and
 * only those two ticks log it (WARNING, then LOG); the ticks in between
 * update its row quietly.  durable.status shows the rows.  On Citus each
 * node keeps the failures of its own reconciler (the table is not
 * distributed).
 *
 * The parts failing when the tick began are read once per tick
 * (DurablePartsBegin), so that a part that succeeds costs nothing more
 * unless it was failing.
 *
 * No part waits on a lock another session can hold for as long as it
 * likes: a task's row, a queue's retry tokens after a durable_fail, an
 * idempotency key an open transaction inserted.  Rows are taken SKIP
 * LOCKED or NOWAIT where a statement can say so; every other wait of a
 * part (a key's uncommitted duplicate in INSERT ... ON CONFLICT, a row a
 * statement updates) is bounded by DURABLE_PART_LOCK_TIMEOUT, set for the
 * part alone whatever the session's or the reconciler's lock_timeout.  A
 * part blocked so fails with 55P03 like any failing part: said once,
 * shown in durable.status as blocked by a lock, run again next tick; the
 * tick and the lease recovery of every other partition go on and commit.
 *
 * A subtransaction that writes takes a transaction id of its own, and a
 * backend keeps at most PGPROC_MAX_CACHED_SUBXIDS of them in shared memory
 * before every snapshot on the server has to look further: parts are
 * coarse (a partition, not a task) for that reason.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

/*
 * The longest a part waits for a lock: as long as maintain_history waits
 * for its tables, enough for a commit under way to finish.
 */
#define DURABLE_PART_LOCK_TIMEOUT "100ms"

/* the parts failing in this transaction's tick (names in TopTransactionContext) */
static List *failing_parts = NIL;
static LocalTransactionId failing_lxid = InvalidLocalTransactionId;
static TimestampTz parts_now;

static ListCell *
failing_part(const char *part)
{
	ListCell   *lc;

	if (failing_lxid != DURABLE_MY_LXID)
		return NULL;
	foreach(lc, failing_parts)
	{
		if (strcmp((const char *) lfirst(lc), part) == 0)
			return lc;
	}
	return NULL;
}

enum
{
	FAILURE_PART,
	FAILURE_NCOLUMNS
};
static const DurableColumn failure_columns[FAILURE_NCOLUMNS] = {
	[FAILURE_PART] = {"part", TEXTOID},
};
static DurableStatement tick_failures = {
	.name = "tick_failures",
	.sql = "SELECT part FROM durable.tick_failures",
	.nargs = 0,
	DURABLE_COLUMNS(failure_columns),
};

/*
 * DurablePartsBegin
 *		Read the parts failing now, for the tick that begins.
 */
void
DurablePartsBegin(TimestampTz now)
{
	DurableResult res;
	MemoryContext old;
	uint64		n;

	res = DurableRun(&tick_failures, NULL, NULL, SPI_OK_SELECT, 0);
	n = res.rows;
	old = MemoryContextSwitchTo(TopTransactionContext);
	failing_parts = NIL;
	for (uint64 row = 0; row < n; row++)
		failing_parts = lappend(failing_parts, DurableGetText(res, row, FAILURE_PART));
	MemoryContextSwitchTo(old);
	failing_lxid = DURABLE_MY_LXID;
	parts_now = now;
}

/*
 * DurableFailingParts
 *		The parts whose names begin with prefix that were failing when the
 *		tick began, in a palloc'd array.
 */
char	  **
DurableFailingParts(const char *prefix, uint64 *count)
{
	char	  **parts = palloc(sizeof(char *) * (list_length(failing_parts) + 1));
	ListCell   *lc;

	*count = 0;
	if (failing_lxid != DURABLE_MY_LXID)
		return parts;
	foreach(lc, failing_parts)
	{
		char	   *part = (char *) lfirst(lc);

		if (strncmp(part, prefix, strlen(prefix)) == 0)
			parts[(*count)++] = pstrdup(part);
	}
	return parts;
}

enum
{
	SET_PART,
	SET_SQLSTATE,
	SET_ERROR,
	SET_NOW,
	SET_NPARAMS
};
static const DurableParam tick_failure_set_params[SET_NPARAMS] = {
	[SET_PART] = {"part", TEXTOID},
	[SET_SQLSTATE] = {"sqlstate", TEXTOID},
	[SET_ERROR] = {"error", TEXTOID},
	[SET_NOW] = {"now", TIMESTAMPTZOID},
};
static DurableStatement tick_failure_set = {
	.name = "tick_failure_set",
	.sql = "INSERT INTO durable.tick_failures AS f (part, sqlstate, error,"
	" failing_since, last_failed_at, failures)"
	" VALUES ($part, $sqlstate, $error, $now, $now, 1)"
	" ON CONFLICT (part) DO UPDATE SET sqlstate = EXCLUDED.sqlstate,"
	" error = EXCLUDED.error, last_failed_at = EXCLUDED.last_failed_at,"
	" failures = f.failures + 1",
	DURABLE_PARAMS(tick_failure_set_params),
};

/*
 * DurablePartFailedWith
 *		Record that a part failed in this tick, with the error it failed
 *		with; the first failure of an episode is a WARNING in the log (LOG
 *		for a Citus node that cannot be reached, which is waited for).
 */
void
DurablePartFailedWith(const char *part, const char *sqlstate,
					  const char *message, bool unreachable)
{
	Datum		args[SET_NPARAMS];

	if (failing_part(part) == NULL)
	{
		MemoryContext old;

		ereport(unreachable ? LOG : WARNING,
				errmsg("durable reconciler could not run \"%s\": %s", part, message),
				errdetail("SQLSTATE %s. The part is skipped until it succeeds; the rest of the tick goes on.",
						  sqlstate),
				errhint("durable.status shows the parts that fail and since when."));
		old = MemoryContextSwitchTo(TopTransactionContext);
		if (failing_lxid != DURABLE_MY_LXID)
		{
			failing_parts = NIL;
			failing_lxid = DURABLE_MY_LXID;
			parts_now = GetCurrentTransactionStartTimestamp();
		}
		failing_parts = lappend(failing_parts, pstrdup(part));
		MemoryContextSwitchTo(old);
	}
	args[SET_PART] = CStringGetTextDatum(part);
	args[SET_SQLSTATE] = CStringGetTextDatum(sqlstate);
	args[SET_ERROR] = CStringGetTextDatum(message);
	args[SET_NOW] = TimestampTzGetDatum(parts_now);
	DurableRun(&tick_failure_set, args, NULL, SPI_OK_INSERT, 0);
}

/* the same, from the error a part raised */
void
DurablePartFailed(const char *part, const ErrorData *edata)
{
	/* unpack_sql_state's buffer is the next report's too: copy it */
	char	   *sqlstate = pstrdup(unpack_sql_state(edata->sqlerrcode));
	char	   *message = edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE
		? psprintf("blocked by a lock another transaction holds (%s)", edata->message)
		: pstrdup(edata->message);

	DurablePartFailedWith(part, sqlstate, message,
						  DurableNodeUnreachable(edata));
	pfree(message);
	pfree(sqlstate);
}

enum
{
	CLEAR_PART,
	CLEAR_NPARAMS
};
static const DurableParam tick_failure_clear_params[CLEAR_NPARAMS] = {
	[CLEAR_PART] = {"part", TEXTOID},
};
static DurableStatement tick_failure_clear = {
	.name = "tick_failure_clear",
	.sql = "DELETE FROM durable.tick_failures WHERE part = $part",
	DURABLE_PARAMS(tick_failure_clear_params),
};

/*
 * DurablePartForget
 *		Drop the failure recorded for a part, if any: a part replaced or
 *		removed (a schedule) is no longer the one that failed.  Returns
 *		whether there was one.  The tick's list of failing parts is not
 *		changed.
 */
bool
DurablePartForget(const char *part)
{
	Datum		args[CLEAR_NPARAMS];

	args[CLEAR_PART] = CStringGetTextDatum(part);
	return DurableRun(&tick_failure_clear, args, NULL, SPI_OK_DELETE, 0).rows > 0;
}

/*
 * DurablePartSucceeded
 *		A part ran to its end: if it was failing, it has recovered.
 */
void
DurablePartSucceeded(const char *part)
{
	ListCell   *lc = failing_part(part);

	if (lc == NULL)
		return;
	failing_parts = list_delete_cell(failing_parts, lc);
	if (DurablePartForget(part))
		ereport(LOG,
				errmsg("durable reconciler runs \"%s\" again", part));
}

/*
 * DurablePartitionPartsDone
 *		The parts "partition N: what" that failed, for the partitions the
 *		tick looked at (looked_at) and found with nothing left to do (not in
 *		with_work), have nothing left to fail: such a part runs only for a
 *		partition with work, and would otherwise stay failing in
 *		durable.status.  On Citus a node looks at its own partitions only.
 */
void
DurablePartitionPartsDone(const char *what, const int32 *looked_at, uint64 nlooked_at,
						  const int32 *with_work, uint64 nwith_work)
{
	uint64		nfailing;
	char	  **failing = DurableFailingParts("partition ", &nfailing);

	for (uint64 i = 0; i < nfailing; i++)
	{
		int32		partition;
		int			end = 0;
		bool		looked = false;
		bool		work = false;

		if (sscanf(failing[i], "partition %d: %n", &partition, &end) != 1 ||
			end == 0 || strcmp(failing[i] + end, what) != 0)
			continue;
		for (uint64 j = 0; j < nlooked_at; j++)
			looked |= looked_at[j] == partition;
		for (uint64 j = 0; j < nwith_work; j++)
			work |= with_work[j] == partition;
		if (looked && !work)
			DurablePartSucceeded(failing[i]);
	}
}

/*
 * DurableTry
 *		Run fn(arg) in a subtransaction of its own.  Returns whether it
 *		succeeded; sets *done to what fn returned (0 when it failed), and,
 *		when it failed and error is given, *error to the error it raised.
 *		Whatever fn allocates stays in the caller's memory context.  A
 *		cancel or a shutdown is not caught: it is the tick's, not the part's.
 */
bool
DurableTry(DurablePartFunction fn, void *arg, uint64 *done, ErrorData **error)
{
	MemoryContext context = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile uint64 result = 0;
	ErrorData  *volatile failure = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(context);
	PG_TRY();
	{
		result = fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(context);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN)
			ReThrowError(edata);
		failure = edata;
	}
	PG_END_TRY();
	if (done)
		*done = failure == NULL ? result : 0;
	if (failure != NULL && error != NULL)
		*error = failure;
	else if (failure != NULL)
		FreeErrorData(failure);
	return failure == NULL;
}

/* a part's function, run with its lock waits bounded */
typedef struct BoundedPart
{
	DurablePartFunction fn;
	void	   *arg;
} BoundedPart;

static uint64
run_bounded(void *arg)
{
	BoundedPart *part = (BoundedPart *) arg;
	int			nest = NewGUCNestLevel();
	uint64		result;

	/*
	 * Over the reconciler's pinned lock_timeout, and any session's, as a
	 * function's SET clause does: saved at a level of its own, and given
	 * back below.  (A source of PGC_S_OVERRIDE would have made it the
	 * session's default for good, never given back.)
	 */
	(void) set_config_option("lock_timeout", DURABLE_PART_LOCK_TIMEOUT,
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	result = part->fn(part->arg);
	/* restored here when fn succeeds; its subtransaction's abort does if not */
	AtEOXact_GUC(true, nest);
	return result;
}

/*
 * DurableTryPart
 *		DurableTry for a part of the tick: every lock wait of fn(arg) is
 *		bounded by DURABLE_PART_LOCK_TIMEOUT, and one that lasts longer
 *		fails it with 55P03.
 */
bool
DurableTryPart(DurablePartFunction fn, void *arg, uint64 *done,
			   ErrorData **error)
{
	BoundedPart part = {fn, arg};

	return DurableTry(run_bounded, &part, done, error);
}

/*
 * DurableBoundTickLockWaits
 *		Bound every lock wait of the rest of this transaction, a tick's, by
 *		DURABLE_PART_LOCK_TIMEOUT, outside its parts too.  For a tick on
 *		Citus: there the statements of a DROP EXTENSION or an update reach
 *		a node in an order of Citus's (the shards of a table dropped before
 *		the extension is), which a tick that holds the extension and waits
 *		would deadlock with.  The tick takes durable's tables without
 *		waiting first (store/schema_locks.c); this bounds what is left, the
 *		extension's own lock among it.  A tick so blocked is given up and
 *		the next one tries again.
 */
void
DurableBoundTickLockWaits(void)
{
	(void) set_config_option("lock_timeout", DURABLE_PART_LOCK_TIMEOUT,
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
							 true, 0, false);
}

/*
 * DurablePartBlocked
 *		Whether a part failed because another transaction held a lock it
 *		needed: nothing is wrong with what it works on, and it runs again
 *		as it was next tick.
 */
bool
DurablePartBlocked(const ErrorData *edata)
{
	return edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE;
}

/*
 * DurableRunPart
 *		Run fn(arg) as the part of the tick named part, in a subtransaction
 *		of its own, its lock waits bounded (DurableTryPart): a failure is
 *		recorded and logged once (not raised), a success ends a failure.
 *		Returns whether it succeeded, and sets *done to what fn returned (0
 *		when it failed).
 */
bool
DurableRunPart(const char *part, DurablePartFunction fn, void *arg,
			   uint64 *done)
{
	ErrorData  *edata;

	if (!DurableTryPart(fn, arg, done, &edata))
	{
		DurablePartFailed(part, edata);
		FreeErrorData(edata);
		return false;
	}
	DurablePartSucceeded(part);
	return true;
}

/*
 * DurableNodeUnreachable
 *		Whether an error says that a Citus node could not be reached: SQLSTATE
 *		class 08, or one of Citus's failures on its connections, which carry
 *		no SQLSTATE of their own.
 */
bool
DurableNodeUnreachable(const ErrorData *edata)
{
	return ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_CONNECTION_EXCEPTION ||
		strncmp(edata->message, "failure on connection", 21) == 0 ||
		strncmp(edata->message, "connection to the remote node", 29) == 0;
}
