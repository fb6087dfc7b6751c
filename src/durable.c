/*-------------------------------------------------------------------------
 *
 * durable.c
 *	  Module magic, GUCs and the registration of the reconciler.
 *
 * Without shared_preload_libraries the SQL API works all the same; only the
 * background worker is missing, and durable_reconcile() can be scheduled
 * instead (pg_cron).
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/guc.h"

DURABLE_MODULE_MAGIC;

/* bits 22..15 of every task id this server makes */
int			durable_node_id = 0;

/* largest payload, result, error or metadata accepted, in kB */
int			durable_max_payload_size = 1024;

/* the reconciler */
char	   *durable_database = NULL;
int			durable_reconcile_interval = 1000;
int			durable_reconcile_batch = 1000;
bool		durable_reconciler_enabled = true;
int			durable_vacuum_threshold = 20000;

/* retention of finished tasks, and of inbox and outbox entries, in seconds */
int			durable_retention = 7 * 24 * 3600;
int			durable_inbox_retention = 7 * 24 * 3600;

void		_PG_init(void);

static void
define_gucs(void)
{
	DefineCustomIntVariable("durable.max_payload_size",
							gettext_noop("Largest payload, result, error or metadata durable accepts."),
							NULL,
							&durable_max_payload_size,
							1024, 1, MAX_KILOBYTES,
							PGC_SUSET, GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("durable.reconcile_interval",
							gettext_noop("Time between two ticks of the durable reconciler."),
							gettext_noop("A tick whose batch was full is followed by the next one at once."),
							&durable_reconcile_interval,
							1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("durable.reconcile_batch",
							gettext_noop("Most rows of each kind the durable reconciler handles in one transaction."),
							NULL,
							&durable_reconcile_batch,
							1000, 1, DURABLE_MAX_BATCH,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("durable.vacuum_threshold",
							gettext_noop("Dead row versions in durable.tasks after which the durable reconciler vacuums it."),
							gettext_noop("0 leaves the table to autovacuum."),
							&durable_vacuum_threshold,
							20000, 0, INT_MAX,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("durable.reconciler_enabled",
							 gettext_noop("Whether the durable reconciler works; when off it waits idle."),
							 NULL,
							 &durable_reconciler_enabled,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("durable.retention",
							gettext_noop("How long finished tasks, with their steps and events, are kept."),
							gettext_noop("-1 keeps them for ever."),
							&durable_retention,
							7 * 24 * 3600, -1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("durable.inbox_retention",
							gettext_noop("How long inbox entries and published outbox messages are kept."),
							gettext_noop("-1 keeps them for ever. A duplicate delivered after this is no longer recognised."),
							&durable_inbox_retention,
							7 * 24 * 3600, -1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("durable.node_id",
							gettext_noop("Number of this node in task ids."),
							gettext_noop("Nodes that create tasks for the same tables, "
										 "as in a distributed deployment, need different "
										 "numbers, from 0 to 255."),
							&durable_node_id,
							0, 0, 255,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("durable.database",
							   gettext_noop("Database in which the durable reconciler works."),
							   NULL,
							   &durable_database,
							   "postgres",
							   PGC_POSTMASTER, 0,
							   NULL, NULL, NULL);

	MarkGUCPrefixReserved("durable");
}

/*
 * The static worker is a launcher connected to no database: a worker that
 * connects to durable.database fails with FATAL when the database does not
 * exist, and the postmaster would start it again, and log that again, every
 * bgw_restart_time.  The launcher waits for the database quietly and starts
 * the reconciler in it as a dynamic worker (reconciler.c).
 */
static void
register_reconciler(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	/* never on a standby: the reconciler writes */
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = DURABLE_RESTART_SECONDS;
	strlcpy(worker.bgw_library_name, "durable", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "durable_launcher_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "durable launcher", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "durable launcher", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

void
_PG_init(void)
{
	if (IsBinaryUpgrade)
		return;

	define_gucs();
	if (!process_shared_preload_libraries_in_progress)
		return;
	register_reconciler();
}
