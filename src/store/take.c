/*-------------------------------------------------------------------------
 *
 * take.c
 *	  The first row of an index that a test passes, locked as SELECT ...
 *	  ORDER BY <the index's order> LIMIT 1 FOR UPDATE SKIP LOCKED locks it,
 *	  and updated, through the table and index access methods: a claim of
 *	  one task without a statement.
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
 * skipped; one updated since the snapshot is locked in its last version
 * and tested again (as EvalPlanQual tests it), under READ COMMITTED; a
 * transaction of a snapshot of its own gets the serialization failure its
 * statement would.  A table with triggers, rules or row security is left
 * to the caller's statement, whose executor runs them, and so is one
 * without the index.
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_relation.h"
#include "utils/acl.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/*
 * The table's index named by take, and its scan keys; InvalidOid when the
 * table has no such index (an installation that dropped it is left to
 * the statement, which can do without).
 */
static void
resolve_index(DurableTake *take, Relation rel)
{
	Oid			index = get_relname_relid(take->index, RelationGetNamespace(rel));

	if (!OidIsValid(index) || !list_member_oid(RelationGetIndexList(rel), index))
	{
		take->keys.index = InvalidOid;
		return;
	}
	DurableIndexKeysResolve(&take->keys, &take->table, index);
}

/* whether the row in slot has the index's leading columns keys */
static bool
same_keys(const DurableIndexKeys *keys, const Datum *values, TupleTableSlot *slot)
{
	for (int k = 0; k < keys->nkeys; k++)
	{
		bool		isnull;
		Datum		value = slot_getattr(slot, keys->attnums[k], &isnull);

		if (isnull ||
			!DatumGetBool(OidFunctionCall2Coll(keys->equality[k], keys->collation[k],
											   value, values[k])))
			return false;
	}
	return true;
}

/* the columns of take from the row in slot */
static void
get_columns(const DurableDirectTable *table, TupleTableSlot *slot,
			Datum *values, bool *isnull)
{
	for (int i = 0; i < table->ncolumns; i++)
		values[i] = slot_getattr(slot, table->attnums[i], &isnull[i]);
}

/*
 * lock_row
 *		Lock the row in slot as FOR UPDATE SKIP LOCKED would, leaving its
 *		version locked in locked.  Returns false for a row to skip: held by
 *		another transaction, deleted, or updated by this one's command.
 */
static bool
lock_row(Relation rel, EState *estate, TupleTableSlot *slot,
		 TupleTableSlot *locked, bool *traversed)
{
	TM_FailureData tmfd;
	TM_Result	result;
	uint8		flags = 0;

	if (!IsolationUsesXactSnapshot())
		flags |= TUPLE_LOCK_FLAG_FIND_LAST_VERSION;
	result = table_tuple_lock(rel, &slot->tts_tid, estate->es_snapshot, locked,
							  estate->es_output_cid, LockTupleExclusive,
							  LockWaitSkip, flags, &tmfd);
	*traversed = tmfd.traversed && result == TM_Ok;
	switch (result)
	{
		case TM_Ok:
			return true;
		case TM_WouldBlock:
		case TM_SelfModified:
			return false;
		case TM_Updated:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						errmsg("could not serialize access due to concurrent update"));
			elog(ERROR, "unexpected table_tuple_lock status: %u", result);
			break;
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						errmsg("could not serialize access due to concurrent update"));
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

/*
 * make_estate
 *		An executor state for updating rel as the statement's one result
 *		relation, its indexes open, the columns take writes marked updated
 *		(for the hint ExecInsertIndexTuples gives an index whose columns
 *		did not change).
 */
static EState *
make_estate(const DurableTake *take, Relation rel, ResultRelInfo **rri)
{
	EState	   *estate = CreateExecutorState();
	MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	Bitmapset  *updated = NULL;

	for (int i = take->nread; i < take->table.ncolumns; i++)
		updated = bms_add_member(updated, take->table.attnums[i] -
								 FirstLowInvalidHeapAttributeNumber);
	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	DURABLE_INIT_UPDATE_RANGE_TABLE(estate, rte, updated);
	estate->es_snapshot = GetActiveSnapshot();
	estate->es_output_cid = GetCurrentCommandId(true);

	*rri = makeNode(ResultRelInfo);
	InitResultRelInfo(*rri, rel, 1, NULL, 0);
	ExecOpenIndices(*rri, false);
	MemoryContextSwitchTo(old);
	return estate;
}

