/*-------------------------------------------------------------------------
 *
 * direct.c
 *	  A row read by its primary key through the table and index access
 *	  methods, without SPI, the plan cache or the executor.
 *
 * A hot call's small look-up (a queue's settings, read by every claim;
 * whether a finished task has steps to move) costs several times the
 * read itself as a statement: a snapshot, the
 * revalidation of a cached plan, the executor's start-up and shutdown.
 * Here it is one probe of the primary key's index and one fetch, with what
 * SPI would have done around a statement of its own: the same lock on the
 * table, the command counter advanced and a new snapshot (the caller's
 * under DurableReadAsOfCaller).
 *
 * A read is declared as a statement is, next to the code that uses it: the
 * table, how many of its primary key's columns it gives, and the columns
 * read by name and type.  Their numbers in the
 * table are found on the first read of a backend, and again after the
 * table changes (its relcache entry is invalidated), so an installation
 * whose columns came in another order or kept dropped ones reads the same.
 *
 * On Citus the tables read this way are reference tables, whose rows are
 * in their shards, not in the coordinator's table: there a caller runs a
 * statement instead (DurableDistributed).
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* the reads resolved in this backend, to resolve again when a table changes */
#define KEY_READS_MAX 8
static DurableKeyRead *resolved_reads[KEY_READS_MAX];
static int	nresolved_reads = 0;

static void
forget_resolved_reads(Datum arg, Oid relid)
{
	for (int i = 0; i < nresolved_reads; i++)
		if (relid == InvalidOid || relid == resolved_reads[i]->relid)
			resolved_reads[i]->resolved = false;
}

/* the equality function of a primary key's column, by its type */
static RegProcedure
key_equality(const DurableKeyRead *read, Oid type)
{
	switch (type)
	{
		case TEXTOID:
			return F_TEXTEQ;
		case INT4OID:
			return F_INT4EQ;
		case INT8OID:
			return F_INT8EQ;
	}
	elog(ERROR, "the primary key of table %s.%s is of type %s, which durable does not read directly",
		 read->schema, read->table, format_type_be(type));
	pg_unreachable();
}

/*
 * resolve
 *		Find the table's primary key index and the numbers of the columns
 *		read, checking their types, under a lock on the table.
 */
static void
resolve(DurableKeyRead *read, Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Relation	index;

	Assert(read->ncolumns <= DURABLE_MAX_KEY_READ_COLUMNS);
	Assert(read->nkeys >= 1 && read->nkeys <= DURABLE_MAX_KEY_READ_KEYS);
	read->index = DURABLE_PRIMARY_KEY_INDEX(rel);
	if (!OidIsValid(read->index))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("table \"%s.%s\" has no primary key", read->schema, read->table),
				errdetail("durable's library reads its rows by the primary key."));
	index = index_open(read->index, AccessShareLock);
	if (IndexRelationGetNumberOfKeyAttributes(index) < read->nkeys)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("the primary key of table \"%s.%s\" has fewer than %d columns",
					   read->schema, read->table, read->nkeys));
	for (int k = 0; k < read->nkeys; k++)
	{
		read->key_equality[k] = key_equality(read, index->rd_opcintype[k]);
		read->key_collation[k] = index->rd_indcollation[k];
	}
	index_close(index, NoLock);

	for (int i = 0; i < read->ncolumns; i++)
	{
		const DurableColumn *column = &read->columns[i];

		read->attnums[i] = InvalidAttrNumber;
		for (int a = 0; a < desc->natts; a++)
		{
			Form_pg_attribute attr = TupleDescAttr(desc, a);

			if (attr->attisdropped || strcmp(NameStr(attr->attname), column->name) != 0)
				continue;
			if (attr->atttypid != column->type)
				ereport(ERROR,
						errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("table \"%s.%s\" does not have the columns durable's library expects",
							   read->schema, read->table),
						errdetail("Column \"%s\" is of type %s, where the library reads %s.",
								  column->name, format_type_be(attr->atttypid),
								  format_type_be(column->type)));
			read->attnums[i] = attr->attnum;
			read->attlens[i] = attr->attlen;
			read->attbyvals[i] = attr->attbyval;
		}
		if (read->attnums[i] == InvalidAttrNumber)
			ereport(ERROR,
					errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					errmsg("table \"%s.%s\" does not have the columns durable's library expects",
						   read->schema, read->table),
					errdetail("Column \"%s\" is missing.", column->name));
	}

	if (!read->registered)
	{
		static bool callback_registered = false;

		if (!callback_registered)
		{
			CacheRegisterRelcacheCallback(forget_resolved_reads, (Datum) 0);
			callback_registered = true;
		}
		if (nresolved_reads >= KEY_READS_MAX)
			elog(ERROR, "more than %d tables read by their primary key", KEY_READS_MAX);
		resolved_reads[nresolved_reads++] = read;
		read->registered = true;
	}
	read->relid = RelationGetRelid(rel);
	read->resolved = true;
}

