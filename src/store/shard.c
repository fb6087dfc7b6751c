/*-------------------------------------------------------------------------
 *
 * shard.c
 *	  On Citus: a partition whose shards are on this node is read and
 *	  written in its shards themselves, with plans kept as on one server.
 *
 * Citus runs a statement on a shard of this node by planning it as a
 * distributed statement, writing the shard's statement out, parsing and
 * planning that again, on every call: on a worker the claim/commit cycle
 * costs five times what it costs on one server, most of it there.  The
 * statements of one partition (by_partition, plan.c) name their tables
 * with the partition's shards instead, when those are here, and keep their
 * plans; they run as Citus's local execution runs a shard's statement:
 *
 *	- under Citus's lock on the shard's placement (ShareLock, as Citus's
 *	  writes take it), so that a shard move, which takes it exclusively,
 *	  waits for them, and after it the placement is read again;
 *	- only while this transaction has not reached this node over a
 *	  connection (Citus's "local execution disabled"), whose transaction
 *	  would not see the shard's rows written here; and once they have run,
 *	  Citus's statements of the transaction run here as well ("required");
 *	- a write makes Citus commit the nodes the transaction also wrote with
 *	  two phases, as its own local writes do.
 *
 * Those are Citus's own functions, found in its library by name; a Citus
 * without them, or with citus.enable_local_execution off, leaves every
 * statement to Citus.  Reference tables are read in their placement here;
 * they are never written here (DurableLocalPlanWrites), as a write must
 * reach every placement.
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "nodes/nodeFuncs.h"
#include "storage/lockdefs.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/snapmgr.h"

/* Citus's LocalExecutionStatus */
#define CITUS_LOCAL_EXECUTION_REQUIRED 0
#define CITUS_LOCAL_EXECUTION_DISABLED 2

typedef int (*GetLocalExecutionStatusFn) (void);
typedef void (*SetLocalExecutionStatusFn) (int status);
typedef void (*LockShardMetadataFn) (int64 shard, LOCKMODE mode);
typedef void (*Use2PCFn) (void);

static struct
{
	bool		looked_up;
	GetLocalExecutionStatusFn get_status;
	SetLocalExecutionStatusFn set_status;
	LockShardMetadataFn lock_shard;
	Use2PCFn use_2pc;
} citus;

/* a table of durable's that Citus holds, and its shard for one partition */
typedef struct ShardName
{
	char		table[NAMEDATALEN];
	char	   *shard;			/* qualified and quoted, as Citus names it */
	Oid			shard_relid;	/* InvalidOid when not here */
	bool		reference;
	bool		here;
} ShardName;

typedef struct PartitionShards
{
	int32		partition;		/* hash key */
	int64		shard;			/* of durable.live_tasks, or 0: not here */
	bool		references_here;	/* every reference table's shard is here */
	int			ntables;
	ShardName  *tables;
} PartitionShards;

static HTAB *partition_shards = NULL;
static MemoryContext shard_names_context = NULL;

/* durable.live_tasks, whose invalidation Citus sends when a shard moves */
static Oid	anchor_relid = InvalidOid;

/* the columns of partition_shard_names, from 1 */
enum
{
	SHARD_TABLE = 1,
	SHARD_NAME,
	SHARD_ID,
	SHARD_RELID,
	SHARD_REFERENCE,
	SHARD_HERE,
	SHARD_ANCHOR_RELID,
};

/*
 * The shards of a partition: of each distributed table of durable's
 * colocated with durable.live_tasks, the one that holds the partition; of
 * each reference table, its one shard.  The partitions of a partitioned
 * table are reached through its own.
 */
