/*-------------------------------------------------------------------------
 *
 * direct.c
 *	  Durable's tables used through the table and index access methods,
 *	  without SPI, the plan cache or the executor of a statement: what
 *	  keyread.c, take.c and relocate.c share.
 *
 * A hot call's statement costs several times the work on its rows: a
 * snapshot, the revalidation of a cached plan, the executor's start-up
 * and shutdown.  Used directly, a table is declared as a statement is,
 * next to the code that uses it: its name and the columns used, by name
 * and type.  Their numbers in the table are found on a backend's first
 * use, and again after the table changes (its relcache entry is
 * invalidated), so an installation whose columns came in another order
 * or kept dropped ones works the same.  Around each use is what SPI does
 * around a statement: the same lock on the table, the command counter
 * advanced and a new snapshot (the caller's under DurableReadAsOfCaller),
 * the privileges an executor checks, and for a write an executor state
 * whose result relation is the table.
 *
 * On Citus the tables are distributed or reference tables, whose rows are
 * in their shards: there a caller runs a statement instead
 * (DurableDistributed).
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_relation.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"

/*
 * The tables resolved in this backend, to resolve again when one changes:
 * one entry per use (a table and the columns one module reads of it; on
 * Citus, per shard here: DurableDirectInShards), each at an address that
 * stays.
 */
static List *resolved_tables = NIL;

static void
forget_resolved_tables(Datum arg, Oid relid)
{
	ListCell   *lc;

	foreach(lc, resolved_tables)
	{
		DurableDirectTable *table = lfirst(lc);

		if (relid == InvalidOid || relid == table->relid)
			table->resolved = false;
	}
}

static void
register_table(DurableDirectTable *table)
{
	MemoryContext old;

	if (table->registered)
		return;
	DurableForgetOnRelcacheInvalidation(forget_resolved_tables);
	old = MemoryContextSwitchTo(TopMemoryContext);
	resolved_tables = lappend(resolved_tables, table);
	MemoryContextSwitchTo(old);
	table->registered = true;
}

static void
missing_columns(const DurableDirectTable *table, const char *detail)
{
	ereport(ERROR,
			errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			errmsg("table \"%s.%s\" does not have the columns durable's library expects",
				   table->schema, table->name),
			errdetail_internal("%s", detail));
}

/*
 * DurableDirectResolve
 *		Find the numbers of the table's columns used, checking their types,
 *		under a lock on the table.  The caller resolves its index after.
 */
void
DurableDirectResolve(DurableDirectTable *table, Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	Assert(table->ncolumns <= DURABLE_MAX_DIRECT_COLUMNS);
	for (int i = 0; i < table->ncolumns; i++)
	{
		const DurableColumn *column = &table->columns[i];

		table->attnums[i] = InvalidAttrNumber;
		for (int a = 0; a < desc->natts; a++)
		{
			Form_pg_attribute attr = TupleDescAttr(desc, a);

			if (attr->attisdropped || strcmp(NameStr(attr->attname), column->name) != 0)
				continue;
			if (OidIsValid(column->type) && attr->atttypid != column->type)
				missing_columns(table,
								psprintf("Column \"%s\" is of type %s, where the library reads %s.",
										 column->name, format_type_be(attr->atttypid),
										 format_type_be(column->type)));
			table->attnums[i] = attr->attnum;
			table->atttypids[i] = attr->atttypid;
			table->attlens[i] = attr->attlen;
			table->attbyvals[i] = attr->attbyval;
		}
		if (table->attnums[i] == InvalidAttrNumber)
			missing_columns(table, psprintf("Column \"%s\" is missing.", column->name));
	}
	register_table(table);
	table->relid = RelationGetRelid(rel);
	table->resolved = true;
}

/*
 * DurableDirectOpen
 *		The table, open and locked as a statement using it would lock it,
 *		its columns resolved if it is new to this backend or changed.  A
 *		table resolved before is locked by its OID, without a look-up of its
 *		name; if it changed meanwhile (the lock accepts the invalidations),
 *		it is looked up again.  *resolved says whether the columns were
 *		found again, and the caller's index must be; so must they when
 *		table->resolved is false after the index is locked.
 */
Relation
DurableDirectOpen(DurableDirectTable *table, LOCKMODE lockmode, bool *resolved)
{
	Oid			relid = InvalidOid;
	Relation	rel;

	if (table->resolved)
	{
		relid = table->relid;
		LockRelationOid(relid, lockmode);
		if (!table->resolved)
		{
			UnlockRelationOid(relid, lockmode);
			relid = InvalidOid;
		}
	}
	if (!OidIsValid(relid))
		relid = RangeVarGetRelid(makeRangeVar(unconstify(char *, table->schema),
											  unconstify(char *, table->name), -1),
								 lockmode, false);
	rel = table_open(relid, NoLock);
	*resolved = !table->resolved || table->relid != relid;
	if (*resolved)
		DurableDirectResolve(table, rel);
	return rel;
}

