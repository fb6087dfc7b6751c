/*-------------------------------------------------------------------------
 *
 * relocate.c
 *	  A row moved from one table to another through the table and index
 *	  access methods: deleted by its primary key, as DELETE deletes it,
 *	  and inserted, as changed, into the other table, routed to its
 *	  partition: a task finished into history without a statement; and a
 *	  row inserted on its own so, as a task's event.
 *
 * The statement that does this (a DELETE ... RETURNING feeding an INSERT)
 * starts two ModifyTable nodes, a CTE scan and their projections on every
 * call, a third of a commit.  Here the delete is what ExecDelete does for
 * a row found by an index: table_tuple_delete waits for a transaction that
 * holds the row, and a row updated meanwhile is locked in its last version
 * and tested again (EvalPlanQual) under READ COMMITTED, a serialization
 * failure under a snapshot of the transaction's own.  The insert is the
 * apply worker's: ExecFindPartition, the partition's row type, and
 * ExecSimpleRelationInsert, which checks constraints and the partition's
 * bound and maintains the indexes.
 *
 * Both tables name the same columns, by name: what a column of one holds
 * goes to the column of that name in the other.  A table with triggers,
 * rules or row security is left to the caller's statement, but for the
 * checks of the first one's foreign keys, which a delete does not run
 * (DurableDirectModifiable).  On Citus a relocation runs in the shards of
 * the row's partition when they are here (DurableDirectInShards).
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "executor/execPartition.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/*
 * delete_row
 *		Delete the row in slot, which test passed, as ExecDelete would:
 *		waiting for a transaction that holds it, and testing its last
 *		version again when it was updated meanwhile.  Returns false when
 *		there is nothing to delete: the row is gone, or its last version
 *		does not pass.  slot holds the version deleted.
 */
static bool
delete_row(Relation rel, const DurableDirectTable *table, const DurableIndexKeys *keys,
		   const Datum *key_values, Snapshot snapshot, TupleTableSlot *slot,
		   DurableRowTest test, void *arg, Datum *values, bool *isnull)
{
	CommandId	cid = GetCurrentCommandId(true);

	for (;;)
	{
		TM_FailureData tmfd;
		TM_Result	result;

		result = table_tuple_delete(rel, &slot->tts_tid, cid, snapshot,
									InvalidSnapshot, true, &tmfd, false);
		switch (result)
		{
			case TM_Ok:
				return true;
			case TM_SelfModified:
				/* by this command: only a trigger could have, and there is none */
				if (tmfd.cmax != cid)
					elog(ERROR, "row of %s.%s to be deleted was modified by the deleting command",
						 table->schema, table->name);
				return false;
			case TM_Updated:
				DurableDirectChangedSince("concurrent update");
				result = table_tuple_lock(rel, &slot->tts_tid, snapshot, slot, cid,
										  LockTupleExclusive, LockWaitBlock,
										  TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
				if (result == TM_Deleted)
					return false;
				if (result != TM_Ok)
					elog(ERROR, "unexpected table_tuple_lock status: %u", result);
				/* its last version, locked: delete it if it still passes */
				DurableDirectGetColumns(table, slot, values, isnull);
				if (!DurableIndexKeysMatch(keys, key_values, slot) ||
					!test(values, isnull, arg))
					return false;
				continue;
			case TM_Deleted:
				DurableDirectChangedSince("concurrent delete");
				return false;
			default:
				elog(ERROR, "unrecognized table_tuple_delete status: %u", result);
		}
	}
}

/*
 * insert_row
 *		Insert into rel the columns of table in values and isnull, the
 *		others NULL, routed to rel's partition when it has partitions.
 */
static void
insert_row(Relation rel, const DurableDirectTable *table, const Datum *values,
		   const bool *isnull)
{
	TupleDesc	desc = RelationGetDescr(rel);
	ResultRelInfo *rri;
	EState	   *estate = DurableDirectEState(rel, ACL_INSERT,
											 DurableDirectColumnSet(table, 0), NULL, &rri);
	MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
	TupleTableSlot *slot = ExecInitExtraTupleSlot(estate, desc, &TTSOpsVirtual);

	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, desc->natts * sizeof(bool));
	for (int i = 0; i < table->ncolumns; i++)
	{
		slot->tts_values[table->attnums[i] - 1] = values[i];
		slot->tts_isnull[table->attnums[i] - 1] = isnull[i];
	}
	ExecStoreVirtualTuple(slot);

	AfterTriggerBeginQuery();
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
	{
		ModifyTableState *mtstate = makeNode(ModifyTableState);
		PartitionTupleRouting *proute;
		ResultRelInfo *part;
		TupleConversionMap *map;

		/* as the apply worker routes a row (apply_handle_tuple_routing) */
		mtstate->ps.plan = NULL;
		mtstate->ps.state = estate;
		mtstate->operation = CMD_INSERT;
		mtstate->resultRelInfo = rri;
		proute = ExecSetupPartitionTupleRouting(estate, rel);
		part = ExecFindPartition(mtstate, rri, proute, slot, estate);
		map = DURABLE_ROOT_TO_CHILD_MAP(part, estate);
		if (map != NULL)
			slot = execute_attr_map_slot(map->attrMap, slot,
										 table_slot_create(part->ri_RelationDesc,
														   &estate->es_tupleTable));
		ExecSimpleRelationInsert(part, estate, slot);
		ExecCleanupTupleRouting(mtstate, proute);
	}
	else
	{
		ExecOpenIndices(rri, false);
		ExecSimpleRelationInsert(rri, estate, slot);
		ExecCloseIndices(rri);
	}
	AfterTriggerEndQuery(estate);

	MemoryContextSwitchTo(old);
	ExecResetTupleTable(estate->es_tupleTable, false);
	ExecCloseRangeTableRelations(estate);
	FreeExecutorState(estate);
}

