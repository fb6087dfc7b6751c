/*-------------------------------------------------------------------------
 *
 * reconciler.c
 *	  The durable reconciler: a background worker that runs one tick of
 *	  reconciliation (core/tick.c) per transaction, and the launcher that
 *	  starts it.
 *
 * It holds no logic of its own: durable_reconcile() runs the same routine,
 * so a server that cannot preload durable schedules that call instead.
 * Each tick is one short transaction over bounded batches taken with SKIP
 * LOCKED, so two reconcilers, or a reconciler and a late commit, never both
 * win.  It never sleeps inside a transaction or while holding a snapshot.
 * Between ticks it vacuums durable.live_tasks when enough of its row versions
 * have died (vacuum.c).  On one server errors are not caught: the worker
 * exits and the launcher starts it again after DURABLE_RESTART_SECONDS.  On
 * Citus a tick that fails, as any may while a node is away, is given up and
 * said once (run_guarded_tick), and the next tick tries again.
 *
 * What it cannot help is waited out quietly, said once in the log and
 * checked again periodically: durable.database that does not exist (the
 * launcher, connected to no database, waits for it), and an extension that
 * is not installed, being created, dropped, or older than the library (the
 * reconciler waits for CREATE or ALTER EXTENSION).  Only a real failure is
 * an ERROR.
 *
 *-------------------------------------------------------------------------
 */
#include "process/process.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "tcop/tcopprot.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/* the reconciler's settings; durable_database is NULL unless preloaded */
char	   *durable_database = NULL;
int			durable_reconcile_interval = 1000;
int			durable_reconcile_batch = 1000;
bool		durable_reconciler_enabled = true;

/*
 * whether the postmaster preloaded the library of another version of
 * durable, earlier or later, beside which this one was loaded and whose
 * settings it adopted (_PG_init): an upgrade waiting for its update or its
 * restart (upgrade.c)
 */
bool		durable_beside = false;

/* why the reconciler does not work, as last said in the log */
typedef enum ReconcilerWait
{
	WAIT_NONE,
	WAIT_NO_EXTENSION,
	WAIT_OLD_EXTENSION,
	WAIT_OLD_EXTENSION_BESIDE,
	WAIT_NEWER_EXTENSION
} ReconcilerWait;

static ReconcilerWait last_wait = WAIT_NONE;

/* say in the log, once per change, why the reconciler waits or that it works */
static void
report_wait(ReconcilerWait wait, const char *version)
{
	if (wait == last_wait)
		return;
	if (wait == WAIT_NO_EXTENSION)
		ereport(LOG,
				errmsg("durable reconciler is waiting for extension \"durable\" in database \"%s\"",
					   durable_database),
				errdetail("The extension is not installed; the reconciler checks again every tick."),
				errhint("Run CREATE EXTENSION durable in database \"%s\".",
						durable_database));
	else if (wait == WAIT_OLD_EXTENSION)
		ereport(LOG,
				errmsg("durable reconciler is waiting for extension \"durable\" in database \"%s\" to be updated",
					   durable_database),
				errdetail("The installed version is %s; the library is version %s.",
						  version, DURABLE_VERSION),
				errhint("Run ALTER EXTENSION durable UPDATE in database \"%s\".",
						durable_database));
	else if (wait == WAIT_OLD_EXTENSION_BESIDE)
		ereport(LOG,
				errmsg("durable reconciler is waiting for extension \"durable\" in database \"%s\" to be updated",
					   durable_database),
				errdetail("The installed version is %s; the library is version %s. Until the update, the reconciler of version %s works beside this one.",
						  version, DURABLE_VERSION, version),
				errhint("Run ALTER EXTENSION durable UPDATE in database \"%s\".",
						durable_database));
	else if (wait == WAIT_NEWER_EXTENSION)
		ereport(LOG,
				errmsg("durable reconciler of version %s stops working: extension \"durable\" in database \"%s\" was updated to version %s",
					   DURABLE_VERSION, durable_database, version),
				errdetail("Until the server restarts, the reconciler of version %s works in a background worker of its own.",
						  version),
				errhint("Restart the server to preload the library of version %s.", version));
	else
		ereport(LOG,
				errmsg("durable reconciler found extension \"durable\" in database \"%s\" and works",
					   durable_database));
	last_wait = wait;
}