static const char *const partition_shard_names =
	"SELECT c.relname::pg_catalog.text AS table_name,"
	" pg_catalog.shard_name(p.logicalrelid, s.shardid) AS shard_name,"
	" s.shardid, CASE WHEN h.here THEN pg_catalog.to_regclass("
	"  pg_catalog.shard_name(p.logicalrelid, s.shardid))::pg_catalog.oid"
	"  END AS shard_relid,"
	" p.partmethod OPERATOR(pg_catalog.<>) 'h' AS reference, h.here,"
	" 'durable.live_tasks'::pg_catalog.regclass::pg_catalog.oid AS anchor_relid"
	" FROM pg_catalog.pg_dist_partition p"
	" JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.logicalrelid"
	" CROSS JOIN LATERAL (SELECT CASE WHEN p.partmethod OPERATOR(pg_catalog.=) 'h'"
	"  THEN pg_catalog.get_shard_id_for_distribution_column(p.logicalrelid, $1)"
	"  ELSE (SELECT pg_catalog.min(d.shardid) FROM pg_catalog.pg_dist_shard d"
	"   WHERE d.logicalrelid OPERATOR(pg_catalog.=) p.logicalrelid) END AS shardid) s"
	" CROSS JOIN LATERAL (SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_placement pl"
	"  WHERE pl.shardid OPERATOR(pg_catalog.=) s.shardid"
	"  AND pl.groupid OPERATOR(pg_catalog.=) $2) AS here) h"
	" WHERE c.relnamespace OPERATOR(pg_catalog.=) 'durable'::pg_catalog.regnamespace"
	" AND NOT c.relispartition AND s.shardid IS NOT NULL"
	" AND (p.partmethod OPERATOR(pg_catalog.<>) 'h' OR p.colocationid"
	"  OPERATOR(pg_catalog.=) (SELECT l.colocationid FROM pg_catalog.pg_dist_partition l"
	"   WHERE l.logicalrelid OPERATOR(pg_catalog.=) 'durable.live_tasks'::pg_catalog.regclass))";

/* a shard moved, or the extension changed: read the names again */
static void
forget_shard_names(Datum arg, Oid relid)
{
	if (partition_shards != NULL &&
		(relid == InvalidOid || relid == anchor_relid))
	{
		hash_destroy(partition_shards);
		partition_shards = NULL;
		MemoryContextReset(shard_names_context);
	}
}

/*
 * citus_functions
 *		Whether Citus's functions for local execution were found, looking
 *		them up on the first call.
 */
static bool
citus_functions(void)
{
	if (!citus.looked_up)
	{
		citus.get_status = (GetLocalExecutionStatusFn)
			load_external_function("citus", "GetCurrentLocalExecutionStatus", false, NULL);
		citus.set_status = (SetLocalExecutionStatusFn)
			load_external_function("citus", "SetLocalExecutionStatus", false, NULL);
		citus.lock_shard = (LockShardMetadataFn)
			load_external_function("citus", "LockShardDistributionMetadata", false, NULL);
		citus.use_2pc = (Use2PCFn)
			load_external_function("citus", "Use2PCForCoordinatedTransaction", false, NULL);
		citus.looked_up = true;
		if (!citus.get_status || !citus.set_status || !citus.lock_shard ||
			!citus.use_2pc)
			elog(LOG, "durable: this Citus lacks the functions of its local execution; every statement goes through Citus");
	}
	return citus.get_status && citus.set_status && citus.lock_shard &&
		citus.use_2pc;
}

