/*-------------------------------------------------------------------------
 *
 * reconciler.c
 *	  The durable reconciler: a background worker that runs one tick of
 *	  reconciliation (reconcile.c) per transaction.
 *
 * It holds no logic of its own: durable_reconcile() runs the same routine,
 * so a server that cannot preload durable schedules that call instead.
 * Each tick is one short transaction over bounded batches taken with SKIP
 * LOCKED, so two reconcilers, or a reconciler and a late commit, never both
 * win.  It never sleeps inside a transaction or while holding a snapshot.
 * Between ticks it vacuums durable.tasks when enough of its row versions
 * have died (vacuum.c).  Errors are not caught: the worker exits and the
 * postmaster starts it again after bgw_restart_time.
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/*
 * run_tick
 *		One transaction: a tick of reconciliation if the extension exists
 *		and is not being created or dropped.  Returns the largest batch
 *		count of the tick (0 when skipped); sets *vacuum when durable.tasks
 *		wants vacuuming (vacuum.c).
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

	*vacuum = false;
	if (OidIsValid(get_extension_oid("durable", true)) && !creating_extension)
	{
		work = DurableReconcileTick(durable_reconcile_batch, NULL, NULL);
		*vacuum = DurableTasksNeedVacuum();
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

	BackgroundWorkerInitializeConnection(durable_database, NULL, 0);
	pgstat_report_appname("durable reconciler");
	/* every statement durable runs expects the built-in operators first */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET,
					PGC_S_OVERRIDE);

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
			bool		vacuum;
			uint64		work = run_tick(&vacuum);

			if (vacuum)
				DurableVacuumTasks();
			MemoryContextSwitchTo(old);
			MemoryContextReset(tick_context);

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
