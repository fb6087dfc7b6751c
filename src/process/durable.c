/*-------------------------------------------------------------------------
 *
 * durable.c
 *	  Module magic, GUCs, the registration of the reconciler, and what the
 *	  library says about how it was loaded.
 *
 * Without shared_preload_libraries the SQL API works all the same; only
 * what needs the postmaster is missing: the reconciler (durable_reconcile()
 * can be scheduled instead, with pg_cron) and the postmaster-level GUCs,
 * durable.database and durable.node_id, which only a preloaded library may
 * define (anything else is FATAL).  Task ids then carry node number 0.
 * durable.status says which case a database is in, and CREATE EXTENSION
 * says it once.
 *
 *-------------------------------------------------------------------------
 */
#include "process/process.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/builtins.h"
#include "utils/guc.h"

DURABLE_MODULE_MAGIC;

/* whether the postmaster loaded this library (shared_preload_libraries) */
bool		durable_preloaded = false;

/* durable.notice_status() was called in this transaction */
static bool notice_pending = false;

/* and the commit is to start this version's reconciler beside an older one */
static bool reconciler_pending = false;

void		_PG_init(void);

/*
 * Whether a library of another version of durable, which the postmaster
 * preloaded, has defined this setting (rather than left a placeholder):
 * this one was loaded beside it, for the functions of its own version,
 * which the extension is at before the restart that ends an upgrade, or
 * still at after it (docs/design.md section 14).  A setting cannot be
 * defined twice.
 */
static bool
defined_by_preloaded(const char *name)
{
	return GetConfigOption(name, true, false) != NULL &&
		(GetConfigOptionFlags(name, true) & GUC_CUSTOM_PLACEHOLDER) == 0;
}

/*
 * Define a setting, or, when the preloaded library of another version has,
 * take its value as it is now: later changes reach that library's variable
 * only.  A postmaster setting that library does not have keeps its
 * default, as only the postmaster may define one.
 */
static bool
postmaster_only(GucContext context)
{
	return context == PGC_POSTMASTER && !process_shared_preload_libraries_in_progress;
}

static void
int_setting(const char *name, const char *short_desc, const char *long_desc,
			int *variable, int boot, int min, int max,
			GucContext context, int flags)
{
	if (defined_by_preloaded(name))
		*variable = pg_strtoint32(GetConfigOption(name, false, false));
	else if (postmaster_only(context))
		*variable = boot;
	else
		DefineCustomIntVariable(name, short_desc, long_desc, variable,
								boot, min, max, context, flags,
								NULL, NULL, NULL);
}

static void
bool_setting(const char *name, const char *short_desc, const char *long_desc,
			 bool *variable, bool boot, GucContext context)
{
	if (defined_by_preloaded(name))
		*variable = strcmp(GetConfigOption(name, false, false), "on") == 0;
	else if (postmaster_only(context))
		*variable = boot;
	else
		DefineCustomBoolVariable(name, short_desc, long_desc, variable,
								 boot, context, 0, NULL, NULL, NULL);
}

static void
string_setting(const char *name, const char *short_desc, const char *long_desc,
			   char **variable, const char *boot, GucContext context)
{
	if (defined_by_preloaded(name))
		*variable = MemoryContextStrdup(TopMemoryContext,
										GetConfigOption(name, false, false));
	else if (postmaster_only(context))
		*variable = MemoryContextStrdup(TopMemoryContext, boot);
	else
		DefineCustomStringVariable(name, short_desc, long_desc, variable,
								   boot, context, 0, NULL, NULL, NULL);
}