/* the shards of a partition, read on first use */
static PartitionShards *
shards_of(int32 partition)
{
	static bool callback_registered = false;
	PartitionShards *entry;
	Oid			argtypes[2] = {INT4OID, INT4OID};
	Datum		args[2];
	MemoryContext old;
	bool		isnull;
	bool		all_here;
	int			nest;

	if (!callback_registered)
	{
		DurableForgetOnRelcacheInvalidation(forget_shard_names);
		shard_names_context = AllocSetContextCreate(TopMemoryContext,
													"durable shard names",
													ALLOCSET_SMALL_SIZES);
		callback_registered = true;
	}
	if (partition_shards == NULL)
	{
		HASHCTL		ctl = {0};

		ctl.keysize = sizeof(int32);
		ctl.entrysize = sizeof(PartitionShards);
		ctl.hcxt = shard_names_context;
		partition_shards = hash_create("durable partition shards", 64, &ctl,
									   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(partition_shards, &partition, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;

	/*
	 * Read the placements as they are now, as Citus's own catalog lookups
	 * do, not as the statement's snapshot saw them before a move that
	 * DurableEnterLocalShard waited for committed.
	 */
	args[0] = Int32GetDatum(partition);
	args[1] = Int32GetDatum(DurableLocalGroup());
	PushActiveSnapshot(GetLatestSnapshot());
	nest = DurablePinStatementSettings(true, false);
	if (SPI_execute_with_args(partition_shard_names, 2, argtypes, args, NULL,
							  true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the shards of partition %d", partition);
	DurableUnpinStatementSettings(nest);
	PopActiveSnapshot();

	/* reading the catalogs may have invalidated the table */
	if (partition_shards == NULL)
		return shards_of(partition);
	entry = hash_search(partition_shards, &partition, HASH_ENTER, NULL);
	old = MemoryContextSwitchTo(shard_names_context);
	entry->shard = 0;
	entry->references_here = SPI_processed > 0;
	entry->ntables = (int) SPI_processed;
	all_here = SPI_processed > 0;
	entry->tables = palloc0(sizeof(ShardName) * Max(SPI_processed, 1));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	row = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		ShardName  *name = &entry->tables[r];
		Datum		relid = SPI_getbinval(row, desc, SHARD_RELID, &isnull);

		strlcpy(name->table, SPI_getvalue(row, desc, SHARD_TABLE), NAMEDATALEN);
		name->shard = SPI_getvalue(row, desc, SHARD_NAME);
		name->shard_relid = isnull ? InvalidOid : DatumGetObjectId(relid);
		name->reference = DatumGetBool(SPI_getbinval(row, desc, SHARD_REFERENCE,
													 &isnull));
		name->here = DatumGetBool(SPI_getbinval(row, desc, SHARD_HERE, &isnull));
		if (strcmp(name->table, "live_tasks") == 0)
			entry->shard = DatumGetInt64(SPI_getbinval(row, desc, SHARD_ID, &isnull));
		all_here &= name->here;
		if (name->reference)
			entry->references_here &= name->here;
		anchor_relid = DatumGetObjectId(SPI_getbinval(row, desc, SHARD_ANCHOR_RELID,
													  &isnull));
	}
	/* the partition is here when every table's shard of it is */
	if (!all_here)
		entry->shard = 0;
	MemoryContextSwitchTo(old);
	return entry;
}

/*
 * local_execution_allowed
 *		Whether this transaction may read and write shards here itself: as
 *		Citus's own local execution may.
 */
static bool
local_execution_allowed(void)
{
	const char *local_execution;

	if (!DurableDistributed() || !citus_functions())
		return false;
	local_execution = GetConfigOption("citus.enable_local_execution", true, false);
	return citus.get_status() != CITUS_LOCAL_EXECUTION_DISABLED &&
		(local_execution == NULL || strcmp(local_execution, "off") != 0);
}

/*
 * DurableEnterLocalShard
 *		The shard of durable.live_tasks that holds a partition, when it is on
 *		this node with the partition's shards of every table and every
 *		reference table's, and this transaction may read and write them here,
 *		under Citus's lock on its placement; 0 when the partition's
 *		statements must go through Citus.  After it, Citus runs this
 *		transaction's statements on this node's shards here too.
 */
int64
DurableEnterLocalShard(int32 partition)
{
	int64		shard;

	if (!local_execution_allowed())
		return 0;
	shard = shards_of(partition)->shard;
	if (shard == 0)
		return 0;

	/* a move of the shard that ended before the lock is seen after it */
	citus.lock_shard(shard, ShareLock);
	AcceptInvalidationMessages();
	if (shards_of(partition)->shard != shard)
		return 0;
	citus.set_status(CITUS_LOCAL_EXECUTION_REQUIRED);
	return shard;
}

/*
 * DurableEnterLocalReference
 *		Whether every reference table of durable's has its shard here and
 *		this transaction may read them here (as DurableEnterLocalShard).
 *		Their shards do not move.
 */
bool
DurableEnterLocalReference(void)
{
	if (!local_execution_allowed() ||
		!shards_of(DURABLE_REFERENCE_PARTITION)->references_here)
		return false;
	citus.set_status(CITUS_LOCAL_EXECUTION_REQUIRED);
	return true;
}

/*
 * DurableLocalShardRelid
 *		The relation of table's shard for a partition that
 *		DurableEnterLocalShard found here.
 */
Oid
DurableLocalShardRelid(int32 partition, const char *table)
{
	PartitionShards *shards = shards_of(partition);

	for (int i = 0; i < shards->ntables; i++)
		if (strcmp(shards->tables[i].table, table) == 0 && shards->tables[i].here)
			return shards->tables[i].shard_relid;
	return InvalidOid;
}

/*
 * DurableLocalShardWrote
 *		A statement entered with DurableEnterLocalShard writes: the nodes the
 *		transaction writes besides this one commit with two phases.
 */
void
DurableLocalShardWrote(void)
{
	citus.use_2pc();
}

/*
 * DurableLocalShardText
 *		A statement's text with each table of durable's that Citus holds
 *		named by its shard for the partition, which DurableEnterLocalShard
 *		found here.  The statement must name its tables "durable.<table>".
 */
char *
DurableLocalShardText(const char *sql, int32 partition)
{
	PartitionShards *shards = shards_of(partition);
	StringInfoData buf;
	char		quote = '\0';
	const char *p = sql;

	initStringInfo(&buf);
	while (*p)
	{
		const char *name;
		size_t		len;
		int			t;

		if (quote != '\0')
		{
			if (*p == quote)
				quote = '\0';
			appendStringInfoChar(&buf, *p++);
			continue;
		}
		if (*p == '\'' || *p == '"')
		{
			quote = *p;
			appendStringInfoChar(&buf, *p++);
			continue;
		}
		if (strncmp(p, "durable.", 8) != 0 ||
			(p > sql && (isalnum((unsigned char) p[-1]) || p[-1] == '_')))
		{
			appendStringInfoChar(&buf, *p++);
			continue;
		}
		name = p + 8;
		for (len = 0; isalnum((unsigned char) name[len]) || name[len] == '_'; len++)
			;
		for (t = 0; t < shards->ntables; t++)
			if (strlen(shards->tables[t].table) == len &&
				strncmp(shards->tables[t].table, name, len) == 0)
				break;
		if (t == shards->ntables)
		{
			/* a type, a function or a table Citus does not hold */
			appendBinaryStringInfo(&buf, p, 8 + len);
		}
		else if (!shards->tables[t].here)
			elog(ERROR, "shard of durable.%s for partition %d is not on this node",
				 shards->tables[t].table, partition);
		else
			appendStringInfoString(&buf, shards->tables[t].shard);
		p = name + len;
	}
	return buf.data;
}

/* whether a relation is the shard here of one of durable's reference tables */
static bool
is_reference_shard(Oid relid, int32 partition)
{
	PartitionShards *shards = shards_of(partition);

	for (int t = 0; t < shards->ntables; t++)
		if (shards->tables[t].reference && shards->tables[t].shard_relid == relid)
			return true;
	return false;
}

typedef struct WritesContext
{
	int32		partition;
	bool		writes;
	bool		writes_reference;
} WritesContext;

/* what a query writes, in itself or in its CTEs */
static bool
writes_walker(Node *node, WritesContext *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_RELATION && rte->rellockmode == RowExclusiveLock)
		{
			context->writes = true;
			if (is_reference_shard(rte->relid, context->partition))
				context->writes_reference = true;
		}
		return false;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, writes_walker, context,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, writes_walker, context);
}

/*
 * DurableLocalPlanWrites
 *		Whether a statement's plan on a partition's shards here writes; an
 *		ERROR if it would write a reference table's shard: only Citus may,
 *		as a write must reach every placement.
 */
bool
DurableLocalPlanWrites(const char *name, SPIPlanPtr plan, int32 partition)
{
	WritesContext context = {.partition = partition};
	ListCell   *lc;

	foreach(lc, SPI_plan_get_plan_sources(plan))
	{
		CachedPlanSource *source = (CachedPlanSource *) lfirst(lc);
		ListCell   *q;

		foreach(q, source->query_list)
			(void) writes_walker((Node *) lfirst(q), &context);
	}
	if (context.writes_reference)
		elog(ERROR, "statement \"%s\" writes a reference table and cannot run in its shard here",
			 name);
	return context.writes;
}
