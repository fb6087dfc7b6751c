/*-------------------------------------------------------------------------
 *
 * schema_locks.c
 *	  Every table of durable's schema share-locked at once, without waiting.
 *
 * On Citus a DROP EXTENSION or an update reaches a node in an order of
 * Citus's: the shards of each table dropped one after another before the
 * extension is, the tables an update script takes one after another, each
 * in the node's part of a distributed transaction.  A reconciler's tick
 * there, a transaction local to the node, that holds one of durable's
 * tables and waits for another that such a statement holds forms a cycle
 * with it, and Citus's deadlock detector breaks every such cycle by
 * cancelling the statement (it cancels distributed transactions only),
 * however short the tick's wait.  So a tick on Citus first takes every
 * table of the schema (shells, shards and partitions all live there) in
 * ACCESS SHARE mode, none of them waiting: when one is not to be had,
 * something that changes durable's tables is under way and the tick is
 * skipped; when all are, the tick holds them to its end and such a
 * statement waits for the tick, never the other way round.
 *
 * A shard of durable's tables that this node holds no placement of is no
 * table of the tick's: one a move left behind for Citus to drop, which a
 * move back drops first, without waiting for it.  It is left alone.
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

/*
 * On Citus: the shards placed on other nodes only, of every distributed
 * table; those of durable's are picked out by their table's schema here.
 * A read of pg_class would not do: Citus hides shards from it by a test of
 * every row, which took a worker's tick longer than the rest of it.
 */
enum
{
	ELSEWHERE_TABLE,
	ELSEWHERE_SHARD,
	ELSEWHERE_NCOLUMNS
};
static const DurableColumn elsewhere_columns[ELSEWHERE_NCOLUMNS] = {
	[ELSEWHERE_TABLE] = {"logicalrelid", REGCLASSOID},
	[ELSEWHERE_SHARD] = {"shardid", INT8OID},
};
static DurableStatement shards_elsewhere = {
	.name = "shards_elsewhere",
	.sql = "SELECT s.logicalrelid, s.shardid FROM pg_catalog.pg_dist_shard s"
	" WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_dist_placement pl"
	"  WHERE pl.shardid = s.shardid"
	"  AND pl.groupid = (SELECT groupid FROM pg_catalog.pg_dist_local_group))",
	.nargs = 0,
	DURABLE_COLUMNS(elsewhere_columns),
};

static int
compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * DurableTryLockSchemaTables
 *		Take every table and partitioned table of durable's schema in ACCESS
 *		SHARE mode, held to the end of the transaction, without waiting for
 *		any, but the shards placed on other nodes only (shards_elsewhere; SPI
 *		connected).  Returns false as soon as one is held in a mode that
 *		conflicts (those taken before stay taken until the transaction
 *		ends).
 */
bool
DurableTryLockSchemaTables(void)
{
	Oid			schema = get_namespace_oid(DURABLE_SCHEMA, true);
	List	   *tables = NIL;
	Relation	pg_class;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	ListCell   *lc;
	bool		taken = true;
	DurableResult elsewhere;
	char	  **skipped;
	int			nskipped = 0;

	if (!OidIsValid(schema))
		return true;
	elsewhere = DurableRun(&shards_elsewhere, NULL, NULL, SPI_OK_SELECT, 0);
	skipped = palloc(sizeof(char *) * Max(elsewhere.rows, 1));
	for (uint64 i = 0; i < elsewhere.rows; i++)
	{
		bool		isnull;
		Oid			table = DatumGetObjectId(DurableGetDatum(elsewhere, i,
															 ELSEWHERE_TABLE,
															 &isnull));
		char	   *name = get_rel_name(table);

		if (name != NULL && get_rel_namespace(table) == schema)
			skipped[nskipped++] = psprintf("%s_" INT64_FORMAT, name,
										   DurableGetInt64(elsewhere, i,
														   ELSEWHERE_SHARD));
	}
	qsort(skipped, nskipped, sizeof(char *), compare_names);

	/* the tables first, locked after the scan (a lock reads invalidations) */
	ScanKeyInit(&key, Anum_pg_class_relnamespace, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(schema));
	pg_class = table_open(RelationRelationId, AccessShareLock);
	scan = systable_beginscan(pg_class, InvalidOid, false, NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tuple);
		const char *name = NameStr(form->relname);

		if ((form->relkind == RELKIND_RELATION ||
			 form->relkind == RELKIND_PARTITIONED_TABLE) &&
			bsearch(&name, skipped, nskipped, sizeof(char *),
					compare_names) == NULL)
			tables = lappend_oid(tables, form->oid);
	}
	systable_endscan(scan);
	table_close(pg_class, AccessShareLock);

	foreach(lc, tables)
	{
		if (!ConditionalLockRelationOid(lfirst_oid(lc), AccessShareLock))
		{
			taken = false;
			break;
		}
	}
	list_free(tables);
	pfree(skipped);
	return taken;
}