/*
 * DurableInsertRow
 *		Insert into rel, which the caller opened for table and found
 *		writable (DurableDirectWritable) and may insert into, the columns
 *		of table in values and isnull, the others NULL, routed to its
 *		partition; under a snapshot of its own and with the command counter
 *		advanced after, as a statement of its own would.
 */
void
DurableInsertRow(Relation rel, const DurableDirectTable *table, const Datum *values,
				 const bool *isnull)
{
	DurableDirectSnapshot();
	insert_row(rel, table, values, isnull);
	PopActiveSnapshot();
	CommandCounterIncrement();
}

/*
 * DurableRelocationInPartition
 *		The relocation to use for a row of partition: move itself on one
 *		server; on Citus, its copy for the partition's shards here, or NULL
 *		when the caller's statement must move the row (DurableDirectInShards).
 */
DurableRelocation *
DurableRelocationInPartition(DurableRelocation *move, int32 partition)
{
	static const size_t tables[] = {offsetof(DurableRelocation, from),
	offsetof(DurableRelocation, to)};

	if (!DurableDistributed())
		return move;
	return DurableDirectInShards(move, sizeof(*move), partition, tables,
								 lengthof(tables), 0);
}

/*
 * DurableRelocate
 *		Move the row of move->from whose primary key starts with keys, if
 *		test passes on its columns, to move->to, changed by change: the
 *		columns of the row as moved into values and isnull, copied into the
 *		current memory context.  Runs under a snapshot of its own, as a
 *		statement would (DurableDirectSnapshot), and advances the command
 *		counter after.  DURABLE_DIRECT_BY_STATEMENT when a table must be
 *		written by a statement.
 */
DurableDirectResult
DurableRelocate(DurableRelocation *move, const Datum *keys, DurableRowTest test,
				DurableRowChange change, void *arg, Datum *values, bool *isnull)
{
	DurableDirectTable *table = &move->from;
	Relation	from;
	Relation	to;
	Relation	index;
	bool		from_resolved;
	bool		to_resolved;
	IndexScanDesc scan;
	ScanKeyData skeys[DURABLE_MAX_DIRECT_KEYS];
	TupleTableSlot *slot;
	bool		moved = false;

	from = DurableDirectOpen(table, RowExclusiveLock, &from_resolved);
	if (from_resolved)
		DurableIndexFind(&move->keys, table, from, NULL);
	to = DurableDirectOpen(&move->to, RowExclusiveLock, &to_resolved);
	if (from_resolved || to_resolved)
		for (int i = 0; i < move->to.ncolumns; i++)
			if (move->to.atttypids[i] != table->atttypids[i])
				ereport(ERROR,
						errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("tables \"%s.%s\" and \"%s.%s\" do not have the columns durable's library expects",
							   table->schema, table->name, move->to.schema, move->to.name),
						errdetail("Column \"%s\" is of type %s in one and %s in the other.",
								  table->columns[i].name,
								  format_type_be(table->atttypids[i]),
								  format_type_be(move->to.atttypids[i])));
	if (!DurableDirectModifiable(from) || !DurableDirectWritable(to))
	{
		table_close(to, NoLock);
		table_close(from, NoLock);
		return DURABLE_DIRECT_BY_STATEMENT;
	}
	DurableDirectCheckPrivileges(from, ACL_SELECT | ACL_DELETE);
	DurableDirectCheckPrivileges(to, ACL_INSERT);

	DurableDirectSnapshot();
	index = DurableIndexOpen(table, &move->keys, NULL, from, RowExclusiveLock);
	DurableIndexScanKeys(&move->keys, keys, skeys);
	scan = DURABLE_INDEX_BEGINSCAN(from, index, GetActiveSnapshot(), move->keys.nkeys, 0);
	index_rescan(scan, skeys, move->keys.nkeys, NULL, 0);
	slot = table_slot_create(from, NULL);
	if (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		DurableDirectGetColumns(table, slot, values, isnull);
		moved = test(values, isnull, arg) &&
			delete_row(from, table, &move->keys, keys, GetActiveSnapshot(), slot,
					   test, arg, values, isnull);
	}
	if (moved)
	{
		change(values, isnull, arg);
		insert_row(to, &move->to, values, isnull);
		if (DurableDistributed())
			DurableLocalShardWrote();
		for (int i = 0; i < table->ncolumns; i++)
			if (!isnull[i])
				values[i] = datumCopy(values[i], table->attbyvals[i], table->attlens[i]);
	}
	ExecDropSingleTupleTableSlot(slot);
	index_endscan(scan);
	index_close(index, NoLock);
	table_close(to, NoLock);
	table_close(from, NoLock);
	PopActiveSnapshot();
	CommandCounterIncrement();
	return moved ? DURABLE_DIRECT_DONE : DURABLE_DIRECT_NONE;
}
