/*-------------------------------------------------------------------------
 *
 * sharded.c
 *	  The hot calls on Citus, one node at a time: the order in which a
 *	  claim looks at a queue's partitions, its first look at each, and a
 *	  worker's batch heartbeat, one statement per shard.
 *
 * A claim looks at the partitions of the node it runs on first, then node
 * by node (store/placement.c); it asks the first other node in one call
 * (claim_node.c), and reads a partition of the nodes after it before it
 * locks rows there (claim.c says why).  The first command to another node
 * (that call, or a read) runs in a subtransaction: when the connection to
 * the node fails, the node is left alone for a moment and the claim goes
 * on with the others.  Citus sends the savepoint to the nodes the
 * transaction has reached, so only the first command to a node is
 * wrapped (DurableOnWalkNode).
 *
 * The single-server statement (claim.c's heartbeat_batch) joins the batch
 * to durable.live_tasks by an expression of the task id, which Citus
 * cannot route: it runs on every shard and commits in two phases on every
 * node.  Here the batch's tasks are grouped by shard (store/placement.c),
 * this node's first, and each group renewed by a statement that names its
 * partitions, so that Citus routes it to that shard alone.  Tasks of one
 * node are renewed over one connection and commit in one phase; tasks of
 * a node this backend runs on need no remote command at all.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "core/sql.h"
#include "nodes/bitmapset.h"
#include "utils/array.h"
#include "utils/timestamp.h"

/*
 * Whether a partition has work, and whether it has expired leases.  On
 * this node, each is a query of one table by its partition_key, planned
 * once per partition (store/plan.c), and the second runs only when the
 * first finds nothing.  On another node both are one statement, one
 * round trip, a read that leaves the node out of the transaction's writes,
 * planned once per partition with the partition in its text (plan.c).
 */
enum
{
	PROBE_READY,
	PROBE_EXPIRED,
	PROBE_NCOLUMNS
};

static const DurableColumn probe_columns[PROBE_NCOLUMNS] = {
	[PROBE_READY] = {"ready", BOOLOID},
	[PROBE_EXPIRED] = {"expired", BOOLOID},
};

static const DurableColumn found_columns[1] = {{"found", BOOLOID}};

/* the parameters of claim_probe and probe_here_ready */
enum
{
	PROBE_PARTITION,
	PROBE_QUEUE,
	PROBE_NOW,
	PROBE_NPARAMS
};
static const DurableParam probe_params[PROBE_NPARAMS] = {
	[PROBE_PARTITION] = {"partition", INT4OID},
	[PROBE_QUEUE] = {"queue", TEXTOID},
	[PROBE_NOW] = {"now", TIMESTAMPTZOID},
};
static DurableStatement claim_probe = {
	.name = "claim_probe",
	.sql = "SELECT EXISTS (SELECT FROM durable.live_tasks"
	"  WHERE partition_key = $partition AND queue_name = $queue"
	"  AND state IN ('ready', 'waiting') AND run_at <= $now) AS ready,"
	" EXISTS (SELECT FROM durable.live_tasks"
	"  WHERE partition_key = $partition AND state = 'running'"
	"  AND lease_until < $now) AS expired",
	DURABLE_PARAMS(probe_params),
	DURABLE_COLUMNS(probe_columns),
	.by_partition = true,
};

static DurableStatement probe_here_ready = {
	.name = "probe_here_ready",
	.sql = "SELECT true AS found FROM durable.live_tasks"
	" WHERE partition_key = $partition AND queue_name = $queue"
	" AND state IN ('ready', 'waiting') AND run_at <= $now LIMIT 1",
	DURABLE_PARAMS(probe_params),
	DURABLE_COLUMNS(found_columns),
	.by_partition = true,
};

enum
{
	EXPIRED_PARTITION,
	EXPIRED_NOW,
	EXPIRED_NPARAMS
};
static const DurableParam probe_here_expired_params[EXPIRED_NPARAMS] = {
	[EXPIRED_PARTITION] = {"partition", INT4OID},
	[EXPIRED_NOW] = {"now", TIMESTAMPTZOID},
};
static DurableStatement probe_here_expired = {
	.name = "probe_here_expired",
	.sql = "SELECT true AS found FROM durable.live_tasks"
	" WHERE partition_key = $partition AND state = 'running'"
	" AND lease_until < $now LIMIT 1",
	DURABLE_PARAMS(probe_here_expired_params),
	DURABLE_COLUMNS(found_columns),
	.by_partition = true,
};

/*
 * DurableClaimOrder
 *		A queue's partitions in the order a claim looks at them, into walk:
 *		this node's first, then node by node, each node's from the turn-th
 *		on (a start that differs between backends and claims, so that new
 *		sessions on a node without shards spread over the nodes).
 */