/* the GUCs any backend may define, preloaded or not */
static void
define_gucs(void)
{
	int_setting("durable.max_payload_size",
				gettext_noop("Largest payload, result, error or metadata durable accepts."),
				NULL,
				&durable_max_payload_size,
				1024, 1, MAX_KILOBYTES,
				PGC_SUSET, GUC_UNIT_KB);

	int_setting("durable.reconcile_interval",
				gettext_noop("Time between two ticks of the durable reconciler."),
				gettext_noop("A tick whose batch was full is followed by the next one at once."),
				&durable_reconcile_interval,
				1000, 10, 3600 * 1000,
				PGC_SIGHUP, GUC_UNIT_MS);

	int_setting("durable.reconcile_batch",
				gettext_noop("Most rows of each kind the durable reconciler handles in one transaction."),
				NULL,
				&durable_reconcile_batch,
				1000, 1, DURABLE_MAX_BATCH,
				PGC_SIGHUP, 0);

	int_setting("durable.vacuum_threshold",
				gettext_noop("Dead row versions in durable.live_tasks after which the durable reconciler vacuums it."),
				gettext_noop("0 leaves the table to autovacuum."),
				&durable_vacuum_threshold,
				20000, 0, INT_MAX,
				PGC_SIGHUP, 0);

	bool_setting("durable.reconciler_enabled",
				 gettext_noop("Whether the durable reconciler works; when off it waits idle."),
				 NULL,
				 &durable_reconciler_enabled,
				 true,
				 PGC_SIGHUP);

	int_setting("durable.retention",
				gettext_noop("How long finished tasks, with their steps and events, are kept."),
				gettext_noop("-1 keeps them for ever."),
				&durable_retention,
				7 * 24 * 3600, -1, INT_MAX,
				PGC_SUSET, GUC_UNIT_S);

	bool_setting("durable.counters",
				 gettext_noop("Whether durable counts what it does in shared memory (durable_metrics_prometheus())."),
				 gettext_noop("Counting needs durable in shared_preload_libraries."),
				 &durable_counting,
				 true,
				 PGC_SUSET);

	int_setting("durable.inbox_retention",
				gettext_noop("How long inbox entries and published outbox messages are kept."),
				gettext_noop("-1 keeps them for ever. A duplicate delivered after this is no longer recognised."),
				&durable_inbox_retention,
				7 * 24 * 3600, -1, INT_MAX,
				PGC_SUSET, GUC_UNIT_S);
}

/* the GUCs only the postmaster may define: its children inherit them */
static void
define_postmaster_gucs(void)
{
	int_setting("durable.node_id",
				gettext_noop("Number of this node in task ids."),
				gettext_noop("Nodes that create tasks for the same tables, "
							 "as in a distributed deployment, need different "
							 "numbers, from 0 to 255."),
				&durable_node_id,
				0, 0, 255,
				PGC_POSTMASTER, 0);

	int_setting("durable.counters_queues",
				gettext_noop("Queues whose counters durable keeps in shared memory."),
				gettext_noop("The queues past this many are counted together, as queue \"\"."),
				&durable_counters_queues,
				1000, 1, 100000,
				PGC_POSTMASTER, 0);

	string_setting("durable.database",
				   gettext_noop("Database in which the durable reconciler works."),
				   NULL,
				   &durable_database,
				   "postgres",
				   PGC_POSTMASTER);
}

/*
 * Without preloading, a durable.node_id or durable.database in the
 * configuration is a placeholder that MarkGUCPrefixReserved() removes with a
 * terse warning of its own.  Say what it means: a node id set for a
 * distributed deployment is not in the task ids this session makes.
 */
static void
warn_postmaster_placeholders(void)
{
	const char *node_id = GetConfigOption("durable.node_id", true, false);
	const char *database = GetConfigOption("durable.database", true, false);

	if (node_id != NULL && strcmp(node_id, "0") != 0)
		ereport(WARNING,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("durable.node_id is ignored because durable is not preloaded"),
				errdetail("Task ids made without preloading carry node number 0, not %s.",
						  node_id),
				errhint("Add durable to shared_preload_libraries and restart the server."));
	if (database != NULL)
		ereport(WARNING,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("durable.database is ignored because durable is not preloaded"),
				errdetail("No reconciler runs; schedule durable_reconcile() instead."),
				errhint("Add durable to shared_preload_libraries and restart the server."));
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

	DurableWorkerSpec(&worker, "durable_launcher_main", "durable launcher",
					  DURABLE_RESTART_SECONDS);
	RegisterBackgroundWorker(&worker);
}

void
_PG_init(void)
{
	if (IsBinaryUpgrade)
		return;

	/* before this library defines any */
	durable_beside = defined_by_preloaded("durable.database");

	define_gucs();
	if (process_shared_preload_libraries_in_progress)
	{
		durable_preloaded = true;
		define_postmaster_gucs();
	}
	else if (durable_beside)
		define_postmaster_gucs();
	else
		warn_postmaster_placeholders();
	MarkGUCPrefixReserved("durable");
	if (durable_preloaded)
	{
		DurableCountersRequestShmem();
		register_reconciler();
	}
}

