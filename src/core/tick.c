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
 * schedules that are due (schedule.c), the retry tokens that the tick's
 * retries owe (budget.c), the rows of idle concurrency keys
 * (concurrency.c), the due tasks of fair queues that wait for their
 * passes (fairness.c), each a bounded batch, and once a minute a sample of
 * the queues (samples.c).  Every part runs in a
 * subtransaction of its own (part.c): a partition, a day of history, a
 * table, a schedule or a queue that fails is skipped for this tick and
 * shown in durable.status, and every other part goes on, lease recovery
 * first.  durable_reconcile(queue => ...) runs one queue's leases and
 * alarms alone (DurableReconcileQueue).  The tick is on top of the core:
 * it calls the modules that move tasks, and nothing in the core calls it.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"
#include "core/sql.h"

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

	return DurableReconcilePartition(work->partition, NULL, work->now,
									 work->batch, work->callback, work->arg);
}

static uint64
alarm_partition(void *arg)
{
	PartitionWork *work = (PartitionWork *) arg;

	return DurableRaiseStuckAlarms(work->partition, NULL, work->now,
								   work->batch, work->callback, work->arg);
}

/*
 * over_partitions
 *		Run fn over the partitions, each its own part named after what,
 *		until batch rows are done, the batch shared fairly: in each round
 *		every partition still in it gets an equal share of what is left
 *		(at least one row), and only those that used their whole share go
 *		on to the next round.  So one queue's backlog of expired leases
 *		takes what the others leave, and never delays another's lease by
 *		a tick.  The partitions are served from the first-th on, which
 *		moves on each tick: when there are more partitions than rows, each
 *		has its turn.  Returns how many were done.
 */