/*
 * While the extension is at an earlier version than the preloaded library
 * (the server restarted before the update), the reconciler of that
 * version, started from its library (upgrade.c); in TopMemoryContext.
 */
static BackgroundWorkerHandle *older_reconciler = NULL;

/* a reconciler beside another version's library whose extension left its version */
static bool leaving = false;

/* at this reconciler's exit, the one of an earlier version it started */
static void
stop_older_reconciler(int code, Datum arg)
{
	if (older_reconciler != NULL)
		TerminateBackgroundWorker(older_reconciler);
}

/*
 * older_reconciler_works
 *		Whether the reconciler of the installed version, earlier than this
 *		library's, works: started now from its library if it does not.
 *		Versions are of digits and dots (a file name is made of it).
 */
static bool
older_reconciler_works(const char *version)
{
	static bool exit_callback = false;
	pid_t		pid;
	MemoryContext old;

	if (older_reconciler != NULL &&
		GetBackgroundWorkerPid(older_reconciler, &pid) != BGWH_STOPPED)
		return true;
	if (strspn(version, "0123456789.") != strlen(version))
		return false;
	if (older_reconciler != NULL)
		pfree(older_reconciler);
	old = MemoryContextSwitchTo(TopMemoryContext);
	older_reconciler = DurableStartReconcilerOfVersion(version);
	MemoryContextSwitchTo(old);
	if (older_reconciler != NULL && !exit_callback)
	{
		before_shmem_exit(stop_older_reconciler, (Datum) 0);
		exit_callback = true;
	}
	return older_reconciler != NULL;
}

/*
 * extension_ready
 *		Whether the extension is installed at the library's version, and not
 *		being created.  It then stays so until the end of the transaction
 *		(DurableLockExtension).  A reconciler beside the preloaded library of
 *		another version leaves once the extension is at a later version than
 *		its own, and waits while it is at an earlier one (an update that
 *		started it when prepared, and is not committed yet); the preloaded
 *		reconciler of a later version than the extension's has the
 *		extension's version's work (upgrade.c).
 */
static bool
extension_ready(void)
{
	char	   *version = DurableLockExtension();

	if (version == NULL)
	{
		report_wait(WAIT_NO_EXTENSION, NULL);
		return false;
	}
	if (strcmp(version, DURABLE_VERSION) == 0)
	{
		report_wait(WAIT_NONE, NULL);
		return true;
	}
	if (durable_beside && DurableVersionNewer(version, DURABLE_VERSION))
	{
		ereport(LOG,
				errmsg("durable reconciler of version %s stops: extension \"durable\" in database \"%s\" is now at version %s",
					   DURABLE_VERSION, durable_database, version),
				errdetail("It worked beside the library of another version, which the server preloaded; the reconciler of version %s works in its place.",
						  version));
		leaving = true;
	}
	else if (durable_beside)
		report_wait(WAIT_OLD_EXTENSION, version);	/* an update not committed yet */
	else if (DurableVersionNewer(version, DURABLE_VERSION))
		report_wait(WAIT_NEWER_EXTENSION, version);
	else
		report_wait(older_reconciler_works(version) ?
					WAIT_OLD_EXTENSION_BESIDE : WAIT_OLD_EXTENSION, version);
	return false;
}

/* whether the last tick found durable's tables distributed by Citus */
static bool distributed = false;

static uint64 run_tick(bool *vacuum);

/*
 * try_abort
 *		AbortCurrentTransaction, once: whether it got to its end.  An error
 *		it raises is said at LOG, unless it is the last try's (rethrown).
 */
