/*-------------------------------------------------------------------------
 *
 * take.c
 *	  The first row of an index that a test passes, locked as SELECT ...
 *	  ORDER BY <the index's order> LIMIT 1 FOR UPDATE SKIP LOCKED locks it,
 *	  and updated, through the table and index access methods: a claim of
 *	  one task without a statement, and a task's move or heartbeat, the
 *	  row taken by its key.
 *
 * A statement that does this is planned once, but every call still starts
 * and ends an executor for its plan (expressions, projections, the
 * locking subquery), which took more time than the update itself.  Here
 * the work is what logical replication's apply worker does for a row:
 * an index scan under the statement's snapshot, table_tuple_lock without
 * waiting, and ExecSimpleRelationUpdate, which checks the table's
 * constraints and maintains its indexes.
 *
 * The lock follows ExecLockRows: a row another transaction holds is
 * skipped (or waited for, by a take that names the row by its primary key:
 * an UPDATE of one row); one updated since the snapshot is locked in its
 * last version and tested again (as EvalPlanQual tests it), under READ
 * COMMITTED; a transaction of a snapshot of its own gets the serialization
 * failure its statement would.  A table with triggers, rules or row
 * security is left to the caller's statement, whose executor runs them
 * (but for a foreign key's, run here as an UPDATE runs them:
 * DurableDirectModifiable), and so is one without the index.
 *
 * On Citus a take runs in the partition's shard when it is on this node, as
 * a statement of the partition would (DurableDirectInShards).
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/datum.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/*
 * DurableTakeInPartition
 *		The take to use for a row of partition: take itself on one server;
 *		on Citus, its copy for the partition's shard here, or NULL when the
 *		caller's statement must take the row (DurableDirectInShards).
 */
DurableTake *
DurableTakeInPartition(DurableTake *take, int32 partition)
{
	static const size_t tables[] = {offsetof(DurableTake, table)};

	if (!DurableDistributed())
		return take;
	return DurableDirectInShards(take, sizeof(*take), partition, tables,
								 lengthof(tables), offsetof(DurableTake, index));
}

/*
 * lock_row
 *		Lock the row in slot in take's mode, as FOR UPDATE (SKIP LOCKED)
 *		would, or as UPDATE locks the row it updates, leaving its version
 *		locked in locked.  Returns false for a row to skip: held by another
 *		transaction when take does not wait, deleted, or updated by this
 *		one's command.
 */
static bool
lock_row(const DurableTake *take, Relation rel, EState *estate, TupleTableSlot *slot,
		 TupleTableSlot *locked, bool *traversed)
{
	TM_FailureData tmfd;
	TM_Result	result;
	uint8		flags = 0;

	if (!IsolationUsesXactSnapshot())
		flags |= TUPLE_LOCK_FLAG_FIND_LAST_VERSION;
	result = table_tuple_lock(rel, &slot->tts_tid, estate->es_snapshot, locked,
							  estate->es_output_cid, take->lockmode,
							  take->wait, flags, &tmfd);
	*traversed = tmfd.traversed && result == TM_Ok;
	switch (result)
	{
		case TM_Ok:
			return true;
		case TM_WouldBlock:
		case TM_SelfModified:
			return false;
		case TM_Updated:
			DurableDirectChangedSince("concurrent update");
			elog(ERROR, "unexpected table_tuple_lock status: %u", result);
			break;
		case TM_Deleted:
			/* ExecLockRows says "update" for a row deleted too */
			DurableDirectChangedSince("concurrent update");
			return false;
		case TM_Invisible:
			elog(ERROR, "attempted to lock invisible tuple");
			break;
		default:
			elog(ERROR, "unrecognized table_tuple_lock status: %u", result);
			break;
	}
	return false;
}

static DurableDirectResult take_first(DurableTake *take, const Datum *keys,
									  DurableRowTest test, void *test_arg,
									  DurableRowDecision decide, void *decide_arg,
									  Datum *values, bool *isnull);

/* DurableTakeFirst's change, as a decision that always changes the row */
typedef struct Changing
{
	DurableRowChange change;
	void	   *arg;
} Changing;

static bool
always_change(Datum *values, bool *isnull, void *arg)
{
	Changing   *changing = arg;

	if (changing->change == NULL)
		return false;
	changing->change(values, isnull, changing->arg);
	return true;
}

/*
 * DurableTakeFirst
 *		Take the first row of take's index whose leading columns are keys
 *		and that test passes (given take's columns, in its order), skipping
 *		rows other transactions hold, and update it by change (given the
 *		same columns, to change those after take->nread), or with no change
 *		(NULL) only lock it, as SELECT ... FOR UPDATE does.  values and
 *		isnull receive the row's columns as updated, copied into the
 *		current memory context.  Runs under a snapshot of its own, as a
 *		statement would (DurableDirectSnapshot), and advances the command
 *		counter after, as SPI does after a statement that writes.
 */
DurableDirectResult
DurableTakeFirst(DurableTake *take, const Datum *keys, DurableRowTest test,
				 DurableRowChange change, void *arg, Datum *values, bool *isnull)
{
	Changing	changing = {change, arg};

	return take_first(take, keys, test, arg, always_change, &changing, values, isnull);
}

