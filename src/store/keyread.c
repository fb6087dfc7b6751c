/*-------------------------------------------------------------------------
 *
 * keyread.c
 *	  A row read by its primary key through the table and index access
 *	  methods (direct.c): one probe of the index and one fetch.
 *
 * A claim reads its queue's settings this way, and a finish whether the
 * task has steps to move; on Citus in the shards on the calling node
 * (DurableDirectInShards).  A read names its table, how many of its
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

/*
 * DurableKeyReadInPartition
 *		The read to use for a row of partition: read itself on one server;
 *		on Citus, its copy for the partition's shard here, or NULL when the
 *		caller's statement must read (DurableDirectInShards).
 */
DurableKeyRead *
DurableKeyReadInPartition(DurableKeyRead *read, int32 partition)
{
	static const size_t tables[] = {offsetof(DurableKeyRead, table)};

	if (!DurableDistributed())
		return read;
	return DurableDirectInShards(read, sizeof(*read), partition, tables,
								 lengthof(tables), 0);
}

/*
 * DurableKeyReadInReference
 *		The same for a read of a reference table (DurableDirectInReference).
 */
DurableKeyRead *
DurableKeyReadInReference(DurableKeyRead *read)
{
	static const size_t tables[] = {offsetof(DurableKeyRead, table)};

	if (!DurableDistributed())
		return read;
	return DurableDirectInReference(read, sizeof(*read), tables, lengthof(tables));
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
		DurableIndexFind(&read->keys, table, rel, NULL);
	DurableDirectSnapshot();
	index = DurableIndexOpen(table, &read->keys, NULL, rel, AccessShareLock);
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