static bool
try_abort(MemoryContext loop_context, bool last)
{
	volatile bool aborted = false;

	PG_TRY();
	{
		AbortCurrentTransaction();
		aborted = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		if (last)
			PG_RE_THROW();
		MemoryContextSwitchTo(loop_context);
		edata = CopyErrorData();
		FlushErrorState();
		ereport(LOG,
				errmsg("durable reconciler could not abort a tick given up: %s",
					   edata->message),
				errdetail("The abort is tried again."));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return aborted;
}

/*
 * abort_tick
 *		AbortCurrentTransaction for a tick given up.  On Citus the abort
 *		itself talks to the nodes (ROLLBACK, ROLLBACK TO SAVEPOINT) and may
 *		fail again on a node that went away; as PostgresMain does when its
 *		abort fails, the abort is tried again from where it stopped, a few
 *		times.
 */
#define DURABLE_ABORT_TRIES 3

static void
abort_tick(MemoryContext loop_context)
{
	for (int attempt = 1; attempt <= DURABLE_ABORT_TRIES; attempt++)
		if (try_abort(loop_context, attempt == DURABLE_ABORT_TRIES))
			return;
}

/*
 * run_guarded_tick
 *		run_tick, and the vacuum it asks for (vacuum.c).  On Citus, where a
 *		node that goes away fails a tick at any statement, at a savepoint of
 *		a part, at its commit (a connection Citus holds to be essential),
 *		and in the vacuum's transactions, the tick is given up and the next
 *		one tries again, as reconcile.c does for each part of a tick.  A
 *		node's going away (DurableNodeUnreachable) is logged at LOG,
 *		anything else as a WARNING, once, before the abort (which may fail
 *		too: abort_tick).  On one server an error is not caught: the worker
 *		exits.  A tick blocked by a lock (on Citus its waits are bounded:
 *		DurableBoundTickLockWaits) is logged at LOG too: an update or a drop
 *		of the extension under way holds it.  Whether the tables are
 *		distributed is known from the tick
 *		that fails, which reads it before it does anything else; a node's
 *		going away is a tick given up even where that reads "not
 *		distributed" (the first tick after durable_enable_citus may still
 *		read it so).  Returns 0 for a tick given up.
 */
static uint64
run_guarded_tick(MemoryContext loop_context)
{
	MemoryContext tick_context = CurrentMemoryContext;
	volatile uint64 work = 0;

	PG_TRY();
	{
		bool		vacuum = false;

		work = run_tick(&vacuum);
		if (vacuum)
			DurableVacuumTasks();
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		unreachable;

		MemoryContextSwitchTo(loop_context);
		edata = CopyErrorData();
		FlushErrorState();
		unreachable = DurableNodeUnreachable(edata);
		if (!distributed && !unreachable)
			ReThrowError(edata);
		ereport(unreachable || DurablePartBlocked(edata) ? LOG : WARNING,
				errmsg("durable reconciler gave up a tick: %s", edata->message),
				errdetail("The next tick tries again."));
		FreeErrorData(edata);
		abort_tick(loop_context);

		/* a vacuum given up leaves its statement's context (vacuum.c) */
		if (PortalContext != NULL)
		{
			MemoryContextDelete(PortalContext);
			PortalContext = NULL;
		}
		MemoryContextSwitchTo(tick_context);
		pgstat_report_activity(STATE_IDLE, NULL);
		work = 0;
	}
	PG_END_TRY();
	return work;
}

/*
 * run_tick
 *		One transaction: a tick of reconciliation if the extension is ready
 *		(extension_ready).  Returns the largest batch count of the tick (0
 *		when skipped); sets *vacuum when durable.live_tasks wants vacuuming
 *		(vacuum.c).
 */
static uint64
run_tick(bool *vacuum)
{
	uint64		work = 0;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "durable reconcile tick");
	if (distributed)
		DurableBoundTickLockWaits();

	*vacuum = false;
	if (extension_ready())
	{
		distributed = DurableDistributed();
		/* on Citus, skipped while a drop or an update holds a table */
		if (!distributed || DurableTryLockSchemaTables())
		{
			work = DurableReconcileTick(durable_reconcile_batch, NULL, NULL);
			*vacuum = DurableTasksNeedVacuum();
		}
	}

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
	return work;
}

void
durable_reconciler_main(Datum main_arg)
{
	MemoryContext tick_context;
	TimestampTz next_tick;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* the server's settings only, and durable's pins (settings.c) */
	DurableKeepServerSettings();
	BackgroundWorkerInitializeConnection(durable_database, NULL, 0);
	pgstat_report_appname("durable reconciler");
	DurablePinSettings();

	tick_context = AllocSetContextCreate(TopMemoryContext,
										 "durable reconciler tick",
										 ALLOCSET_DEFAULT_SIZES);
	elog(LOG, "durable reconciler started in database \"%s\"", durable_database);

	next_tick = GetCurrentTimestamp();
	for (;;)
	{
		TimestampTz now;
		long		wait_ms;

		CHECK_FOR_INTERRUPTS();
		now = GetCurrentTimestamp();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			/* a shorter interval applies to the wait already under way */
			next_tick = Min(next_tick,
							TimestampTzPlusMilliseconds(now, durable_reconcile_interval));
		}

		if (durable_reconciler_enabled && now >= next_tick)
		{
			MemoryContext old = MemoryContextSwitchTo(tick_context);
			uint64		work = run_guarded_tick(old);

			MemoryContextSwitchTo(old);
			MemoryContextReset(tick_context);
			if (leaving)
				proc_exit(0);	/* for good: the postmaster forgets the worker */

			/* a full batch means more is waiting: go again at once */
			if (work >= (uint64) durable_reconcile_batch)
				continue;
			next_tick = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													durable_reconcile_interval);
		}
		else if (now >= next_tick)
			next_tick = TimestampTzPlusMilliseconds(now, durable_reconcile_interval);

		wait_ms = (long) ((next_tick - GetCurrentTimestamp()) / 1000);
		if (wait_ms > 0)
		{
			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 Min(wait_ms, durable_reconcile_interval),
							 PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
}

