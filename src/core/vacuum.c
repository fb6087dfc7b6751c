/*-------------------------------------------------------------------------
 *
 * vacuum.c
 *	  Keeping the claim index short: the reconciler vacuums
 *	  durable.live_tasks once enough of its row versions have died.
 *
 * Every claim and every commit leaves the task's previous row version dead,
 * and the claim leaves its entry at the front of tasks_claimable, where
 * every later claim steps over it until VACUUM takes it away.  Autovacuum
 * looks at a database at most once a naptime (a minute by default): between
 * its passes claims walk hundreds of index pages of dead
 * entries and slow down several-fold.  So the reconciler vacuums the table
 * itself after durable.vacuum_threshold dead row versions, with index
 * cleanup forced, since VACUUM would otherwise skip the indexes when the
 * dead rows sit on few pages, which is just the case here.  The table holds
 * live work only (finished tasks are in history), so a vacuum's cost does
 * not grow with what is retained.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/vacuum.h"
#include "nodes/makefuncs.h"
#include "parser/parse_node.h"
#include "pgstat.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

/* dead rows of a table that make the tick vacuum it (durable.vacuum_threshold) */
int			durable_vacuum_threshold = 20000;

#define DURABLE_VACUUM_COMMAND \
	"VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) durable.live_tasks"

/*
 * On one server the table is durable.live_tasks; on Citus the shards of it
 * that this node holds, each a table of its own whose statistics count its
 * dead rows (the distributed table itself holds none).  Each keeps what
 * the last vacuum could not remove: dead row versions an old snapshot pins,
 * which vacuuming again cannot help until as many more have died.  That is
 * read right after each vacuum, in a transaction of its own: read at the
 * next tick instead, it would count the row versions that died in between
 * as left by the vacuum, and the next vacuum would come that much later.
 */
#define DURABLE_MAX_VACUUMED 1024	/* durable_enable_citus's most shards */

typedef struct VacuumedTable
{
	char		name[NAMEDATALEN];	/* in schema durable */
	Oid			relid;			/* as last looked up, InvalidOid if missing */
	int64		dead_left;
	bool		due;
} VacuumedTable;

static VacuumedTable vacuumed[DURABLE_MAX_VACUUMED];
static int	nvacuumed = 0;

/*
 * The dead row versions of a table of durable the statistics count, or -1;
 * looks its OID up into the table's entry.
 */
static int64
dead_tuples(VacuumedTable *table)
{
	Oid			schema;
	PgStat_StatTabEntry *stats;

	schema = get_namespace_oid("durable", true);
	table->relid = OidIsValid(schema) ?
		get_relname_relid(table->name, schema) : InvalidOid;
	if (!OidIsValid(table->relid))
		return -1;
	stats = pgstat_fetch_stat_tabentry(table->relid);
	if (stats == NULL)
		return -1;
	return DURABLE_STAT_DEAD_TUPLES(stats);
}

/* on Citus: this node's shards of durable.live_tasks, by name */
enum
{
	SHARD_NAME,
	SHARD_NCOLUMNS
};
static const DurableColumn shard_columns[SHARD_NCOLUMNS] = {
	[SHARD_NAME] = {"shard", TEXTOID},
};
static DurableStatement local_task_shards = {
	.name = "local_task_shards",
	.sql = "SELECT 'live_tasks_' || s.shardid AS shard FROM pg_catalog.pg_dist_shard s"
	" JOIN pg_catalog.pg_dist_placement pl ON pl.shardid = s.shardid"
	" WHERE s.logicalrelid = 'durable.live_tasks'::pg_catalog.regclass"
	" AND pl.groupid = (SELECT groupid FROM pg_catalog.pg_dist_local_group)"
	" ORDER BY s.shardid",
	.nargs = 0,
	DURABLE_COLUMNS(shard_columns),
};

/*
 * find_tables
 *		The tables to look at: durable.live_tasks, or on Citus this node's
 *		shards of it (local_task_shards, SPI connected), keeping what is
 *		known of those already looked at.
 */