/* the equality function of an index's column, by its type */
static RegProcedure
key_equality(const DurableDirectTable *table, Oid type)
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
	elog(ERROR, "an index of table %s.%s leads with a column of type %s, which durable does not scan directly",
		 table->schema, table->name, format_type_be(type));
	pg_unreachable();
}

/*
 * DurableIndexKeysResolve
 *		The scan keys of index's first keys->nkeys columns.
 */
void
DurableIndexKeysResolve(DurableIndexKeys *keys, const DurableDirectTable *table,
						Oid index)
{
	Relation	irel = index_open(index, AccessShareLock);

	Assert(keys->nkeys >= 1 && keys->nkeys <= DURABLE_MAX_DIRECT_KEYS);
	if (IndexRelationGetNumberOfKeyAttributes(irel) < keys->nkeys)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("index \"%s\" of table \"%s.%s\" has fewer than %d columns",
					   RelationGetRelationName(irel), table->schema, table->name,
					   keys->nkeys));
	for (int k = 0; k < keys->nkeys; k++)
	{
		keys->equality[k] = key_equality(table, irel->rd_opcintype[k]);
		keys->collation[k] = irel->rd_indcollation[k];
		keys->attnums[k] = irel->rd_index->indkey.values[k];
	}
	keys->index = index;
	index_close(irel, NoLock);
}

/* the scan keys for values of the index's leading columns */
void
DurableIndexScanKeys(const DurableIndexKeys *keys, const Datum *values,
					 ScanKeyData *skeys)
{
	for (int k = 0; k < keys->nkeys; k++)
		ScanKeyEntryInitialize(&skeys[k], 0, k + 1, BTEqualStrategyNumber,
							   InvalidOid, keys->collation[k],
							   keys->equality[k], values[k]);
}

/* whether the row in slot has the index's leading columns keys */
bool
DurableIndexKeysMatch(const DurableIndexKeys *keys, const Datum *values, TupleTableSlot *slot)
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

/* the columns of table from the row in slot, pointing into it */
void
DurableDirectGetColumns(const DurableDirectTable *table, TupleTableSlot *slot,
			Datum *values, bool *isnull)
{
	for (int i = 0; i < table->ncolumns; i++)
		values[i] = slot_getattr(slot, table->attnums[i], &isnull[i]);
}

/*
 * DurableDirectSnapshot
 *		Push the snapshot SPI would run a statement that writes under (plan.c):
 *		the command counter advanced and a new snapshot, or the caller's
 *		under DurableReadAsOfCaller.  The caller pops it.
 */
void
DurableDirectSnapshot(void)
{
	if (!DurableReadingAsOfCaller())
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		CommandCounterIncrement();
		UpdateActiveSnapshotCommandId();
	}
	else
		PushActiveSnapshot(GetActiveSnapshot());
}

/*
 * DurableDirectChangedSince
 *		A row changed by a transaction that committed after this one's
 *		snapshot: under a snapshot of the transaction's own (REPEATABLE
 *		READ, SERIALIZABLE), the serialization failure a statement raises,
 *		"concurrent update" or "concurrent delete" as the executor says.
 */
void
DurableDirectChangedSince(const char *change)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				errmsg("could not serialize access due to %s", change));
}

/*
 * DurableDirectWritable
 *		Whether rel can be written without a statement: one whose
 *		triggers, rules or row security an executor would run is not.
 */
bool
DurableDirectWritable(Relation rel)
{
	return rel->trigdesc == NULL && rel->rd_rules == NULL &&
		!rel->rd_rel->relrowsecurity;
}

/*
 * DurableDirectModifiable
 *		Whether rel's rows can be updated or deleted without a statement:
 *		as DurableDirectWritable, but for the triggers that check rel's
 *		foreign keys.  A delete queues none of their events; an update runs
 *		them as an UPDATE does, in a query of the caller's own
 *		(AfterTriggerBeginQuery), as logical replication's apply worker
 *		runs them.  On Citus, a shard of durable.live_tasks has such a key,
 *		to durable.queues.
 */
bool
DurableDirectModifiable(Relation rel)
{
	TriggerDesc *triggers = rel->trigdesc;
	List	   *keys;

	if (rel->rd_rules != NULL || rel->rd_rel->relrowsecurity)
		return false;
	if (triggers == NULL)
		return true;
	keys = RelationGetFKeyList(rel);
	for (int i = 0; i < triggers->numtriggers; i++)
	{
		const Trigger *trigger = &triggers->triggers[i];
		bool		of_key = false;
		ListCell   *lc;

		if (trigger->tgfoid != F_RI_FKEY_CHECK_INS &&
			trigger->tgfoid != F_RI_FKEY_CHECK_UPD)
			return false;
		foreach(lc, keys)
			if (((ForeignKeyCacheInfo *) lfirst(lc))->conoid == trigger->tgconstraint)
				of_key = true;
		if (!of_key)
			return false;
	}
	return true;
}

