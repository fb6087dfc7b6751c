/*-------------------------------------------------------------------------
 *
 * keyread.c
 *	  A row read by its primary key through the table and index access
 *	  methods (direct.c): one probe of the index and one fetch.
 *
 * A claim reads its queue's settings this way, and a finish whether the
 * task has steps to move.  A read names its table, how many of its
 * primary key's columns it gives, and the columns read.
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "utils/datum.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* a key read's table and primary key */
static void
resolve_key_read(DurableKeyRead *read, Relation rel)
{
	DurablePrimaryKeyResolve(&read->keys, &read->table, rel);
}

/*
 * DurableReadByKey
 *		Read the row of read's table whose primary key starts with keys
 *		(read->keys.nkeys values, in the key's order): its columns into
 *		values and isnull (in read's order, copied into the current memory
 *		context), from the first such row when the key has more columns.
 *		Returns false when there is no such row.
 */
bool
DurableReadByKey(DurableKeyRead *read, const Datum *keys, Datum *values,
				 bool *isnull)
{
	DurableDirectTable *table = &read->table;
	bool		resolved;
	Relation	rel;
	Relation	index;
	IndexScanDesc scan;
	ScanKeyData skeys[DURABLE_MAX_DIRECT_KEYS];
	TupleTableSlot *slot;
	bool		found;

	rel = DurableDirectOpen(table, AccessShareLock, &resolved);
	if (resolved)
		resolve_key_read(read, rel);
	DurableDirectSnapshot();

	index = index_open(read->keys.index, AccessShareLock);
	if (!table->resolved)
	{
		/*
		 * Locking the index took invalidations that changed the table: its
		 * primary key may have another index now (REINDEX CONCURRENTLY
		 * swaps them under this table's lock).
		 */
		index_close(index, NoLock);
		DurableDirectResolve(table, rel);
		resolve_key_read(read, rel);
		index = index_open(read->keys.index, AccessShareLock);
	}
	DurableIndexScanKeys(&read->keys, keys, skeys);
	scan = DURABLE_INDEX_BEGINSCAN(rel, index, GetActiveSnapshot(), read->keys.nkeys, 0);
	index_rescan(scan, skeys, read->keys.nkeys, NULL, 0);
	slot = table_slot_create(rel, NULL);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found)
	{
		for (int i = 0; i < table->ncolumns; i++)
		{
			Datum		value = slot_getattr(slot, table->attnums[i], &isnull[i]);

			values[i] = isnull[i] ? (Datum) 0 :
				datumCopy(value, table->attbyvals[i], table->attlens[i]);
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	index_endscan(scan);
	index_close(index, NoLock);
	table_close(rel, NoLock);
	PopActiveSnapshot();
	return found;
}