int32 *
DurableClaimOrder(const DurableQueue *settings, uint32 turn, DurableNodeWalk *walk)
{
	int			n = settings->partitions;

	walk->partitions = palloc(sizeof(int32) * n);
	walk->places = palloc(sizeof(DurablePlacement) * n);
	walk->reached = NULL;
	for (int k = 0; k < n; k++)
		walk->partitions[k] = DurableQueuePartition(settings,
													(int) ((turn + k) % (uint32) n));
	DurablePlacePartitions(walk->partitions, n, walk->places);
	DurableNodeOrder(walk->partitions, walk->places, n, turn);
	return walk->partitions;
}

/* a run of claim_probe: its values (probe_params), and its result */
typedef struct ProbeRun
{
	Datum	   *values;
	DurableResult res;
} ProbeRun;

static uint64
run_probe(void *arg)
{
	ProbeRun   *run = (ProbeRun *) arg;

	run->res = DurableRun(&claim_probe, run->values, NULL, SPI_OK_SELECT, 0);
	return run->res.rows;
}

/*
 * DurableOnWalkNode
 *		Run fn(arg), statements on the node of the i-th partition of a
 *		claim's walk, another node.  Returns false, running nothing, for a
 *		node that is down: one that failed a moment ago, or whose connection
 *		fails now (class 08; any other error is raised).
 */
bool
DurableOnWalkNode(DurableNodeWalk *walk, int i, DurablePartFunction fn, void *arg)
{
	int32		group = walk->places[i].group;
	ErrorData  *error;

	if (DurableNodeDown(group))
		return false;
	if (bms_is_member(group, walk->reached))
		(void) fn(arg);
	else if (DurableTry(fn, arg, NULL, &error))
		walk->reached = bms_add_member(walk->reached, group);
	else
	{
		if (ERRCODE_TO_CATEGORY(error->sqlerrcode) != ERRCODE_CONNECTION_EXCEPTION)
			ReThrowError(error);
		ereport(DEBUG1,
				errmsg("durable claims leave node group %d alone for a moment: %s",
					   group, error->message));
		DurableNodeFailed(group);
		FreeErrorData(error);
		return false;
	}
	return true;
}

/*
 * DurableClaimProbe
 *		Read whether the i-th partition of a claim's walk (partition) has
 *		ready work in queue at now, and whether it has expired leases (on
 *		this node, looked for only where there is no ready work).  Returns
 *		false, reading nothing, for a node that is down (DurableOnWalkNode).
 */
bool
DurableClaimProbe(DurableNodeWalk *walk, int i, Datum partition, Datum queue,
				  Datum now, bool *ready, bool *expired)
{
	Datum		probe[PROBE_NPARAMS];
	ProbeRun	run = {.values = probe};

	probe[PROBE_PARTITION] = partition;
	probe[PROBE_QUEUE] = queue;
	probe[PROBE_NOW] = now;
	if (DurableClaimWalkHere(walk, i))
	{
		*ready = DurableRun(&probe_here_ready, probe, NULL,
							SPI_OK_SELECT, 0).rows > 0;
		*expired = !*ready && DurableExpiredHere(partition, now);
		return true;
	}
	if (!DurableOnWalkNode(walk, i, run_probe, &run))
		return false;
	*ready = DurableGetBool(run.res, 0, PROBE_READY);
	*expired = DurableGetBool(run.res, 0, PROBE_EXPIRED);
	return true;
}

/* whether the i-th partition of a claim's walk is on this node */
bool
DurableClaimWalkHere(const DurableNodeWalk *walk, int i)
{
	int32		group = walk->places[i].group;

	return group < 0 || group == DurableLocalGroup();
}

/* whether a partition on this node has expired leases at now */
bool
DurableExpiredHere(Datum partition, Datum now)
{
	Datum		args[EXPIRED_NPARAMS];

	args[EXPIRED_PARTITION] = partition;
	args[EXPIRED_NOW] = now;
	return DurableRun(&probe_here_expired, args, NULL, SPI_OK_SELECT, 0).rows > 0;
}

enum
{
	SHARD_RENEWED_TASK_ID,
	SHARD_RENEWED_FENCE,
	SHARD_RENEWED_QUEUE,
	SHARD_RENEWED_RESTRICTED,
	SHARD_RENEWED_LEASE_UNTIL,
	SHARD_RENEWED_NCOLUMNS
};

static const DurableColumn shard_renewed_columns[SHARD_RENEWED_NCOLUMNS] = {
	[SHARD_RENEWED_TASK_ID] = {"task_id", INT8OID},
	[SHARD_RENEWED_FENCE] = {"fence", INT8OID},
	[SHARD_RENEWED_QUEUE] = {"queue_name", TEXTOID},
	[SHARD_RENEWED_RESTRICTED] = {"restricted", BOOLOID},
	[SHARD_RENEWED_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID},
};

