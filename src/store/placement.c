/*-------------------------------------------------------------------------
 *
 * placement.c
 *	  On Citus: which shard, and which node, holds a partition's rows; and
 *	  which nodes could not be reached a moment ago.
 *
 * The hot calls go to one node at a time: a claim looks at the partitions
 * of its own node first, and a call on a batch of tasks runs one statement
 * per shard, so that tasks of one node commit in one phase.  Both need a
 * partition's placement.  It is read from Citus's metadata once per
 * partition and backend, and forgotten whenever durable.live_tasks is
 * invalidated, as Citus invalidates a table whose shards move or whose
 * placements change.
 *
 * A node that is down fails the connection to it (SQLSTATE class 08): the
 * caller, which sent its first statement to the node in a subtransaction
 * (claim.c), marks it down for NODE_DOWN_USECS and goes on with the other
 * nodes, and so do this backend's calls until then.
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "catalog/pg_type.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* how long a node whose connection failed is left alone */
#define NODE_DOWN_USECS (2 * USECS_PER_SEC)

#define NGROUPS (1 << DURABLE_NODE_BITS)

typedef struct PlacementEntry
{
	int32		partition;		/* hash key */
	DurablePlacement place;
} PlacementEntry;

static HTAB *placements = NULL;
static Oid	placements_relid = InvalidOid;

/* per group: until when it is taken to be down (0: up) */
static TimestampTz node_down_until[NGROUPS];

enum
{
	PLACED_PARTITION,
	PLACED_SHARD,
	PLACED_GROUP,
	PLACED_RELID,
	PLACED_NCOLUMNS
};

static const DurableColumn placed_columns[PLACED_NCOLUMNS] = {
	[PLACED_PARTITION] = {"partition_key", INT4OID},
	[PLACED_SHARD] = {"shardid", INT8OID},
	[PLACED_GROUP] = {"groupid", INT4OID},
	[PLACED_RELID] = {"relid", OIDOID},
};

enum
{
	PLACEMENTS_PARTITIONS,
	PLACEMENTS_NPARAMS
};
static const DurableParam partition_placements_params[PLACEMENTS_NPARAMS] = {
	[PLACEMENTS_PARTITIONS] = {"partitions", INT4ARRAYOID},
};
/* a shard of durable.live_tasks has one placement (no replication) */
static DurableStatement partition_placements = {
	.name = "partition_placements",
	.sql = "SELECT p AS partition_key, s AS shardid,"
	" (SELECT pl.groupid FROM pg_catalog.pg_dist_placement pl"
	"  WHERE pl.shardid OPERATOR(pg_catalog.=) s"
	"  ORDER BY pl.groupid LIMIT 1) AS groupid,"
	" 'durable.live_tasks'::pg_catalog.regclass::pg_catalog.oid AS relid"
	" FROM pg_catalog.unnest($partitions::pg_catalog.int4[]) p,"
	" LATERAL pg_catalog.get_shard_id_for_distribution_column("
	"  'durable.live_tasks'::pg_catalog.regclass, p) s",
	DURABLE_PARAMS(partition_placements_params),
	DURABLE_COLUMNS(placed_columns),
};

/* Citus moved a shard, or the extension changed: read placements again */
static void
forget_placements(Datum arg, Oid relid)
{
	if (placements != NULL &&
		(relid == InvalidOid || relid == placements_relid))
	{
		hash_destroy(placements);
		placements = NULL;
	}
}

/*
 * DurablePlacePartitions
 *		The shard and node group of each of n partitions of durable.live_tasks
 *		(distributed), into places; one statement for those not known yet.
 */