/*
 * database_exists
 *		Whether a database of that name exists, in a transaction of its own.
 *		Connected to no database, the launcher can read only shared catalogs,
 *		and only by a heap scan (their indexes' descriptors may not be built
 *		yet), as the logical replication launcher does.
 */
static bool
database_exists(const char *name)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	bool		exists;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_database_datname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum(name));
	scan = systable_beginscan(rel, DatabaseNameIndexId, false, NULL, 1, &key);
	exists = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return exists;
}

/* start the reconciler as a dynamic worker; NULL when no slot is free */
static BackgroundWorkerHandle *
start_reconciler(void)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;

	/* the launcher starts it again, after DURABLE_RESTART_SECONDS */
	DurableWorkerSpec(&worker, "durable_reconciler_main", "durable reconciler",
					  BGW_NEVER_RESTART);
	worker.bgw_notify_pid = MyProcPid;
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		return NULL;
	return handle;
}

/* a launcher that exits takes its reconciler with it: the next starts one */
static void
stop_reconciler(int code, Datum arg)
{
	BackgroundWorkerHandle **handle = (BackgroundWorkerHandle **) DatumGetPointer(arg);

	if (*handle != NULL)
		TerminateBackgroundWorker(*handle);
}

/*
 * durable_launcher_main
 *		The static background worker: connected to no database, it starts the
 *		reconciler in durable.database once that database exists, and again
 *		DURABLE_RESTART_SECONDS after it stopped (an error, a crash of its
 *		own, a dropped database).  A missing database, or no free worker
 *		slot, is said once in the log and checked again at that interval.
 */
void
durable_launcher_main(Datum main_arg)
{
	BackgroundWorkerHandle *handle = NULL;
	TimestampTz not_before = 0;
	bool		said_missing = false;
	bool		said_no_slot = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("durable launcher");
	before_shmem_exit(stop_reconciler, PointerGetDatum(&handle));

	for (;;)
	{
		pid_t		pid;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		if (handle != NULL && GetBackgroundWorkerPid(handle, &pid) == BGWH_STOPPED)
		{
			pfree(handle);
			handle = NULL;
			not_before = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													 DURABLE_RESTART_SECONDS * 1000);
		}

		if (handle == NULL && GetCurrentTimestamp() >= not_before)
		{
			if (!database_exists(durable_database))
			{
				if (!said_missing)
					ereport(LOG,
							errmsg("durable reconciler is waiting for database \"%s\" to exist",
								   durable_database),
							errdetail("durable.database names it; the launcher checks again every %d seconds.",
									  DURABLE_RESTART_SECONDS),
							errhint("Create the database, or set durable.database and restart the server."));
				said_missing = true;
			}
			else if ((handle = start_reconciler()) == NULL)
			{
				if (!said_no_slot)
					ereport(LOG,
							errmsg("durable reconciler cannot start: no background worker slot is free"),
							errdetail("The launcher tries again every %d seconds.",
									  DURABLE_RESTART_SECONDS),
							errhint("Raise max_worker_processes."));
				said_no_slot = true;
			}
			else
			{
				if (said_missing)
					ereport(LOG,
							errmsg("durable reconciler found database \"%s\"",
								   durable_database));
				said_missing = said_no_slot = false;
			}
			if (handle == NULL)
				not_before = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 DURABLE_RESTART_SECONDS * 1000);
		}

		/* the reconciler's start and stop set the latch (bgw_notify_pid) */
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 DURABLE_RESTART_SECONDS * 1000L,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