/*
 * On Citus a use of tables without statements (a take, a relocation, a
 * read by key) of one partition runs in the partition's shards when they
 * are here, as a statement of the partition would (store/shard.c), through
 * a copy of the use that names the shards: one per use and partition, made
 * on first use and again when a shard was made anew (moved away and back),
 * its columns resolved on the copy's first use.
 */
#define SHARD_USE_TABLES 2

typedef struct ShardUseKey
{
	const void *use;
	int32		partition;
} ShardUseKey;

typedef struct ShardUse
{
	ShardUseKey key;
	Oid			shards[SHARD_USE_TABLES];	/* the relations it names */
	char		names[SHARD_USE_TABLES + 1][NAMEDATALEN];	/* theirs, the index */
	union
	{
		DurableTake take;
		DurableRelocation relocation;
		DurableKeyRead read;
	}			copy;
} ShardUse;

static HTAB *shard_uses = NULL;

/* the table at offset in a use */
static inline DurableDirectTable *
use_table(const void *use, size_t offset)
{
	return (DurableDirectTable *) ((char *) unconstify(void *, use) + offset);
}

/*
 * in_shards
 *		The copy of use (size bytes: one of the uses above) for the shards
 *		of partition here, which the caller entered, its tables (ntables,
 *		at the offsets given in use) named by their shards, and the name of
 *		the first one's index (a pointer at the offset index in use, when
 *		not 0; NULL for the primary key) by the shard's; NULL when a name is
 *		not Citus's usual one, the table's with the shard's number after it
 *		(Citus shortens one near NAMEDATALEN): statements then.
 */