/*
 * durable.library_status(OUT preloaded bool, OUT reconciler_database text,
 *						  OUT reconciler_enabled bool, OUT node_id int,
 *						  OUT library_version text)
 *
 * What the library of this session knows about how it was loaded, for the
 * view durable.status: without preloading there is no reconciler, no
 * durable.database (NULL) and node number 0.  During an upgrade the
 * library preloaded is an earlier version's, whose settings this one took.
 */
PG_FUNCTION_INFO_V1(durable_library_status);
Datum
durable_library_status(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};
	bool		preloaded = durable_preloaded || durable_beside;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = BoolGetDatum(preloaded);
	if (preloaded && durable_database != NULL)
		values[1] = CStringGetTextDatum(durable_database);
	else
		nulls[1] = true;
	values[2] = BoolGetDatum(preloaded && durable_reconciler_enabled);
	values[3] = Int32GetDatum(durable_node_id);
	values[4] = CStringGetTextDatum(DURABLE_VERSION);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

/*
 * Say at the commit of a CREATE or ALTER EXTENSION that no reconciler works
 * in this database, unless the extension is gone by then (a rolled back
 * savepoint).  Not during the script itself: CREATE EXTENSION raises
 * client_min_messages to WARNING while its script runs.
 *
 * While the server runs an earlier version's library, this version's
 * functions were just bound to this library, and that version's reconciler
 * waits for an extension of its own version: this version's then works, in
 * a worker of its own, from the commit to the restart (docs/design.md
 * section 14).  A transaction prepared for a commit in two phases (Citus
 * updates a worker so) starts it when it is prepared, says nothing, and
 * the reconciler waits for the commit.
 */
static void
status_notice_at_commit(XactEvent event, void *arg)
{
	char	   *here;
	bool		prepare = event == XACT_EVENT_PRE_PREPARE;

	if ((event == XACT_EVENT_COMMIT || event == XACT_EVENT_PREPARE) && reconciler_pending)
		DurableStartReconcilerAtUpdate();
	if (event != XACT_EVENT_PRE_COMMIT && !prepare)
		reconciler_pending = false;
	if (!notice_pending)
		return;
	/* said at this commit, or never: an abort forgets it */
	notice_pending = false;
	if (event != XACT_EVENT_PRE_COMMIT && !prepare)
		return;
	if (!OidIsValid(get_extension_oid("durable", true)))
		return;
	here = get_database_name(MyDatabaseId);
	if (durable_beside)
	{
		reconciler_pending = strcmp(durable_database, here) == 0;
		if (!prepare)
			ereport(NOTICE,
					errmsg("the server runs the library of an earlier version of durable until it restarts"),
					errdetail("Until then each session loads the library of durable %s beside it for the functions of durable %s%s.",
							  DURABLE_VERSION, DURABLE_VERSION,
							  reconciler_pending ? ", and the reconciler works in a background worker of its own" : ""),
					errhint("Restart the server to finish the update."));
	}
	else if (prepare)
		return;
	else if (!durable_preloaded)
		ereport(NOTICE,
				errmsg("durable is not preloaded: no reconciler works in database \"%s\"",
					   here),
				errdetail("The SQL API works, and claims settle the expired leases they come across, "
						  "but stuck alarms, retention and the leases of idle queues wait for durable_reconcile(). "
						  "Task ids carry node number 0."),
				errhint("Schedule durable_reconcile() with pg_cron, "
						"or add durable to shared_preload_libraries and restart the server."));
	else if (durable_database == NULL || strcmp(durable_database, here) != 0)
		ereport(NOTICE,
				errmsg("the durable reconciler works in database \"%s\", not in \"%s\"",
					   durable_database ? durable_database : "", here),
				errdetail("durable.database names the one database the reconciler works in."),
				errhint("Schedule durable_reconcile() in this database with pg_cron, "
						"or set durable.database and restart the server."));
}

/*
 * durable.notice_status() RETURNS void
 *
 * Called by the install and update scripts: at the commit, a NOTICE says
 * whether the reconciler cannot work in this database (not preloaded, or
 * preloaded for another database) and what to do instead.
 */
PG_FUNCTION_INFO_V1(durable_notice_status);
Datum
durable_notice_status(PG_FUNCTION_ARGS)
{
	static bool registered = false;

	if (!registered)
	{
		RegisterXactCallback(status_notice_at_commit, NULL);
		registered = true;
	}
	notice_pending = true;
	PG_RETURN_VOID();
}
