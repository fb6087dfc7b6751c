/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  What durable's background workers run under: the server's own
 *	  configuration, never what their database or their role sets, and the
 *	  settings durable pins on top.
 *
 * A database owner sets anything a session may (ALTER DATABASE ... SET),
 * a role's settings come with it (ALTER ROLE ... SET), and a superuser may
 * set the rest there too.  A worker connecting to a database takes all of
 * them (InitPostgres applies them as its connection's defaults): a role to
 * act as, exit_on_error, vacuum_cost_delay, default_tablespace, and any
 * setting a later PostgreSQL adds.  No list of settings to pin can be
 * complete, so the workers take none of them: before connecting, a worker
 * keeps the value of every setting, which is then the server's
 * (postgresql.conf, ALTER SYSTEM, the command line), and after connecting
 * it sets back every setting whose source is a database's or a role's
 * (PGC_S_GLOBAL to PGC_S_DATABASE_USER) to that value, as an override
 * that nothing later replaces, and says once in the log which it ignored.
 * It does so outside any transaction first, so that none of them (a
 * transaction_timeout of a millisecond) acts on the transaction in which
 * the few that need one (role, session_authorization) are set back.
 * A reload of the configuration file then no longer changes those (the
 * next start of the worker reads them again).  It ends as the bootstrap
 * superuser it connected as, or stops with an error.
 *
 * InitPostgres itself still acts on two kinds of setting after it applied
 * those of the database and the role: it sets up the conversion to the
 * client's encoding, and commits the transaction it connected in.  A
 * client_encoding of the database that needs a conversion, and a
 * dynamic_library_path its library is then not found on (PostgreSQL 18
 * looks even "$libdir/" names up there), ended every start; so did a
 * transaction_timeout shorter than the rest of that transaction.  So the
 * pins below are set before connecting already, where the database's and
 * the role's values cannot replace them (an override ranks above both),
 * with client_encoding at SQL_ASCII, which converts nothing, until the
 * worker is connected and takes its database's encoding, as any worker
 * does.
 *
 * Placeholders (settings of a library not loaded) are left: no library a
 * worker loads later defines one.  durable's own are defined at preload
 * and PL/pgSQL, the language of durable's functions, is loaded before
 * connecting, so that its settings are real ones, undone as any other.
 *
 * Then the pins (pinned_settings): every statement durable runs expects
 * the built-in operators first; the texts of times, intervals and numbers
 * it reads or writes are in one style; its ticks are READ COMMITTED (their
 * statements re-check what a row they waited for became, and SKIP LOCKED
 * lets two reconcilers share the work), writable, and limited by nothing
 * but their own batches.  A function's own SET clause (maintain_history's
 * lock_timeout) still applies inside it.  Nothing is JIT-compiled: a
 * tick's statements are small and many, and compiling them cost more than
 * running them (two thirds of an idle reconciler's time on a Citus node).
 * An error is never made FATAL (exit_on_error): a part of a tick that
 * fails is isolated (core/part.c).  The reconciler's own VACUUM of
 * durable.live_tasks is never delayed for cost (vacuum_cost_delay): it
 * runs between ticks, and a vacuum slowed down postpones the next tick.
 *
 *-------------------------------------------------------------------------
 */
#include "process/process.h"

#include "access/xact.h"
#include "catalog/pg_authid_d.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/memutils.h"

/* a setting as the server's configuration gives it, kept before connecting */
typedef struct ServerSetting
{
	char	   *name;
	char	   *value;			/* NULL: none (a string never set) */
} ServerSetting;

static ServerSetting *server_settings = NULL;
static int	nserver_settings = 0;

static const struct
{
	const char *name;
	const char *value;
}			pinned_settings[] =
{
	{"search_path", "pg_catalog, pg_temp"},
	{"DateStyle", "ISO, MDY"},
	{"IntervalStyle", "postgres"},
	{"TimeZone", "UTC"},
	{"extra_float_digits", "1"},
	{"default_transaction_isolation", "read committed"},
	{"default_transaction_read_only", "off"},
	{"statement_timeout", "0"},
	{"lock_timeout", "0"},
	{"idle_in_transaction_session_timeout", "0"},
	{"jit", "off"},
	{"exit_on_error", "off"},
	{"vacuum_cost_delay", "0"},
#ifdef DURABLE_HAVE_TRANSACTION_TIMEOUT
	{"transaction_timeout", "0"},
#endif
};

/*
 * DurableKeepServerSettings
 *		Call before BackgroundWorkerInitializeConnection: load PL/pgSQL,
 *		keep the value of every setting, the server's own, and pin
 *		pinned_settings, and client_encoding to no conversion, for the
 *		connection itself.
 */
void
DurableKeepServerSettings(void)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	struct config_generic **vars;
	int			nvars;

	load_file("$libdir/plpgsql", false);
	vars = DURABLE_GUC_VARIABLES(&nvars);
	server_settings = palloc(sizeof(ServerSetting) * nvars);
	nserver_settings = 0;
	for (int i = 0; i < nvars; i++)
	{
		const char *value;

		if (vars[i]->flags & GUC_CUSTOM_PLACEHOLDER)
			continue;
		value = GetConfigOption(vars[i]->name, false, false);
		server_settings[nserver_settings].name = pstrdup(vars[i]->name);
		server_settings[nserver_settings].value = value ? pstrdup(value) : NULL;
		nserver_settings++;
	}
	MemoryContextSwitchTo(old);

	for (size_t i = 0; i < lengthof(pinned_settings); i++)
		SetConfigOption(pinned_settings[i].name, pinned_settings[i].value,
						PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("client_encoding", "SQL_ASCII", PGC_SUSET, PGC_S_OVERRIDE);
}

/* the kept setting of that name, or NULL */
static const ServerSetting *
server_setting(const char *name)
{
	for (int i = 0; i < nserver_settings; i++)
		if (strcmp(server_settings[i].name, name) == 0)
			return &server_settings[i];
	return NULL;
}

/*
 * set_back
 *		Set one setting a database or a role set back to the server's value;
 *		false when that fails, saying why at elevel.  Outside a transaction
 *		it does what a reload of the configuration file may do there: the
 *		check of a setting that needs the catalog refuses it.
 *		session_authorization has none in a worker (it connects as the
 *		bootstrap superuser without setting it, and reads as NULL before
 *		PostgreSQL 17, as an empty string since): that role is its value.
 */
static bool
set_back(const char *name, int elevel)
{
	const ServerSetting *kept = server_setting(name);
	const char *value = kept != NULL ? kept->value : NULL;

	if ((value == NULL || value[0] == '\0') &&
		strcmp(name, "session_authorization") == 0)
	{
		/* a role's name is read from the catalog: in a transaction only */
		if (!IsTransactionState())
			return false;
		value = GetUserNameFromId(BOOTSTRAP_SUPERUSERID, false);
	}
	return value != NULL &&
		set_config_option(name, value, PGC_SU_BACKEND, PGC_S_OVERRIDE,
						  GUC_ACTION_SET, true, elevel, false) > 0;
}

/* whether a setting's value came from the worker's database or role */
static bool
from_database_or_role(const struct config_generic *var)
{
	return var->source >= PGC_S_GLOBAL && var->source <= PGC_S_DATABASE_USER &&
		!(var->flags & GUC_CUSTOM_PLACEHOLDER);
}

/*
 * DurablePinSettings
 *		Call right after BackgroundWorkerInitializeConnection (after
 *		DurableKeepServerSettings): set back every setting that came from
 *		the database or the role, say which in the log, check that the
 *		worker acts as the bootstrap superuser, and take the database's
 *		encoding.
 */
void
DurablePinSettings(void)
{
	struct config_generic **vars;
	int			nvars;
	StringInfoData ignored;

	Assert(server_settings != NULL);
	initStringInfo(&ignored);

	/*
	 * First outside any transaction, so that no setting of the database or
	 * the role times out (transaction_timeout, PostgreSQL 17) or otherwise
	 * limits the transaction that sets the rest back; then, in a
	 * transaction, those whose check looks the catalog up (role and
	 * session_authorization, which look their roles up, refuse to be set
	 * outside one).
	 */
	vars = DURABLE_GUC_VARIABLES(&nvars);
	for (int i = 0; i < nvars; i++)
	{
		if (!from_database_or_role(vars[i]))
			continue;
		appendStringInfo(&ignored, "%s%s", ignored.len > 0 ? ", " : "",
						 vars[i]->name);
		(void) set_back(vars[i]->name, DEBUG1);
	}
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	vars = DURABLE_GUC_VARIABLES(&nvars);
	for (int i = 0; i < nvars; i++)
		if (from_database_or_role(vars[i]) && !set_back(vars[i]->name, WARNING))
			ereport(ERROR,
					errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM),
					errmsg("%s cannot ignore setting \"%s\" of its database or role",
						   MyBgworkerEntry->bgw_type, vars[i]->name),
					errdetail("The server's configuration gives it no value the worker could go back to."),
					errhint("Remove it: ALTER DATABASE ... RESET \"%s\" or ALTER ROLE ... RESET \"%s\".",
							vars[i]->name, vars[i]->name));
	if (GetUserId() != BOOTSTRAP_SUPERUSERID ||
		GetSessionUserId() != BOOTSTRAP_SUPERUSERID)
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("%s does not act as the bootstrap superuser",
					   MyBgworkerEntry->bgw_type),
				errdetail("A setting of its database or role changed the role it acts as."));
	CommitTransactionCommand();

	if (ignored.len > 0)
		ereport(LOG,
				errmsg("%s ignores the settings of its database and role: %s",
					   MyBgworkerEntry->bgw_type, ignored.data),
				errdetail("durable's workers run under the server's configuration only."));
	pfree(ignored.data);

	SetConfigOption("client_encoding", GetDatabaseEncodingName(),
					PGC_SUSET, PGC_S_OVERRIDE);
}
