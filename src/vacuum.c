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
#include "durable.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "commands/vacuum.h"
#include "nodes/makefuncs.h"
#include "parser/parse_node.h"
#include "pgstat.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#define DURABLE_VACUUM_COMMAND \
	"VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) durable.live_tasks"

/*
 * Dead row versions the last vacuum could not remove: an old snapshot pins
 * them, and vacuuming again cannot help until as many more have died.
 * Read right after each vacuum, in a transaction of its own: read at the
 * next tick instead, it would count the row versions that died in between
 * as left by the vacuum, and the next vacuum would come that much later.
 */
static int64 dead_left = 0;

/* the dead row versions of durable.live_tasks the statistics count, or -1 */
static int64
tasks_dead_tuples(void)
{
	Oid			schema;
	Oid			relid;
	PgStat_StatTabEntry *stats;

	schema = get_namespace_oid("durable", true);
	if (!OidIsValid(schema))
		return -1;
	relid = get_relname_relid("live_tasks", schema);
	if (!OidIsValid(relid))
		return -1;
	stats = pgstat_fetch_stat_tabentry(relid);
	if (stats == NULL)
		return -1;
	return DURABLE_STAT_DEAD_TUPLES(stats);
}

/*
 * DurableTasksNeedVacuum
 *		Whether durable.live_tasks has at least durable.vacuum_threshold more dead
 *		row versions than the last vacuum left, as the cumulative statistics
 *		count them.  Call inside a transaction.
 */
bool
DurableTasksNeedVacuum(void)
{
	int64		dead;

	if (durable_vacuum_threshold <= 0)
		return false;
	dead = tasks_dead_tuples();
	if (dead < 0)
		return false;
	dead_left = Min(dead_left, dead);	/* autovacuum may have done better */
	return dead - dead_left >= durable_vacuum_threshold;
}

/*
 * DurableVacuumTasks
 *		Run the VACUUM above, as a top-level command of its own; call outside
 *		any transaction.  SKIP_LOCKED leaves the table alone while autovacuum
 *		or anyone else vacuums it.
 */
void
DurableVacuumTasks(void)
{
	MemoryContext caller_context = CurrentMemoryContext;
	MemoryContext portal_context;
	VacuumStmt *stmt;

	/*
	 * VACUUM runs several transactions and keeps what outlives them under
	 * PortalContext; the statement must outlive them too.
	 */
	portal_context = AllocSetContextCreate(TopMemoryContext,
										   "durable vacuum",
										   ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(portal_context);
	stmt = makeNode(VacuumStmt);
	stmt->options = list_make2(makeDefElem("skip_locked", NULL, -1),
							   makeDefElem("index_cleanup",
										   (Node *) makeString("on"), -1));
	stmt->rels = list_make1(makeVacuumRelation(makeRangeVar("durable", "live_tasks", -1),
											   InvalidOid, NIL));
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
	dead_left = Max(tasks_dead_tuples(), 0);
	CommitTransactionCommand();
}
