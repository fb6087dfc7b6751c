/*-------------------------------------------------------------------------
 *
 * cluster.c
 *	  The installation durable's statements run on: the extension's version
 *	  against the library's, the columns of the tables whose rows the
 *	  statements restate against the library's, whether Citus distributes
 *	  its tables, and the node bits of the task ids this backend makes.
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "access/relation.h"
#include "catalog/namespace.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* durable.node_id (process/durable.c defines the setting) */
int			durable_node_id = 0;

static bool durable_version_checked = false;
static Oid	durable_tasks_relid = InvalidOid;

/*
 * Whether durable's tables are distributed by Citus (durable_enable_citus),
 * and this node's Citus group, as last read: see check_extension_version.
 */
static bool durable_distributed = false;
static int32 durable_citus_group = -1;

/* the tables checked by DurableCheckTables, to check again when they change */
#define CHECKED_TABLES_MAX 16
static DurableTable *checked_tables[CHECKED_TABLES_MAX];
static int	nchecked_tables = 0;

/*
 * A DROP, CREATE or ALTER EXTENSION invalidates durable.live_tasks: check
 * again.  Any change of a table checked by DurableCheckTables (an ALTER
 * TABLE, and whatever else rebuilds its relcache entry) has it checked
 * again before the next statement that restates its rows.
 */
static void
forget_version_check(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == durable_tasks_relid)
		durable_version_checked = false;
	for (int i = 0; i < nchecked_tables; i++)
		if (relid == InvalidOid || relid == checked_tables[i]->relid)
			checked_tables[i]->checked = false;
}

/* the callback above, registered once per backend */
static void
register_callback(void)
{
	DurableForgetOnRelcacheInvalidation(forget_version_check);
}

/*
 * DurableVersionNewer
 *		Whether version a, as in durable.control ("0.10.2"), comes after b.
 */
bool
DurableVersionNewer(const char *a, const char *b)
{
	while (*a != '\0' || *b != '\0')
	{
		char	   *a_end;
		char	   *b_end;
		long		x = strtol(a, &a_end, 10);
		long		y = strtol(b, &b_end, 10);

		if (x != y)
			return x > y;
		a = *a_end == '.' ? a_end + 1 : a_end;
		b = *b_end == '.' ? b_end + 1 : b_end;
		if (a == a_end && b == b_end)
			return strcmp(a, b) > 0;
	}
	return false;
}

/*
 * check_extension_version
 *		The statements are written for the tables of this library's version.
 *		After the library is upgraded and before ALTER EXTENSION durable
 *		UPDATE has run, they would fail with errors about columns nobody
 *		asked for: say what is wrong instead.  A call that began before an
 *		update to a later version committed, and finds it when it locks
 *		durable's tables, fails as a serialization failure: run again, the
 *		transaction calls the functions the update bound to the library of
 *		that version (docs/design.md section 14).  Checked again whenever
 *		durable.live_tasks is invalidated, as any change of the extension
 *		does, and as distributing it does: the plans of distributed tables
 *		are prepared differently (plan.c drops them), so a change there drops
 *		them all.  Read with the latest snapshot, not the transaction's: the
 *		invalidation that brings us here may come from a change committed
 *		after the transaction's snapshot was taken (durable_enable_citus
 *		while a tick waited for a lock), and an older snapshot would cache
 *		the state before it until the next change of the extension.  The
 *		invalidation can arrive in any statement's locking, between two rows
 *		its caller reads: the caller's result stays the last one.
 */
static void
check_extension_version(void)
{
	bool		distributed = false;
	DurableSavedResult caller;

	register_callback();
	DurableSaveResult(&caller);
	PushActiveSnapshot(GetLatestSnapshot());
	if (SPI_execute("SELECT extversion, pg_catalog.to_regclass('durable.live_tasks')::pg_catalog.oid,"
					" pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL"
					" FROM pg_catalog.pg_extension"
					" WHERE extname OPERATOR(pg_catalog.=) 'durable'",
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the version of extension durable");
	if (SPI_processed == 1)
	{
		char	   *installed = SPI_getvalue(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1);
		bool		isnull;
		bool		citus;

		if (DurableVersionNewer(installed, DURABLE_VERSION))
			ereport(ERROR,
					errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					errmsg("extension durable was updated to version %s during this call",
						   installed),
					errdetail("The call began in the library of version %s.", DURABLE_VERSION),
					errhint("Run the transaction again: its calls now go to the library of version %s.",
							installed));
		if (strcmp(installed, DURABLE_VERSION) != 0)
			ereport(ERROR,
					errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					errmsg("extension durable is at version %s, but its library is version %s",
						   installed, DURABLE_VERSION),
					errhint("Run ALTER EXTENSION durable UPDATE."));
		durable_tasks_relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc,
															 2, &isnull));
		if (isnull)
			durable_tasks_relid = InvalidOid;
		citus = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
										   SPI_tuptable->tupdesc, 3, &isnull));
		if (citus && OidIsValid(durable_tasks_relid))
		{
			SPI_freetuptable(SPI_tuptable);
			if (SPI_execute("SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition"
							"  WHERE logicalrelid OPERATOR(pg_catalog.=) 'durable.live_tasks'::pg_catalog.regclass),"
							" (SELECT groupid FROM pg_catalog.pg_dist_local_group)",
							true, 1) != SPI_OK_SELECT || SPI_processed != 1)
				elog(ERROR, "could not read the Citus metadata of durable.live_tasks");
			distributed = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
													 SPI_tuptable->tupdesc, 1, &isnull));
			durable_citus_group = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
															  SPI_tuptable->tupdesc, 2, &isnull));
			if (isnull)
				durable_citus_group = -1;
		}
	}
	PopActiveSnapshot();
	DurableRestoreResult(&caller);
	durable_distributed = distributed;
	durable_version_checked = true;
}