/* the tasks of one shard, by the partitions of the shard */
enum
{
	BEAT_TASK_IDS,
	BEAT_FENCES,
	BEAT_NOW,
	BEAT_LEASE,
	BEAT_PARTITIONS,
	BEAT_NPARAMS
};
static const DurableParam heartbeat_shard_params[BEAT_NPARAMS] = {
	[BEAT_TASK_IDS] = {"task_ids", INT8ARRAYOID},
	[BEAT_FENCES] = {"fences", INT8ARRAYOID},
	[BEAT_NOW] = {"now", TIMESTAMPTZOID},
	[BEAT_LEASE] = {"lease", INTERVALOID},
	[BEAT_PARTITIONS] = {"partitions", INT4ARRAYOID},
};
static DurableStatement heartbeat_shard = {
	.name = "heartbeat_shard",
	.sql = "UPDATE durable.live_tasks t SET"
	RENEW_LEASE("t.")
	" FROM durable.queues q"
	" WHERE t.partition_key = ANY ($partitions)"
	" AND (t.task_id, t.fence) IN (SELECT * FROM ROWS FROM"
	"  (pg_catalog.unnest($task_ids::int8[]), pg_catalog.unnest($fences::int8[])))"
	" AND t.state = 'running' AND q.queue_name = t.queue_name"
	" RETURNING t.task_id, t.fence, t.queue_name, q.restricted, t.lease_until",
	DURABLE_PARAMS(heartbeat_shard_params),
	DURABLE_COLUMNS(shard_renewed_columns),
};

/* an int8 or int4 array of the values at positions order[from .. to - 1] */
static ArrayType *
run_array(const Datum *values, const int *order, int from, int to, Oid type)
{
	Datum	   *run = palloc(sizeof(Datum) * Max(to - from, 1));

	for (int i = from; i < to; i++)
		run[i - from] = values[order[i]];
	if (type == INT8OID)
		return construct_array(run, to - from, INT8OID, sizeof(int64), true,
							   TYPALIGN_DOUBLE);
	return construct_array(run, to - from, INT4OID, sizeof(int32), true,
						   TYPALIGN_INT);
}

/*
 * DurableHeartbeatBatchSharded
 *		DurableHeartbeatBatch on Citus, as that function says, shard by
 *		shard.
 */
void
DurableHeartbeatBatchSharded(ArrayType *ids, ArrayType *fences, Interval *lease,
							 int n, int64 *task_ids, TimestampTz *until,
							 bool *held)
{
	DurableResult res;
	Datum	   *id_values;
	Datum	   *fence_values;
	Datum	   *partitions = palloc(sizeof(Datum) * n);
	int32	   *keys = palloc(sizeof(int32) * n);
	int		   *order = palloc(sizeof(int) * (n + 1));
	int		   *bounds = palloc(sizeof(int) * (n + 1));
	char	  **queues = palloc0(sizeof(char *) * n);
	bool	   *restricted = palloc0(sizeof(bool) * n);
	Datum		args[BEAT_NPARAMS];
	char		nulls[BEAT_NPARAMS] = {' ', ' ', ' ', ' ', ' '};
	int			nids;
	int			runs;

	deconstruct_array(ids, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
					  &id_values, NULL, &nids);
	deconstruct_array(fences, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
					  &fence_values, NULL, &nids);
	for (int i = 0; i < n; i++)
	{
		task_ids[i] = DatumGetInt64(id_values[i]);
		held[i] = false;
		until[i] = 0;
		keys[i] = DURABLE_TASK_PARTITION(task_ids[i]);
		partitions[i] = Int32GetDatum(keys[i]);
	}
	runs = DurableGroupByShard(keys, n, order, bounds);

	args[BEAT_NOW] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args[BEAT_LEASE] = PointerGetDatum(lease);
	nulls[BEAT_LEASE] = lease ? ' ' : 'n';
	for (int r = 0; r < runs; r++)
	{
		int			from = bounds[r];
		int			to = bounds[r + 1];
		uint64		rows;

		args[BEAT_TASK_IDS] = PointerGetDatum(run_array(id_values, order, from, to, INT8OID));
		args[BEAT_FENCES] = PointerGetDatum(run_array(fence_values, order, from, to, INT8OID));
		args[BEAT_PARTITIONS] = PointerGetDatum(run_array(partitions, order, from, to,
														 INT4OID));
		res = DurableRun(&heartbeat_shard, args, nulls, SPI_OK_UPDATE_RETURNING, 0);
		rows = res.rows;
		for (uint64 row = 0; row < rows; row++)
		{
			int64		task_id = DurableGetInt64(res, row, SHARD_RENEWED_TASK_ID);
			int64		fence = DurableGetInt64(res, row, SHARD_RENEWED_FENCE);
			bool		isnull;
			Datum		lease_until = DurableGetDatum(res, row, SHARD_RENEWED_LEASE_UNTIL,
													  &isnull);

			/* every position of the run that names this task and fence */
			for (int i = from; i < to; i++)
			{
				int			p = order[i];

				if (task_ids[p] != task_id || DatumGetInt64(fence_values[p]) != fence)
					continue;
				held[p] = true;
				until[p] = DatumGetTimestampTz(lease_until);
				queues[p] = DurableGetText(res, row, SHARD_RENEWED_QUEUE);
				restricted[p] = DurableGetBool(res, row, SHARD_RENEWED_RESTRICTED);
			}
		}
	}
	DurableCheckBatchAccess(task_ids, queues, restricted, held, n);
}