/*
 * lock_table
 *		The table's OID, locked as a statement reading it would lock it.
 *		A table resolved before is locked by its OID, without a look-up of
 *		its name; if it changed meanwhile (the lock accepts the
 *		invalidations), it is looked up again.
 */
static Oid
lock_table(DurableKeyRead *read)
{
	if (read->resolved)
	{
		Oid			relid = read->relid;

		LockRelationOid(relid, AccessShareLock);
		if (read->resolved)
			return relid;
		UnlockRelationOid(relid, AccessShareLock);
	}
	return RangeVarGetRelid(makeRangeVar(unconstify(char *, read->schema),
										 unconstify(char *, read->table), -1),
							AccessShareLock, false);
}

/*
 * DurableReadByKey
 *		Read the row of read's table whose primary key starts with keys
 *		(read->nkeys values, in the key's order): its columns into values
 *		and isnull (in read's order, copied into the current memory
 *		context), from the first such row when the key has more columns.
 *		Returns false when there is no such row.
 */
bool
DurableReadByKey(DurableKeyRead *read, const Datum *keys, Datum *values,
				 bool *isnull)
{
	Relation	rel;
	Relation	index;
	IndexScanDesc scan;
	ScanKeyData skeys[DURABLE_MAX_KEY_READ_KEYS];
	TupleTableSlot *slot;
	Snapshot	snapshot;
	bool		found;

	rel = table_open(lock_table(read), NoLock);
	if (!read->resolved || read->relid != RelationGetRelid(rel))
		resolve(read, rel);

	/* as SPI runs a statement that is not read-only (plan.c) */
	if (!DurableReadingAsOfCaller())
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		CommandCounterIncrement();
		UpdateActiveSnapshotCommandId();
	}
	else
		PushActiveSnapshot(GetActiveSnapshot());
	snapshot = GetActiveSnapshot();

	index = index_open(read->index, AccessShareLock);
	if (!read->resolved)
	{
		/*
		 * Locking the index took invalidations that changed the table: its
		 * primary key may have another index now (REINDEX CONCURRENTLY
		 * swaps them under this table's lock).
		 */
		index_close(index, NoLock);
		resolve(read, rel);
		index = index_open(read->index, AccessShareLock);
	}
	for (int k = 0; k < read->nkeys; k++)
		ScanKeyEntryInitialize(&skeys[k], 0, k + 1, BTEqualStrategyNumber,
							   InvalidOid, read->key_collation[k],
							   read->key_equality[k], keys[k]);
	scan = DURABLE_INDEX_BEGINSCAN(rel, index, snapshot, read->nkeys, 0);
	index_rescan(scan, skeys, read->nkeys, NULL, 0);
	slot = table_slot_create(rel, NULL);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found)
	{
		for (int i = 0; i < read->ncolumns; i++)
		{
			Datum		value = slot_getattr(slot, read->attnums[i], &isnull[i]);

			values[i] = isnull[i] ? (Datum) 0 :
				datumCopy(value, read->attbyvals[i], read->attlens[i]);
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	index_endscan(scan);
	index_close(index, NoLock);
	table_close(rel, NoLock);
	PopActiveSnapshot();
	return found;
}