/*
 * DurableTakeFirst
 *		Take the first row of take's index whose leading columns are keys
 *		and that test passes (given take's columns, in its order), skipping
 *		rows other transactions hold, and update it by change (given the
 *		same columns, to change those after take->nread).  values and
 *		isnull receive the row's columns as updated, copied into the
 *		current memory context.  Runs under a snapshot of its own, as a
 *		statement would (DurableDirectSnapshot), and advances the command
 *		counter after, as SPI does after a statement that writes.
 */
DurableTakeResult
DurableTakeFirst(DurableTake *take, const Datum *keys, DurableTakeTest test,
				 DurableTakeChange change, void *arg, Datum *values, bool *isnull)
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
		resolve_index(take, rel);
	if (!OidIsValid(take->keys.index) ||
		rel->trigdesc != NULL || rel->rd_rules != NULL || rel->rd_rel->relrowsecurity)
	{
		table_close(rel, NoLock);
		return DURABLE_TAKE_BY_STATEMENT;
	}
	/* the privileges a statement's executor would check */
	if (pg_class_aclmask(RelationGetRelid(rel), GetUserId(), ACL_SELECT | ACL_UPDATE,
						 ACLMASK_ALL) != (ACL_SELECT | ACL_UPDATE))
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, RelationGetRelationName(rel));

	DurableDirectSnapshot();
	index = index_open(take->keys.index, RowExclusiveLock);
	if (!table->resolved)
	{
		/* as in DurableReadByKey: the index may have been swapped */
		index_close(index, NoLock);
		DurableDirectResolve(table, rel);
		resolve_index(take, rel);
		if (!OidIsValid(take->keys.index))
		{
			table_close(rel, NoLock);
			PopActiveSnapshot();
			return DURABLE_TAKE_BY_STATEMENT;
		}
		index = index_open(take->keys.index, RowExclusiveLock);
	}

	estate = make_estate(take, rel, &rri);
	MemoryContextSwitchTo(estate->es_query_cxt);
	slot = table_slot_create(rel, &estate->es_tupleTable);
	locked = table_slot_create(rel, &estate->es_tupleTable);
	DurableIndexScanKeys(&take->keys, keys, skeys);
	scan = DURABLE_INDEX_BEGINSCAN(rel, index, estate->es_snapshot, take->keys.nkeys, 0);
	index_rescan(scan, skeys, take->keys.nkeys, NULL, 0);

	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		bool		traversed;

		CHECK_FOR_INTERRUPTS();
		get_columns(table, slot, values, isnull);
		if (!test(values, isnull, arg))
			continue;
		if (!lock_row(rel, estate, slot, locked, &traversed))
			continue;
		if (traversed)
		{
			/* updated since the snapshot: its last version must pass too */
			get_columns(table, locked, values, isnull);
			if (!same_keys(&take->keys, keys, locked) || !test(values, isnull, arg))
				continue;
		}
		taken = true;
		break;
	}

	if (taken)
	{
		TupleDesc	desc = RelationGetDescr(rel);
		TupleTableSlot *updated = ExecInitExtraTupleSlot(estate, desc, &TTSOpsVirtual);

		slot_getallattrs(locked);
		ExecClearTuple(updated);
		memcpy(updated->tts_values, locked->tts_values, desc->natts * sizeof(Datum));
		memcpy(updated->tts_isnull, locked->tts_isnull, desc->natts * sizeof(bool));
		get_columns(table, locked, values, isnull);
		change(values, isnull, arg);
		for (int i = take->nread; i < table->ncolumns; i++)
		{
			updated->tts_values[table->attnums[i] - 1] = values[i];
			updated->tts_isnull[table->attnums[i] - 1] = isnull[i];
		}
		ExecStoreVirtualTuple(updated);
		ExecSimpleRelationUpdate(rri, estate, NULL, locked, updated);

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
	return taken ? DURABLE_TAKE_TAKEN : DURABLE_TAKE_NONE;
}
