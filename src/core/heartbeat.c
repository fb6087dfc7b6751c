/*-------------------------------------------------------------------------
 *
 * heartbeat.c
 *	  Heartbeats: a lease renewed, one task's or a batch's.
 *
 * A heartbeat extends the lease of a task that is still running under the
 * fence of its claim (claim.c), from the transaction start time; one task's
 * also records its progress, which the stuck alarms watch (reconcile.c).
 * The SQL functions are api/tasks.c's; on Citus a batch goes shard by
 * shard (sharded.c).
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "core/sql.h"
#include "utils/array.h"
#include "utils/timestamp.h"

/* the new lease end of a heartbeat, and the task's queue */
enum
{
	HEARTBEAT_LEASE_UNTIL,
	HEARTBEAT_QUEUE,
	HEARTBEAT_RESTRICTED,
	HEARTBEAT_NCOLUMNS
};

static const DurableColumn heartbeat_columns[HEARTBEAT_NCOLUMNS] = {
	[HEARTBEAT_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID},
	[HEARTBEAT_QUEUE] = {"queue_name", TEXTOID},
	[HEARTBEAT_RESTRICTED] = {"restricted", BOOLOID},
};

enum
{
	HEARTBEAT_PARTITION,
	HEARTBEAT_TASK_ID,
	HEARTBEAT_NOW,
	HEARTBEAT_LEASE,
	HEARTBEAT_PROGRESS,
	HEARTBEAT_FENCE,
	HEARTBEAT_NPARAMS
};
static const DurableParam heartbeat_params[HEARTBEAT_NPARAMS] = {
	[HEARTBEAT_PARTITION] = {"partition", INT4OID},
	[HEARTBEAT_TASK_ID] = {"task_id", INT8OID},
	[HEARTBEAT_NOW] = {"now", TIMESTAMPTZOID},
	[HEARTBEAT_LEASE] = {"lease", INTERVALOID},
	[HEARTBEAT_PROGRESS] = {"progress", TEXTOID},
	[HEARTBEAT_FENCE] = {"fence", INT8OID},
};
static DurableStatement heartbeat = {
	.name = "heartbeat",
	.sql = "WITH u AS (UPDATE durable.live_tasks SET"
	RENEW_LEASE("") ","
	" progress_at = CASE WHEN $progress::text IS NOT NULL"
	"  AND $progress::text IS DISTINCT FROM progress THEN $now ELSE progress_at END,"
	" progress = COALESCE($progress, progress)"
	" WHERE partition_key = $partition"
	" AND task_id = $task_id"
	" AND fence = $fence AND state = 'running'"
	" RETURNING lease_until, queue_name)"
	" SELECT u.lease_until, u.queue_name, q.restricted FROM u" QUEUE_OF_U,
	DURABLE_PARAMS(heartbeat_params),
	DURABLE_COLUMNS(heartbeat_columns),
};

/*
 * DurableHeartbeatTask
 *		Extend the lease of a task held under fence to now + lease (its
 *		current lease when NULL) and record progress (when not NULL);
 *		progress_at moves only when progress changes.  Returns the new
 *		lease end.  Raises 55U01 for a stale fence, 42501 for a role the
 *		task's queue does not let work.
 */