static void *
in_shards(const void *use, size_t size, int32 partition, const size_t *tables,
		  int ntables, size_t index)
{
	ShardUseKey key = {use, partition};
	const char *index_name = index != 0 ?
		*(const char *const *) ((const char *) use + index) : NULL;
	ShardUse   *entry;
	Oid			shards[SHARD_USE_TABLES];
	char	   *names[SHARD_USE_TABLES];
	bool		registered[SHARD_USE_TABLES];
	const char *suffix = NULL;
	bool		found;
	bool		same = true;

	Assert(ntables <= SHARD_USE_TABLES && size <= sizeof(entry->copy));
	if (shard_uses == NULL)
	{
		HASHCTL		ctl = {0};

		ctl.keysize = sizeof(ShardUseKey);
		ctl.entrysize = sizeof(ShardUse);
		ctl.hcxt = TopMemoryContext;
		shard_uses = hash_create("durable uses in shards", 64, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(shard_uses, &key, HASH_FIND, NULL);
	for (int i = 0; i < ntables; i++)
	{
		shards[i] = DurableLocalShardRelid(partition, use_table(use, tables[i])->name);
		if (!OidIsValid(shards[i]))
			return NULL;
		same &= entry != NULL && entry->shards[i] == shards[i];
	}
	if (same)
		return &entry->copy;

	for (int i = 0; i < ntables; i++)
	{
		const DurableDirectTable *table = use_table(use, tables[i]);
		size_t		prefix = strlen(table->name);

		names[i] = get_rel_name(shards[i]);
		if (names[i] == NULL || strncmp(names[i], table->name, prefix) != 0)
			return NULL;
		if (i == 0)
			suffix = names[i] + prefix;
	}
	if (index_name != NULL && strlen(index_name) + strlen(suffix) >= NAMEDATALEN)
		return NULL;

	entry = hash_search(shard_uses, &key, HASH_ENTER, &found);
	for (int i = 0; i < ntables; i++)
		registered[i] = found && use_table(&entry->copy, tables[i])->registered;
	memcpy(&entry->copy, use, size);
	for (int i = 0; i < ntables; i++)
	{
		DurableDirectTable *table = use_table(&entry->copy, tables[i]);

		entry->shards[i] = shards[i];
		strlcpy(entry->names[i], names[i], NAMEDATALEN);
		table->name = entry->names[i];
		table->registered = registered[i];
		table->resolved = false;
	}
	if (index_name != NULL)
	{
		snprintf(entry->names[SHARD_USE_TABLES], NAMEDATALEN, "%s%s",
				 index_name, suffix);
		*(const char **) ((char *) &entry->copy + index) =
			entry->names[SHARD_USE_TABLES];
	}
	return &entry->copy;
}

/*
 * DurableDirectInShards
 *		The copy of use for the shards of partition (in_shards), or NULL
 *		when they are not here (DurableEnterLocalShard).
 */
void *
DurableDirectInShards(const void *use, size_t size, int32 partition,
					  const size_t *tables, int ntables, size_t index)
{
	if (DurableEnterLocalShard(partition) == 0)
		return NULL;
	return in_shards(use, size, partition, tables, ntables, index);
}

/*
 * DurableDirectInReference
 *		The copy of a use of reference tables only for their shards on this
 *		node, which every node holds (in_shards), or NULL when this
 *		transaction may not read them here (DurableEnterLocalReference).
 */
void *
DurableDirectInReference(const void *use, size_t size, const size_t *tables,
						 int ntables)
{
	if (!DurableEnterLocalReference())
		return NULL;
	return in_shards(use, size, DURABLE_REFERENCE_PARTITION, tables, ntables, 0);
}

/* the privileges on rel a statement's executor would check, or the error */
void
DurableDirectCheckPrivileges(Relation rel, AclMode perms)
{
	if (pg_class_aclmask(RelationGetRelid(rel), GetUserId(), perms, ACLMASK_ALL) != perms)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, RelationGetRelationName(rel));
}

/*
 * DurableDirectEState
 *		An executor state that writes rel as its statement's one result
 *		relation, with the permissions perms and the columns it inserts or
 *		updates (ExecInsertIndexTuples reads them for the hint it gives an
 *		index whose columns did not change), under the active snapshot.
 *		rel's ResultRelInfo into *rri, its indexes not open.
 */
EState *
DurableDirectEState(Relation rel, AclMode perms, Bitmapset *inserted,
					Bitmapset *updated, ResultRelInfo **rri)
{
	EState	   *estate = CreateExecutorState();
	MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
	RangeTblEntry *rte = makeNode(RangeTblEntry);

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	DURABLE_INIT_RANGE_TABLE(estate, rte, perms, inserted, updated);
	estate->es_snapshot = GetActiveSnapshot();
	estate->es_output_cid = GetCurrentCommandId(true);
	*rri = makeNode(ResultRelInfo);
	InitResultRelInfo(*rri, rel, 1, NULL, 0);
	/* where a trigger's event finds it, as the apply worker puts it */
	estate->es_opened_result_relations =
		lappend(estate->es_opened_result_relations, *rri);
	MemoryContextSwitchTo(old);
	return estate;
}

/* a table's columns as a set of attribute numbers, for a range table */
Bitmapset *
DurableDirectColumnSet(const DurableDirectTable *table, int from)
{
	Bitmapset  *columns = NULL;

	for (int i = from; i < table->ncolumns; i++)
		columns = bms_add_member(columns, table->attnums[i] -
								 FirstLowInvalidHeapAttributeNumber);
	return columns;
}

/*
 * DurableIndexFind
 *		The scan keys of the first keys->nkeys columns of rel's index named
 *		name (in rel's schema), or of its primary key when name is NULL.
 *		keys->index is InvalidOid when rel has no index of that name (one
 *		an installation dropped); a table without a primary key is an
 *		ERROR.
 */
void
DurableIndexFind(DurableIndexKeys *keys, const DurableDirectTable *table, Relation rel,
				 const char *name)
{
	Oid			index;

	if (name == NULL)
	{
		index = DURABLE_PRIMARY_KEY_INDEX(rel);
		if (!OidIsValid(index))
			ereport(ERROR,
					errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					errmsg("table \"%s.%s\" has no primary key", table->schema, table->name),
					errdetail("durable's library reads its rows by the primary key."));
	}
	else
	{
		index = get_relname_relid(name, RelationGetNamespace(rel));
		if (!OidIsValid(index) || !list_member_oid(RelationGetIndexList(rel), index))
		{
			keys->index = InvalidOid;
			return;
		}
	}
	DurableIndexKeysResolve(keys, table, index);
}

/*
 * DurableIndexOpen
 *		Open in lockmode the index of keys (found by DurableIndexFind with
 *		name) of rel, table's relation.  Locking the index takes the
 *		invalidations that came meanwhile, and they may have changed the
 *		table: its index may be another one now (REINDEX CONCURRENTLY swaps
 *		them under the table's lock), so table and keys are found again.
 *		NULL when the index named is gone.
 */
Relation
DurableIndexOpen(DurableDirectTable *table, DurableIndexKeys *keys, const char *name,
				 Relation rel, LOCKMODE lockmode)
{
	Relation	index = index_open(keys->index, lockmode);

	if (table->resolved)
		return index;
	index_close(index, NoLock);
	DurableDirectResolve(table, rel);
	DurableIndexFind(keys, table, rel, name);
	if (!OidIsValid(keys->index))
		return NULL;
	return index_open(keys->index, lockmode);
}