static uint64
over_partitions(const int32 *partitions, uint64 npartitions, uint64 first,
				const char *what, DurablePartFunction fn, TimestampTz now,
				int batch, DurableSettledCallback callback, void *arg)
{
	uint64		done = 0;
	uint64		nround = npartitions;
	int32	   *round = palloc(sizeof(int32) * Max(npartitions, 1));

	for (uint64 i = 0; i < npartitions; i++)
		round[i] = partitions[(i + first) % npartitions];
	while (nround > 0 && done < (uint64) batch)
	{
		uint64		left = (uint64) batch - done;
		int			share = (int) Max(left / nround, 1);
		uint64		next = 0;

		for (uint64 i = 0; i < nround && done < (uint64) batch; i++)
		{
			PartitionWork work = {round[i], now, share, callback, arg};
			char		part[64];
			uint64		n;

			work.batch = Min(share, batch - (int) done);
			snprintf(part, sizeof(part), "partition %d: %s", round[i], what);
			if (!DurableRunPart(part, fn, &work, &n))
				continue;
			done += n;
			if (n >= (uint64) work.batch)
				round[next++] = round[i];	/* it may have more */
		}
		nround = next;
	}
	pfree(round);
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

/*
 * Of the partitions given, those with a running task whose lease expired
 * or whose progress stopped: what the per-partition statements below look
 * for, in one statement rather than two per partition.  On Citus it is one
 * task per shard, where two per partition would each be planned again.
 */
enum
{
	DUE_PARTITIONS,
	DUE_NOW,
	DUE_NPARAMS
};
static const DurableParam partitions_due_params[DUE_NPARAMS] = {
	[DUE_PARTITIONS] = {"partitions", INT4ARRAYOID},
	[DUE_NOW] = {"now", TIMESTAMPTZOID},
};
static DurableStatement partitions_due = {
	.name = "partitions_due",
	.sql = "SELECT DISTINCT t.partition_key AS p"
	" FROM durable.live_tasks t"
	" JOIN durable.queues q ON q.queue_name = t.queue_name"
	" WHERE t.partition_key = ANY ($partitions) AND t.state = 'running'"
	" AND (t.lease_until < $now"
	"  OR (q.progress_timeout IS NOT NULL"
	"   AND t.progress_at < " UTC_PLUS("$now", "-", "q.progress_timeout")
	"   AND (t.stuck_alarm_at IS NULL OR t.stuck_alarm_at < t.progress_at)))",
	DURABLE_PARAMS(partitions_due_params),
	DURABLE_COLUMNS(partition_columns),
};

/* the partitions of a result of partitions_all or partitions_due */
static uint64
read_partitions(int32 *partitions, DurableResult res)
{
	for (uint64 i = 0; i < res.rows; i++)
		partitions[i] = DurableGetInt32(res, i, PARTITION_KEY);
	return res.rows;
}

/*
 * The partitions in use, in a palloc'd array.  On Citus, each node's
 * reconciler works on the shards it holds; a call of durable_reconcile()
 * works on all of them, wherever it runs.
 */
static int32 *
partitions_in_use(uint64 *count)
{
	DurableResult res = DurableRun(&partitions_all, NULL, NULL, SPI_OK_SELECT, 0);
	int32	   *partitions = palloc(sizeof(int32) * Max(res.rows, 1));

	*count = read_partitions(partitions, res);
	if (DurableDistributed() && MyBackendType == B_BG_WORKER && *count > 0)
	{
		DurablePlacement *places = palloc(sizeof(DurablePlacement) * *count);
		int32		local = DurableLocalGroup();
		uint64		kept = 0;

		DurablePlacePartitions(partitions, (int) *count, places);
		for (uint64 i = 0; i < *count; i++)
			if (places[i].group == local)
				partitions[kept++] = partitions[i];
		*count = kept;
		pfree(places);
	}
	return partitions;
}

/* what the part that narrows the partitions to those with work works on */
typedef struct DueWork
{
	int32	   *partitions;
	uint64		count;
	TimestampTz now;
} DueWork;

static uint64
narrow_to_due(void *arg)
{
	DueWork    *work = (DueWork *) arg;
	Datum		args[DUE_NPARAMS];
	Datum	   *keys = palloc(sizeof(Datum) * Max(work->count, 1));

	for (uint64 i = 0; i < work->count; i++)
		keys[i] = Int32GetDatum(work->partitions[i]);
	args[DUE_PARTITIONS] = PointerGetDatum(construct_array(keys, (int) work->count,
														   INT4OID, sizeof(int32),
														   true, TYPALIGN_INT));
	args[DUE_NOW] = TimestampTzGetDatum(work->now);
	work->count = read_partitions(work->partitions,
								  DurableRun(&partitions_due, args, NULL,
											 SPI_OK_SELECT, 0));
	pfree(keys);
	return work->count;
}

static bool
partition_listed(const int32 *partitions, uint64 count, int32 partition)
{
	for (uint64 i = 0; i < count; i++)
		if (partitions[i] == partition)
			return true;
	return false;
}

/*
 * partitions_with_work
 *		Narrow the partitions to those where leases expired or progress
 *		stopped, and those whose parts were failing, so that a part mended
 *		runs again and leaves durable.status.  If that fails, it is shown as
 *		a part of its own and every partition is looked at, as without it.
 */
static void
partitions_with_work(int32 *partitions, uint64 *count, TimestampTz now)
{
	DueWork		work = {palloc(sizeof(int32) * Max(*count, 1)), *count, now};
	uint64		n;
	uint64		nfailing;
	char	  **failing;

	memcpy(work.partitions, partitions, sizeof(int32) * *count);
	if (*count == 0 ||
		!DurableRunPart("partitions with expired leases or stopped progress",
						narrow_to_due, &work, &n))
	{
		pfree(work.partitions);
		return;
	}
	failing = DurableFailingParts("partition ", &nfailing);
	for (uint64 i = 0; i < nfailing; i++)
	{
		int32		partition;

		if (sscanf(failing[i], "partition %d:", &partition) == 1 &&
			partition_listed(partitions, *count, partition) &&
			!partition_listed(work.partitions, n, partition))
			work.partitions[n++] = partition;
	}
	memcpy(partitions, work.partitions, sizeof(int32) * n);
	*count = n;
	pfree(work.partitions);
}

/*
 * DurableReconcileTick
 *		One tick of reconciliation: expired leases, stuck alarms, retention,
 *		the schedules that are due, each at most batch rows, then the retry
 *		tokens its retries owe, the rows of idle concurrency keys and the
 *		fair queues' tasks to admit.  Returns the largest count, so that a caller
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
	uint64		retired;
	uint64		admitted;
	uint64		budgets;
	int32	   *in_use;
	uint64		nin_use;
	static uint64 ticks = 0;

	DurablePartsBegin(now);
	partitions = partitions_in_use(&npartitions);
	in_use = palloc(sizeof(int32) * Max(npartitions, 1));
	nin_use = npartitions;
	memcpy(in_use, partitions, sizeof(int32) * npartitions);
	partitions_with_work(partitions, &npartitions, now);

	/*
	 * Retries owe their tokens until the end of the tick, so that the
	 * queues' buckets are locked from then to the commit only (budget.c).
	 */
	DurableBeginRetryTokens();
	settled = over_partitions(partitions, npartitions, ticks, "expired leases",
							  settle_partition, now, batch, callback, arg);
	alarms = over_partitions(partitions, npartitions, ticks, "stuck alarms",
							 alarm_partition, now, batch, callback, arg);
	ticks++;
	reviewed = DurableReviewUnrunnable(now, batch, callback, arg);
	removed = DurableApplyRetention(now, batch, callback, arg);
	/* on Citus, the coordinator enqueues what the schedules owe */
	if (!DurableCitusWorker())
		scheduled = DurableRunSchedules(now, batch, callback, arg);
	retired = DurableRetireConcurrencyKeys(in_use, nin_use, now, batch);
	admitted = DurableAdmitFairTasks(in_use, nin_use, now, batch);
	budgets = DurableMaintainBudgets(now, batch);
	(void) DurableSampleQueues(now);
	/* last: the queues' buckets stay locked from here to the commit */
	DurableTakeOwedTokens(now);
	DurableCountTick(GetCurrentTimestamp());
	pfree(partitions);
	pfree(in_use);
	return Max(Max(Max(settled, alarms), Max(removed, scheduled)),
			   Max(Max(reviewed, retired), Max(admitted, budgets)));
}

/*
 * DurableReconcileQueue
 *		One queue's share of a tick, for durable_reconcile(queue => ...): its
 *		expired leases and its stuck alarms, at most batch of each, and
 *		nothing of any other queue, even one that shares a partition; so a
 *		test or an operator sees only what it asked about.  It runs in the
 *		caller's transaction as a claim's settling does: a retry takes its
 *		token at once, and an error is the caller's, not a part of the tick
 *		shown in durable.status.  42704 for no such queue.  Returns the
 *		larger count.
 */
uint64
DurableReconcileQueue(const char *queue, int batch,
					  DurableSettledCallback callback, void *arg)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableQueue settings;
	uint64		settled = 0;
	uint64		alarms = 0;

	DurableQueueGet(queue, &settings);
	for (int i = 0; i < settings.partitions && settled < (uint64) batch; i++)
		settled += DurableReconcilePartition(DurableQueuePartition(&settings, i),
											 queue, now, batch - (int) settled,
											 callback, arg);
	for (int i = 0; i < settings.partitions && alarms < (uint64) batch; i++)
		alarms += DurableRaiseStuckAlarms(DurableQueuePartition(&settings, i),
										  queue, now, batch - (int) alarms,
										  callback, arg);
	return Max(settled, alarms);
}