TimestampTz
DurableHeartbeatTask(int64 task_id, int64 fence, text *progress, Interval *lease)
{
	DurableResult res;
	Datum		args[HEARTBEAT_NPARAMS];
	char		nulls[HEARTBEAT_NPARAMS] = {' ', ' ', ' ', ' ', ' ', ' '};
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	TimestampTz lease_until;
	bool		isnull;

	if (!DurableDistributed())
	{
		DurableMoved moved;

		switch (DurableHeartbeatDirectly(task_id, fence, progress, lease, now,
										 &lease_until, &moved))
		{
			case DURABLE_DIRECT_DONE:
				DurableCheckTaskAccess(task_id, moved.queue, moved.restricted);
				return lease_until;
			case DURABLE_DIRECT_NONE:
				DurableReportRefusal(task_id, fence);
				break;
			case DURABLE_DIRECT_BY_STATEMENT:
				break;
		}
	}
	args[HEARTBEAT_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[HEARTBEAT_TASK_ID] = Int64GetDatum(task_id);
	args[HEARTBEAT_NOW] = TimestampTzGetDatum(now);
	args[HEARTBEAT_LEASE] = PointerGetDatum(lease);
	nulls[HEARTBEAT_LEASE] = lease ? ' ' : 'n';
	args[HEARTBEAT_PROGRESS] = PointerGetDatum(progress);
	nulls[HEARTBEAT_PROGRESS] = progress ? ' ' : 'n';
	args[HEARTBEAT_FENCE] = Int64GetDatum(fence);
	res = DurableRun(&heartbeat, args, nulls, SPI_OK_SELECT, 0);
	DurableCheckFencedWrite(res, task_id, fence, HEARTBEAT_QUEUE, HEARTBEAT_RESTRICTED);
	lease_until = DatumGetTimestampTz(DurableGetDatum(res, 0, HEARTBEAT_LEASE_UNTIL, &isnull));
	return lease_until;
}

/* a row per task of a batch heartbeat, in the order given */
enum
{
	RENEWED_TASK_ID,
	RENEWED_QUEUE,
	RENEWED_RESTRICTED,
	RENEWED_LEASE_UNTIL,
	RENEWED_NCOLUMNS
};

static const DurableColumn renewed_columns[RENEWED_NCOLUMNS] = {
	[RENEWED_TASK_ID] = {"task_id", INT8OID},
	[RENEWED_QUEUE] = {"queue_name", TEXTOID},
	[RENEWED_RESTRICTED] = {"restricted", BOOLOID},
	[RENEWED_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID},
};

enum
{
	BATCH_TASK_IDS,
	BATCH_FENCES,
	BATCH_NOW,
	BATCH_LEASE,
	BATCH_NPARAMS
};
static const DurableParam heartbeat_batch_params[BATCH_NPARAMS] = {
	[BATCH_TASK_IDS] = {"task_ids", INT8ARRAYOID},
	[BATCH_FENCES] = {"fences", INT8ARRAYOID},
	[BATCH_NOW] = {"now", TIMESTAMPTZOID},
	[BATCH_LEASE] = {"lease", INTERVALOID},
};
static DurableStatement heartbeat_batch = {
	.name = "heartbeat_batch",
	.sql = "WITH i AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($task_ids::int8[]),"
	"  pg_catalog.unnest($fences::int8[])) WITH ORDINALITY AS i(task_id, fence, n)),"
	" u AS (UPDATE durable.live_tasks t SET"
	RENEW_LEASE("t.")
	"  FROM i WHERE t.partition_key = (i.task_id & " CppAsString2(DURABLE_PARTITION_MASK) ")::int4"
	"  AND t.task_id = i.task_id AND t.fence = i.fence AND t.state = 'running'"
	"  RETURNING t.task_id, t.fence, t.lease_until, t.queue_name)"
	" SELECT i.task_id, u.queue_name, q.restricted, u.lease_until"
	" FROM i LEFT JOIN u ON u.task_id = i.task_id AND u.fence = i.fence"
	" LEFT JOIN durable.queues q ON q.queue_name = u.queue_name"
	" ORDER BY i.n",
	DURABLE_PARAMS(heartbeat_batch_params),
	DURABLE_COLUMNS(renewed_columns),
};

/*
 * DurableHeartbeatBatch
 *		Extend the lease of every task of a batch of n (at least one) that
 *		is still running under its fence, in one statement; for each task,
 *		in the order given, its id, whether the caller still held it, and
 *		its new lease end, into task_ids, held and until, which the caller
 *		allocates.  Progress is not touched.  Raises 42501 (and renews
 *		nothing) when a task's queue does not let the caller's role work,
 *		whether the caller held the task or not, and for an unknown task
 *		where some restricted queue does not (DurableCheckBatchAccess).
 */
void
DurableHeartbeatBatch(ArrayType *ids, ArrayType *fences, Interval *lease,
					  int n, int64 *task_ids, TimestampTz *until, bool *held)
{
	DurableResult res;
	Datum		args[BATCH_NPARAMS];
	char		nulls[BATCH_NPARAMS] = {' ', ' ', ' ', ' '};
	uint64		rows;
	char	  **queues;
	bool	   *restricted;

	/* on Citus, shard by shard: this statement would run on every shard */
	if (DurableDistributed())
	{
		DurableHeartbeatBatchSharded(ids, fences, lease, n, task_ids, until, held);
		return;
	}
	args[BATCH_TASK_IDS] = PointerGetDatum(ids);
	args[BATCH_FENCES] = PointerGetDatum(fences);
	args[BATCH_NOW] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args[BATCH_LEASE] = PointerGetDatum(lease);
	nulls[BATCH_LEASE] = lease ? ' ' : 'n';
	res = DurableRun(&heartbeat_batch, args, nulls, SPI_OK_SELECT, 0);
	rows = res.rows;
	if (rows != (uint64) n)
		elog(ERROR, "batch heartbeat returned %llu rows for %d tasks",
			 (unsigned long long) rows, n);
	queues = palloc(sizeof(char *) * rows);
	restricted = palloc(sizeof(bool) * rows);
	for (uint64 r = 0; r < rows; r++)
	{
		bool		isnull;
		Datum		d = DurableGetDatum(res, r, RENEWED_LEASE_UNTIL, &isnull);

		task_ids[r] = DurableGetInt64(res, r, RENEWED_TASK_ID);
		held[r] = !isnull;
		until[r] = isnull ? 0 : DatumGetTimestampTz(d);
		queues[r] = isnull ? NULL : DurableGetText(res, r, RENEWED_QUEUE);
		restricted[r] = !DurableGetIsNull(res, r, RENEWED_RESTRICTED) &&
			DurableGetBool(res, r, RENEWED_RESTRICTED);
	}
	DurableCheckBatchAccess(task_ids, queues, restricted, held, n);
}
