/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  What durable's background workers have in common.
 *
 *-------------------------------------------------------------------------
 */
#include "pure/pure.h"

#include "postmaster/bgworker.h"

/*
 * DurableWorkerSpec
 *		A worker of durable's library: connected to shared memory and a
 *		database, never started on a standby (durable's workers write).
 */
void
DurableWorkerSpec(BackgroundWorker *worker, const char *function,
				  const char *name, int restart_seconds)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = restart_seconds;
	strlcpy(worker->bgw_library_name, DURABLE_LIBRARY, BGW_MAXLEN);
	strlcpy(worker->bgw_function_name, function, BGW_MAXLEN);
	strlcpy(worker->bgw_name, name, BGW_MAXLEN);
	strlcpy(worker->bgw_type, name, BGW_MAXLEN);
}
