/*-------------------------------------------------------------------------
 *
 * days_worker.c
 *	  The one-shot background worker that makes the coming days of history
 *	  of one database, for a backend that found them missing (core/days.c).
 *
 * It makes them (DurableMakeHistoryDays) in one transaction under the
 * reconciler's settings (the server's, and durable's pins: settings.c),
 * as the bootstrap superuser, and exits.  Two of them at once,
 * or one beside a tick, are harmless: maintain_history lets one maintainer
 * work and tells the others it is busy.  A day that could not be made is
 * logged once, here; the next writer to find it missing asks again a
 * minute later.
 *
 *-------------------------------------------------------------------------
 */
#include "process/process.h"

#include "access/xact.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/snapmgr.h"

/*
 * whether durable is installed in this database at the library's version,
 * as it then stays until the end of the transaction (DurableLockExtension)
 */
static bool
extension_current(void)
{
	char	   *version = DurableLockExtension();

	return version != NULL && strcmp(version, DURABLE_VERSION) == 0;
}

void
durable_days_main(Datum main_arg)
{
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	DurableKeepServerSettings();
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(main_arg),
											  InvalidOid, 0);
	pgstat_report_appname("durable history days");
	DurablePinSettings();

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "durable history days");
	if (extension_current())
		DurableMakeHistoryDays(GetCurrentTransactionStartTimestamp());
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(true);
	pgstat_report_activity(STATE_IDLE, NULL);
	proc_exit(0);
}