void
DurablePlacePartitions(const int32 *partitions, int n, DurablePlacement *places)
{
	DurableResult res;
	Datum	   *missing;
	int			nmissing = 0;

	if (placements == NULL)
	{
		HASHCTL		ctl = {0};

		/* registered once: asked again when the cache is made anew */
		DurableForgetOnRelcacheInvalidation(forget_placements);

		ctl.keysize = sizeof(int32);
		ctl.entrysize = sizeof(PlacementEntry);
		ctl.hcxt = TopMemoryContext;
		placements = hash_create("durable partition placements", 256, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	missing = palloc(sizeof(Datum) * Max(n, 1));
	for (int i = 0; i < n; i++)
		if (hash_search(placements, &partitions[i], HASH_FIND, NULL) == NULL)
			missing[nmissing++] = Int32GetDatum(partitions[i]);
	if (nmissing > 0)
	{
		Datum		args[PLACEMENTS_NPARAMS];
		uint64		rows;

		args[PLACEMENTS_PARTITIONS] =
			PointerGetDatum(construct_array(missing, nmissing, INT4OID,
											sizeof(int32), true, TYPALIGN_INT));
		res = DurableRun(&partition_placements, args, NULL, SPI_OK_SELECT, 0);
		rows = res.rows;

		for (uint64 r = 0; r < rows; r++)
		{
			int32		partition = DurableGetInt32(res, r, PLACED_PARTITION);
			PlacementEntry *entry = hash_search(placements, &partition,
												HASH_ENTER, NULL);
			bool		isnull;

			entry->place.shard = DurableGetInt64(res, r, PLACED_SHARD);
			entry->place.group = DatumGetInt32(DurableGetDatum(res, r, PLACED_GROUP,
															   &isnull));
			if (isnull)
				entry->place.group = -1;
			placements_relid = DatumGetObjectId(DurableGetDatum(res, r, PLACED_RELID,
																&isnull));
		}
	}
	pfree(missing);

	for (int i = 0; i < n; i++)
	{
		PlacementEntry *entry = hash_search(placements, &partitions[i],
											HASH_FIND, NULL);

		if (entry == NULL)
			elog(ERROR, "partition %d of durable.live_tasks has no shard",
				 partitions[i]);
		places[i] = entry->place;
	}
}

/*
 * DurableNodeDown
 *		Whether the connection to the node of a group failed less than
 *		NODE_DOWN_USECS ago in this backend.
 */
bool
DurableNodeDown(int32 group)
{
	if (group < 0 || group >= NGROUPS ||
		node_down_until[group] == 0)
		return false;
	if (GetCurrentTimestamp() < node_down_until[group])
		return true;
	node_down_until[group] = 0;
	return false;
}

/*
 * DurableNodeFailed
 *		The connection to the node of a group failed: leave it alone for
 *		NODE_DOWN_USECS.
 */
void
DurableNodeFailed(int32 group)
{
	if (group >= 0 && group < NGROUPS)
		node_down_until[group] = GetCurrentTimestamp() + NODE_DOWN_USECS;
}

/* a position in a batch or a claim's order: by node, then shard */
typedef struct Ranked
{
	int			rank;			/* the node's */
	int64		shard;
	int			position;		/* as given */
} Ranked;

static int
compare_ranked(const void *a, const void *b)
{
	const Ranked *x = a;
	const Ranked *y = b;

	if (x->rank != y->rank)
		return (x->rank > y->rank) - (x->rank < y->rank);
	if (x->shard != y->shard)
		return (x->shard > y->shard) - (x->shard < y->shard);
	return (x->position > y->position) - (x->position < y->position);
}

/*
 * DurableNodeOrder
 *		Order n partitions and their placements for a call that goes node by
 *		node: this node's first, then each other node's together, the other
 *		nodes in an order that turns with turn (so that callers on a node
 *		with no work spread over the others); within a node, as given.
 */
void
DurableNodeOrder(int32 *partitions, DurablePlacement *places, int n, uint32 turn)
{
	Ranked	   *ranked = palloc(sizeof(Ranked) * Max(n, 1));
	int32	   *given = palloc(sizeof(int32) * Max(n, 1));
	DurablePlacement *given_places = palloc(sizeof(DurablePlacement) * Max(n, 1));
	int32		local = DurableLocalGroup();
	bool		present[NGROUPS] = {false};
	int			slot[NGROUPS];
	int			others = 0;

	memcpy(given, partitions, sizeof(int32) * n);
	memcpy(given_places, places, sizeof(DurablePlacement) * n);

	/*
	 * The other nodes turn among themselves: the one turn % others places
	 * after the lowest group comes first.  (Adding turn to the group, as
	 * until 0.9.0, left the lowest group first but for one turn in
	 * NGROUPS: every claim from a node without work asked the same node.)
	 */
	for (int i = 0; i < n; i++)
		if (places[i].group != local && places[i].group >= 0 && places[i].group < NGROUPS)
			present[places[i].group] = true;
	for (int g = 0; g < NGROUPS; g++)
		if (present[g])
			slot[g] = others++;
	for (int i = 0; i < n; i++)
	{
		int32		group = places[i].group;

		if (group == local)
			ranked[i].rank = -1;
		else if (group < 0 || group >= NGROUPS)
			ranked[i].rank = NGROUPS + group;
		else
			ranked[i].rank = (int) (((uint32) slot[group] + (uint32) others -
									 turn % (uint32) others) % (uint32) others);
		ranked[i].shard = 0;
		ranked[i].position = i;
	}
	qsort(ranked, n, sizeof(Ranked), compare_ranked);
	for (int i = 0; i < n; i++)
	{
		partitions[i] = given[ranked[i].position];
		places[i] = given_places[ranked[i].position];
	}
	pfree(ranked);
	pfree(given);
	pfree(given_places);
}

/*
 * DurableGroupByShard
 *		The positions of n partitions of a batch (0 .. n - 1) into order,
 *		shard by shard: this node's shards first, then node by node; and
 *		where each shard's run of positions starts into bounds (one more
 *		than the runs: the last is n).  Both are the caller's, of n + 1.
 *		Returns the number of runs.  A statement per run is routed to one
 *		shard, and the runs of a node go one after the other over one
 *		connection: Citus commits the tasks of one node in one phase.
 */
int
DurableGroupByShard(const int32 *partitions, int n, int *order, int *bounds)
{
	DurablePlacement *places = palloc(sizeof(DurablePlacement) * Max(n, 1));
	Ranked	   *ranked = palloc(sizeof(Ranked) * Max(n, 1));
	int32		local = DurableLocalGroup();
	int			runs = 0;

	DurablePlacePartitions(partitions, n, places);
	for (int i = 0; i < n; i++)
	{
		ranked[i].rank = places[i].group == local ? -1 : places[i].group;
		ranked[i].shard = places[i].shard;
		ranked[i].position = i;
	}
	qsort(ranked, n, sizeof(Ranked), compare_ranked);
	for (int i = 0; i < n; i++)
	{
		if (i == 0 || ranked[i].shard != ranked[i - 1].shard)
			bounds[runs++] = i;
		order[i] = ranked[i].position;
	}
	bounds[runs] = n;
	pfree(places);
	pfree(ranked);
	return runs;
}
