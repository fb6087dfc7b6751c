/*-------------------------------------------------------------------------
 *
 * heartbeat_direct.c
 *	  One task's heartbeat on one server without a statement: its row
 *	  updated by its key through the table and index access methods
 *	  (store/take.c).
 *
 * It takes the row heartbeat.c's statement would take (the task's key, its
 * fence and the running state, tested again in the row's last version
 * after waiting for its lock, as UPDATE does) and changes it as that
 * statement's SET clause (RENEW_LEASE and the progress) does.  The two
 * must change together: sql/direct_moves.sql compares what both leave.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"

/* the columns of durable.live_tasks a heartbeat reads, then those it writes */
enum
{
	BEATING_QUEUE_NAME,
	BEATING_FENCE,
	BEATING_STATE,
	BEATING_LEASE,				/* the first one written */
	BEATING_LEASE_UNTIL,
	BEATING_HEARTBEAT_AT,
	BEATING_PROGRESS,
	BEATING_PROGRESS_AT,
	BEATING_NCOLUMNS
};

static const DurableColumn beating_columns[BEATING_NCOLUMNS] = {
	[BEATING_QUEUE_NAME] = {"queue_name", TEXTOID},
	[BEATING_FENCE] = {"fence", INT8OID},
	/* durable.task_state, an enum whose OID each installation chooses */
	[BEATING_STATE] = {"state", InvalidOid},
	[BEATING_LEASE] = {"lease", INTERVALOID},
	[BEATING_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID},
	[BEATING_HEARTBEAT_AT] = {"heartbeat_at", TIMESTAMPTZOID},
	[BEATING_PROGRESS] = {"progress", TEXTOID},
	[BEATING_PROGRESS_AT] = {"progress_at", TIMESTAMPTZOID},
};

static DurableTake heartbeat_take = {
	.table = {.schema = "durable", .name = "live_tasks", DURABLE_COLUMNS(beating_columns)},
	.index = NULL,				/* the primary key */
	.keys = {.nkeys = 2},		/* partition_key, task_id */
	.nread = BEATING_LEASE,
	.lockmode = LockTupleNoKeyExclusive,	/* as UPDATE locks it */
	.wait = LockWaitBlock,
};

/* a heartbeat's values, as the parameters of its statement hold them */
typedef struct HeartbeatValues
{
	int64		fence;
	TimestampTz now;
	Interval   *lease;			/* NULL keeps the task's */
	text	   *progress;		/* NULL keeps the task's */
} HeartbeatValues;

/* the statement's WHERE clause, beyond the task's key */
static bool
beating(const Datum *values, const bool *isnull, void *arg)
{
	HeartbeatValues *heartbeat = arg;
	Oid			state_type = heartbeat_take.table.atttypids[BEATING_STATE];

	return DatumGetInt64(values[BEATING_FENCE]) == heartbeat->fence &&
		values[BEATING_STATE] == DurableTaskStateValue(state_type, DURABLE_TASK_RUNNING);
}

/* RENEW_LEASE, and the progress, which moves progress_at when it changes */
static void
renew_lease(Datum *values, bool *isnull, void *arg)
{
	HeartbeatValues *heartbeat = arg;
	Interval   *lease = heartbeat->lease;

	if (lease == NULL && !isnull[BEATING_LEASE])
		lease = DatumGetIntervalP(values[BEATING_LEASE]);
	if (lease != NULL)
	{
		values[BEATING_LEASE] = IntervalPGetDatum(lease);
		isnull[BEATING_LEASE] = false;
		values[BEATING_LEASE_UNTIL] = TimestampTzGetDatum(DurableTimePlus(heartbeat->now, lease));
	}
	/* now + NULL */
	isnull[BEATING_LEASE_UNTIL] = lease == NULL;
	values[BEATING_HEARTBEAT_AT] = TimestampTzGetDatum(heartbeat->now);
	isnull[BEATING_HEARTBEAT_AT] = false;
	if (heartbeat->progress != NULL)
	{
		Datum		progress = PointerGetDatum(heartbeat->progress);

		if (isnull[BEATING_PROGRESS] ||
			!DatumGetBool(DirectFunctionCall2Coll(texteq, DEFAULT_COLLATION_OID,
												  progress, values[BEATING_PROGRESS])))
		{
			values[BEATING_PROGRESS_AT] = TimestampTzGetDatum(heartbeat->now);
			isnull[BEATING_PROGRESS_AT] = false;
		}
		values[BEATING_PROGRESS] = progress;
		isnull[BEATING_PROGRESS] = false;
	}
}

/*
 * DurableHeartbeatDirectly
 *		Renew the lease of task_id held under fence as heartbeat.c's
 *		statement would, from now: the new lease end, the task's queue and
 *		whether it is restricted into lease_until and moved (copied into the
 *		current memory context).  DURABLE_DIRECT_NONE when the task is not
 *		running under that fence, DURABLE_DIRECT_BY_STATEMENT when the
 *		statement must renew it.
 */
DurableDirectResult
DurableHeartbeatDirectly(int64 task_id, int64 fence, text *progress, Interval *lease,
						 TimestampTz now, TimestampTz *lease_until, DurableMoved *moved)
{
	HeartbeatValues heartbeat = {fence, now, lease, progress};
	Datum		keys[2];
	Datum		values[BEATING_NCOLUMNS];
	bool		isnull[BEATING_NCOLUMNS];
	DurableDirectResult result;

	keys[0] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	keys[1] = Int64GetDatum(task_id);
	result = DurableTakeFirst(&heartbeat_take, keys, beating, renew_lease, &heartbeat,
							  values, isnull);
	if (result != DURABLE_DIRECT_DONE)
		return result;
	*lease_until = isnull[BEATING_LEASE_UNTIL] ? 0 :
		DatumGetTimestampTz(values[BEATING_LEASE_UNTIL]);
	moved->queue = TextDatumGetCString(values[BEATING_QUEUE_NAME]);
	moved->owner = NULL;
	moved->restricted = DurableQueueRestricted(moved->queue);
	return result;
}