static void
find_tables(void)
{
	VacuumedTable *found = palloc(sizeof(VacuumedTable) * DURABLE_MAX_VACUUMED);
	int			nfound = 0;

	if (!DurableDistributed())
	{
		strlcpy(found[nfound++].name, "live_tasks", NAMEDATALEN);
	}
	else
	{
		DurableResult res = DurableRun(&local_task_shards, NULL, NULL,
									   SPI_OK_SELECT, 0);

		for (uint64 row = 0; row < res.rows && nfound < DURABLE_MAX_VACUUMED; row++)
			strlcpy(found[nfound++].name, DurableGetText(res, row, SHARD_NAME), NAMEDATALEN);
	}
	for (int i = 0; i < nfound; i++)
	{
		found[i].relid = InvalidOid;
		found[i].dead_left = 0;
		found[i].due = false;
		for (int j = 0; j < nvacuumed; j++)
			if (strcmp(vacuumed[j].name, found[i].name) == 0)
				found[i].dead_left = vacuumed[j].dead_left;
	}
	memcpy(vacuumed, found, sizeof(VacuumedTable) * nfound);
	nvacuumed = nfound;
	pfree(found);
}

/*
 * DurableTasksNeedVacuum
 *		Whether durable.live_tasks (on Citus: one of this node's shards of
 *		it) has at least durable.vacuum_threshold more dead row versions
 *		than the last vacuum left, as the cumulative statistics count them.
 *		Call inside a transaction, SPI connected.
 */
bool
DurableTasksNeedVacuum(void)
{
	bool		any = false;

	if (durable_vacuum_threshold <= 0)
		return false;
	find_tables();
	for (int i = 0; i < nvacuumed; i++)
	{
		int64		dead = dead_tuples(&vacuumed[i]);

		if (dead < 0)
			continue;
		/* autovacuum may have done better */
		vacuumed[i].dead_left = Min(vacuumed[i].dead_left, dead);
		vacuumed[i].due = dead - vacuumed[i].dead_left >= durable_vacuum_threshold;
		any |= vacuumed[i].due;
	}
	return any;
}

/*
 * DurableVacuumTasks
 *		Vacuum what DurableTasksNeedVacuum found due, as a top-level command
 *		of its own; call outside any transaction.  SKIP_LOCKED leaves a
 *		table alone while autovacuum or anyone else vacuums it.  The tables
 *		are named by the OIDs the tick found them under, with the extension
 *		locked: a DROP EXTENSION may commit once the tick has, and VACUUM
 *		passes over an OID that is gone, where it fails on a name.  On Citus
 *		the shards are vacuumed here, on their node, not through the
 *		distributed table (which would vacuum every node's).
 */
void
DurableVacuumTasks(void)
{
	MemoryContext caller_context = CurrentMemoryContext;
	MemoryContext portal_context;
	VacuumStmt *stmt;
	List	   *rels = NIL;

	/*
	 * VACUUM runs several transactions and keeps what outlives them under
	 * PortalContext; the statement must outlive them too.
	 */
	portal_context = AllocSetContextCreate(TopMemoryContext,
										   "durable vacuum",
										   ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(portal_context);
	for (int i = 0; i < nvacuumed; i++)
		if (vacuumed[i].due)
			rels = lappend(rels, makeVacuumRelation(NULL, vacuumed[i].relid, NIL));
	if (rels == NIL)
	{
		MemoryContextSwitchTo(caller_context);
		MemoryContextDelete(portal_context);
		return;
	}
	stmt = makeNode(VacuumStmt);
	stmt->options = list_make2(makeDefElem("skip_locked", NULL, -1),
							   makeDefElem("index_cleanup",
										   (Node *) makeString("on"), -1));
	stmt->rels = rels;
	stmt->is_vacuumcmd = true;
	PortalContext = portal_context;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	pgstat_report_activity(STATE_RUNNING, DURABLE_VACUUM_COMMAND);
	ExecVacuum(make_parsestate(NULL), stmt, true);
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);

	PortalContext = NULL;
	MemoryContextSwitchTo(caller_context);
	MemoryContextDelete(portal_context);

	/* the vacuum reported what it left to the statistics as it ended */
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	for (int i = 0; i < nvacuumed; i++)
		if (vacuumed[i].due)
		{
			vacuumed[i].dead_left = Max(dead_tuples(&vacuumed[i]), 0);
			vacuumed[i].due = false;
		}
	CommitTransactionCommand();
}
