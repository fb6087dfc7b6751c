/*-------------------------------------------------------------------------
 *
 * tick.c
 *	  One tick of reconciliation (api/operations.c's durable_reconcile()
 *	  and the background worker run it).
 *
 * A tick is what the background worker runs in one transaction and
 * durable_reconcile() exposes: expired leases through the recovery table
 * (reconcile.c), stuck alarms, the tasks no worker runs the versions of
 * (versions.c), retention and history (retention.c), the
 * schedules that are due (schedule.c) and the retry tokens that the tick's
 * retries owe (budget.c), each a bounded batch.  Every part runs in a
 * subtransaction of its own (part.c): a partition, a day of history, a
 * table, a schedule or a queue that fails is skipped for this tick and
 * shown in durable.status, and every other part goes on, lease recovery
 * first.  The tick is on top of the core: it calls the modules that move
 * tasks, and nothing in the core calls it.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/timestamp.h"

/* what a partition's part of the tick works on */
typedef struct PartitionWork
{
	int32		partition;
	TimestampTz now;
	int			batch;
	DurableSettledCallback callback;
	void	   *arg;
} PartitionWork;

static uint64
settle_partition(void *arg)
{
	PartitionWork *work = (PartitionWork *) arg;

	return DurableReconcilePartition(work->partition, work->now, work->batch,
									 work->callback, work->arg);
}

static uint64
alarm_partition(void *arg)
{
	PartitionWork *work = (PartitionWork *) arg;

	return DurableRaiseStuckAlarms(work->partition, work->now, work->batch,
								   work->callback, work->arg);
}

/*
 * over_partitions
 *		Run fn over the partitions, each its own part named after what,
 *		until batch rows are done.  Returns how many were.
 */
static uint64
over_partitions(const int32 *partitions, uint64 npartitions, const char *what,
				DurablePartFunction fn, TimestampTz now, int batch,
				DurableSettledCallback callback, void *arg)
{
	uint64		done = 0;

	for (uint64 i = 0; i < npartitions && done < (uint64) batch; i++)
	{
		PartitionWork work = {partitions[i], now, batch - (int) done, callback, arg};
		char		part[64];
		uint64		n;

		snprintf(part, sizeof(part), "partition %d: %s", partitions[i], what);
		if (DurableRunPart(part, fn, &work, &n))
			done += n;
	}
	return done;
}

/* the partitions in use */
enum
{
	PARTITION_KEY,
	PARTITION_NCOLUMNS
};
static const DurableColumn partition_columns[PARTITION_NCOLUMNS] = {
	[PARTITION_KEY] = {"p", INT4OID},
};
static DurableStatement partitions_all = {
	.name = "partitions",
	.sql = "SELECT DISTINCT (q.partition_base + i)"
	" % " CppAsString2(DURABLE_PARTITION_SPACE) " AS p"
	" FROM durable.queues q, pg_catalog.generate_series(0, q.partitions - 1) i",
	.nargs = 0,
	DURABLE_COLUMNS(partition_columns),
};

/* on Citus: those of the partitions whose shards this node holds */
static DurableStatement partitions_local = {
	.name = "partitions_local",
	.sql = "SELECT p FROM (SELECT DISTINCT (q.partition_base + i)"
	"  % " CppAsString2(DURABLE_PARTITION_SPACE)
	"  FROM durable.queues q, pg_catalog.generate_series(0, q.partitions - 1) i) x(p)"
	" WHERE EXISTS (SELECT FROM pg_catalog.pg_dist_placement pl"
	"  WHERE pl.shardid = pg_catalog.get_shard_id_for_distribution_column("
	"   'durable.live_tasks'::pg_catalog.regclass, x.p)"
	"  AND pl.groupid = (SELECT groupid FROM pg_catalog.pg_dist_local_group))",
	.nargs = 0,
	DURABLE_COLUMNS(partition_columns),
};

/* the partitions in use, in a palloc'd array */
static int32 *
partitions_in_use(uint64 *count)
{
	int32	   *partitions;

	/*
	 * On Citus, each node's reconciler works on the shards it holds; a call
	 * of durable_reconcile() works on all of them, wherever it runs.
	 */
	*count = DurableExecute(DurableDistributed() && MyBackendType == B_BG_WORKER ?
							&partitions_local : &partitions_all,
							NULL, NULL, SPI_OK_SELECT, 0);
	partitions = palloc(sizeof(int32) * Max(*count, 1));
	for (uint64 i = 0; i < *count; i++)
		partitions[i] = DurableColumnInt32(i, PARTITION_KEY);
	return partitions;
}

/*
 * DurableReconcileTick
 *		One tick of reconciliation: expired leases, stuck alarms, retention,
 *		the schedules that are due, each at most batch rows, then the retry
 *		tokens its retries owe.  Returns the largest count, so that a caller
 *		can go again at once when a batch was full.
 */
uint64
DurableReconcileTick(int batch, DurableSettledCallback callback, void *arg)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	uint64		npartitions;
	int32	   *partitions;
	uint64		settled;
	uint64		alarms;
	uint64		removed;
	uint64		reviewed;
	uint64		scheduled = 0;

	DurablePartsBegin(now);
	partitions = partitions_in_use(&npartitions);

	/*
	 * Retries owe their tokens until the end of the tick, so that the
	 * queues' buckets are locked from then to the commit only (budget.c).
	 */
	DurableBeginRetryTokens();
	settled = over_partitions(partitions, npartitions, "expired leases",
							  settle_partition, now, batch, callback, arg);
	alarms = over_partitions(partitions, npartitions, "stuck alarms",
							 alarm_partition, now, batch, callback, arg);
	reviewed = DurableReviewUnrunnable(now, batch, callback, arg);
	removed = DurableApplyRetention(now, batch, callback, arg);
	/* on Citus, the coordinator enqueues what the schedules owe */
	if (!DurableCitusWorker())
		scheduled = DurableRunSchedules(now, batch, callback, arg);
	DurableTakeOwedTokens(now);
	DurableCountTick(GetCurrentTimestamp());
	pfree(partitions);
	return Max(Max(Max(settled, alarms), Max(removed, scheduled)), reviewed);
}
