/*-------------------------------------------------------------------------
 *
 * tick.c
 *	  One tick of reconciliation, and durable_reconcile() that runs it.
 *
 * A tick is what the background worker runs in one transaction and
 * durable_reconcile() exposes: expired leases through the recovery table
 * (reconcile.c), stuck alarms, retention and history (retention.c), the
 * schedules that are due (schedule.c) and the retry tokens that the tick's
 * retries owe (budget.c), each a bounded batch.  Every part runs in a
 * subtransaction of its own (part.c): a partition, a day of history, a
 * table, a schedule or a queue that fails is skipped for this tick and
 * shown in durable.status, and every other part goes on, lease recovery
 * first.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

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

/* the partitions in use, in a palloc'd array */
static int32 *
partitions_in_use(uint64 *count)
{
	int32	   *partitions;

	/*
	 * On Citus, each node's reconciler works on the shards it holds; a call
	 * of durable_reconcile() works on all of them, wherever it runs.
	 */
	*count = DurableExecuteStmt(DurableDistributed() && MyBackendType == B_BG_WORKER ?
							STMT_PARTITIONS_LOCAL : STMT_PARTITIONS,
							NULL, NULL, SPI_OK_SELECT, 0);
	partitions = palloc(sizeof(int32) * Max(*count, 1));
	for (uint64 i = 0; i < *count; i++)
		partitions[i] = (int32) DurableResultInt64(i, 1);
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
	removed = DurableApplyRetention(now, batch, callback, arg);
	/* on Citus, the coordinator enqueues what the schedules owe */
	if (!DurableCitusWorker())
		scheduled = DurableRunSchedules(now, batch, callback, arg);
	DurableTakeOwedTokens(now);
	pfree(partitions);
	return Max(Max(settled, alarms), Max(removed, scheduled));
}

static void
report_settled(int64 task_id, const char *action, void *arg)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	/* a day of history dropped whole names no task */
	values[0] = Int64GetDatum(task_id);
	nulls[0] = task_id == 0;
	values[1] = CStringGetTextDatum(action);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * durable_reconcile(batch int = 1000) RETURNS TABLE(task_id bigint, action text)
 *
 * One tick of reconciliation, as the background worker runs it: settles up
 * to batch expired leases, raises up to batch stuck alarms, and removes up
 * to batch finished tasks past retention, and enqueues the occurrences of
 * up to batch schedules that are due; returns each task with what was done
 * ('removed', 'stuck_alarm' and 'scheduled' besides the recovery actions).
 * A part that fails is skipped and shown in durable.status, not raised.
 */
PG_FUNCTION_INFO_V1(durable_reconcile);
Datum
durable_reconcile(PG_FUNCTION_ARGS)
{
	int32		batch = DurableBatchArg(fcinfo, 0);

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	DurableReconcileTick(batch, report_settled, fcinfo->resultinfo);
	SPI_finish();
	return (Datum) 0;
}