/*
 * DurableDistributed
 *		Whether durable's tables are distributed by Citus; checks the
 *		extension's version first, once until the extension changes.
 */
bool
DurableDistributed(void)
{
	if (!durable_version_checked)
		check_extension_version();
	return durable_distributed;
}

/*
 * DurableNodeId
 *		The node bits of the ids this backend makes.  On a single server,
 *		durable.node_id; on Citus, this node's group, which the cluster
 *		hands out once per node, so two nodes never make the same id.  A
 *		durable.node_id set to anything else is refused rather than used.
 */
int32
DurableNodeId(void)
{
	if (!DurableDistributed())
		return durable_node_id;
	if (durable_citus_group < 0 || durable_citus_group >= (1 << DURABLE_NODE_BITS))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("Citus group %d of this node does not fit in a durable node id",
					   durable_citus_group),
				errdetail("Node ids are %d bits long.", DURABLE_NODE_BITS));
	if (durable_node_id != 0 && durable_node_id != durable_citus_group)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("durable.node_id is %d, but this node is Citus group %d",
					   durable_node_id, durable_citus_group),
				errdetail("On a Citus cluster the node id is the node's group."),
				errhint("Remove durable.node_id from this node's configuration."));
	return durable_citus_group;
}

/*
 * DurableCitusWorker
 *		Whether this node is a Citus node other than the coordinator: one
 *		that must not change durable's tables' definitions (Citus runs DDL
 *		from the coordinator) and that holds shards rather than tables.
 */
bool
DurableCitusWorker(void)
{
	if (!durable_version_checked)
		check_extension_version();
	return durable_citus_group > 0;
}


/*
 * DurableLocalGroup
 *		This node's Citus group (the coordinator's is 0), -1 off Citus.
 */
int32
DurableLocalGroup(void)
{
	return DurableDistributed() ? durable_citus_group : -1;
}

/*
 * the error of a table whose column n (from 1), found or missing (NULL),
 * differs; unless an update to a later version changed it during the call,
 * which check_extension_version reports as such
 */
DURABLE_NORETURN static void
report_table(const DurableTable *table, int n, Form_pg_attribute found)
{
	const DurableTableColumn *declared = n <= table->ncolumns ?
		&table->columns[n - 1] : NULL;

	check_extension_version();
	ereport(ERROR,
			errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			errmsg("table \"%s.%s\" does not have the columns durable's library expects",
				   table->schema, table->name),
			found == NULL ?
			errdetail("Column %d is missing, where the library expects \"%s\" of type %s.",
					  n, declared->name, declared->type) :
			declared == NULL ?
			errdetail("Column %d is \"%s\" of type %s, where the library expects no column.",
					  n, NameStr(found->attname),
					  format_type_extended(found->atttypid, -1,
										   FORMAT_TYPE_FORCE_QUALIFY)) :
			errdetail("Column %d is \"%s\" of type %s, where the library expects \"%s\" of type %s.",
					  n, NameStr(found->attname),
					  format_type_extended(found->atttypid, -1,
										   FORMAT_TYPE_FORCE_QUALIFY),
					  declared->name, declared->type),
			errhint("Undo the change to the table: durable's tables change only through its update scripts."));
	pg_unreachable();
}

/*
 * check_table
 *		Whether a table has the columns declared, by name, order and type:
 *		its columns as its relation has them (pg_attribute's, attnum > 0,
 *		not dropped), read under ACCESS SHARE, which keeps anyone else's
 *		ALTER TABLE out until this transaction ends.  A table that does
 *		not exist is left to the statement to report.
 */
static void
check_table(DurableTable *table)
{
	Oid			relid;
	Relation	rel;
	TupleDesc	desc;
	int			n = 0;

	relid = RangeVarGetRelid(makeRangeVar(unconstify(char *, table->schema),
										  unconstify(char *, table->name), -1),
							 AccessShareLock, true);
	if (!OidIsValid(relid))
		return;
	rel = relation_open(relid, NoLock);
	desc = RelationGetDescr(rel);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (attr->attisdropped)
			continue;
		if (n >= table->ncolumns ||
			strcmp(NameStr(attr->attname), table->columns[n].name) != 0 ||
			strcmp(format_type_extended(attr->atttypid, -1,
										FORMAT_TYPE_FORCE_QUALIFY),
				   table->columns[n].type) != 0)
			report_table(table, n + 1, attr);
		n++;
	}
	if (n < table->ncolumns)
		report_table(table, n + 1, NULL);
	relation_close(rel, NoLock);

	if (table->relid == InvalidOid)
	{
		if (nchecked_tables >= CHECKED_TABLES_MAX)
			elog(ERROR, "too many tables to check");
		checked_tables[nchecked_tables++] = table;
	}
	table->relid = relid;
	table->checked = true;
}

/*
 * DurableCheckTables
 *		Check the tables whose rows a statement restates column by column
 *		against what the statement's module declares of them, unless they
 *		were checked since they last changed: a table that does not match
 *		is an ERROR naming it and its first column that differs, before the
 *		statement writes anything (or, called after it, before its
 *		transaction commits).  Once per backend and table, and again after
 *		the table changes (forget_version_check).
 */
void
DurableCheckTables(DurableStatement *stmt)
{
	for (int i = 0; i < DURABLE_MAX_TABLES && stmt->tables[i] != NULL; i++)
	{
		if (stmt->tables[i]->checked)
			continue;
		register_callback();
		check_table(stmt->tables[i]);
	}
}