/*
 * DurableTakeFirstDeciding
 *		The same, with a change that decides, the row locked, whether to
 *		change it (true) or leave it as it was, still locked (false).  The
 *		decision may read and write other tables (through the access
 *		methods or SPI, under snapshots of their own): the row's change
 *		then comes after theirs in the transaction.
 */
DurableDirectResult
DurableTakeFirstDeciding(DurableTake *take, const Datum *keys, DurableRowTest test,
						 DurableRowDecision decide, void *arg, Datum *values,
						 bool *isnull)
{
	return take_first(take, keys, test, arg, decide, arg, values, isnull);
}

/* both, with an argument each for the test and the decision */
static DurableDirectResult
take_first(DurableTake *take, const Datum *keys, DurableRowTest test, void *test_arg,
		   DurableRowDecision decide, void *decide_arg, Datum *values, bool *isnull)
{
	DurableDirectTable *table = &take->table;
	MemoryContext caller = CurrentMemoryContext;
	Relation	rel;
	Relation	index;
	bool		resolved;
	EState	   *estate;
	ResultRelInfo *rri;
	IndexScanDesc scan;
	ScanKeyData skeys[DURABLE_MAX_DIRECT_KEYS];
	TupleTableSlot *slot;
	TupleTableSlot *locked;
	bool		taken = false;

	rel = DurableDirectOpen(table, RowExclusiveLock, &resolved);
	if (resolved)
		DurableIndexFind(&take->keys, table, rel, take->index);
	if (!OidIsValid(take->keys.index) || !DurableDirectModifiable(rel))
	{
		table_close(rel, NoLock);
		return DURABLE_DIRECT_BY_STATEMENT;
	}
	DurableDirectCheckPrivileges(rel, ACL_SELECT | ACL_UPDATE);

	DurableDirectSnapshot();
	index = DurableIndexOpen(table, &take->keys, take->index, rel, RowExclusiveLock);
	if (index == NULL)
	{
		table_close(rel, NoLock);
		PopActiveSnapshot();
		return DURABLE_DIRECT_BY_STATEMENT;
	}

	estate = DurableDirectEState(rel, ACL_SELECT | ACL_UPDATE, NULL,
								 DurableDirectColumnSet(table, take->nread), &rri);
	MemoryContextSwitchTo(estate->es_query_cxt);
	ExecOpenIndices(rri, false);
	slot = table_slot_create(rel, &estate->es_tupleTable);
	locked = table_slot_create(rel, &estate->es_tupleTable);
	DurableIndexScanKeys(&take->keys, keys, skeys);
	scan = DURABLE_INDEX_BEGINSCAN(rel, index, estate->es_snapshot, take->keys.nkeys, 0);
	index_rescan(scan, skeys, take->keys.nkeys, NULL, 0);

	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		bool		traversed;

		CHECK_FOR_INTERRUPTS();
		DurableDirectGetColumns(table, slot, values, isnull);
		if (!test(values, isnull, test_arg))
			continue;
		if (!lock_row(take, rel, estate, slot, locked, &traversed))
			continue;
		if (traversed)
		{
			/* updated since the snapshot: its last version must pass too */
			DurableDirectGetColumns(table, locked, values, isnull);
			if (!DurableIndexKeysMatch(&take->keys, keys, locked) || !test(values, isnull, test_arg))
				continue;
		}
		taken = true;
		break;
	}

	if (taken)
	{
		DurableDirectGetColumns(table, locked, values, isnull);
		if (decide(values, isnull, decide_arg))
		{
			TupleDesc	desc = RelationGetDescr(rel);
			TupleTableSlot *updated = ExecInitExtraTupleSlot(estate, desc, &TTSOpsVirtual);

			slot_getallattrs(locked);
			ExecClearTuple(updated);
			memcpy(updated->tts_values, locked->tts_values, desc->natts * sizeof(Datum));
			memcpy(updated->tts_isnull, locked->tts_isnull, desc->natts * sizeof(bool));
			for (int i = take->nread; i < table->ncolumns; i++)
			{
				updated->tts_values[table->attnums[i] - 1] = values[i];
				updated->tts_isnull[table->attnums[i] - 1] = isnull[i];
			}
			ExecStoreVirtualTuple(updated);
			if (rel->trigdesc != NULL)
				AfterTriggerBeginQuery();
			ExecSimpleRelationUpdate(rri, estate, NULL, locked, updated);
			if (rel->trigdesc != NULL)
				AfterTriggerEndQuery(estate);
			if (DurableDistributed())
				DurableLocalShardWrote();
		}

		MemoryContextSwitchTo(caller);
		for (int i = 0; i < table->ncolumns; i++)
			if (!isnull[i])
				values[i] = datumCopy(values[i], table->attbyvals[i], table->attlens[i]);
	}
	MemoryContextSwitchTo(caller);

	index_endscan(scan);
	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	ExecCloseRangeTableRelations(estate);
	FreeExecutorState(estate);
	index_close(index, NoLock);
	table_close(rel, NoLock);
	PopActiveSnapshot();
	CommandCounterIncrement();
	return taken ? DURABLE_DIRECT_DONE : DURABLE_DIRECT_NONE;
}
