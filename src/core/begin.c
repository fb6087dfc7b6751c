/*-------------------------------------------------------------------------
 *
 * begin.c
 *	  A claimed task begun, and what a lease that ran out before its task
 *	  began costs: nothing (docs/design.md section 4).
 *
 * A worker that claims a batch holds tasks it has not started yet.  If it
 * crashes, the tasks it never began are not to blame: their leases run
 * out, and they go back ready with the attempt their claim counted given
 * back.  A task has begun under its lease when, since its claim, the
 * worker called durable_begin, changed its progress by a heartbeat, or
 * touched one of its steps.  A task that begins and then
 * kills its worker spends its attempts as before, so a poison task still
 * ends in the dead letters; and the attempts given back this way are
 * bounded (DURABLE_UNBEGUN_EXPIRIES), for a task that kills its worker
 * before it begins (in the client's own code, or under a worker that
 * never says so).
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "core/sql.h"
#include "utils/timestamp.h"

/* durable_begin: the task's queue, for the access check */
enum
{
	BEGUN_QUEUE,
	BEGUN_RESTRICTED,
	BEGUN_NCOLUMNS
};
static const DurableColumn begun_columns[BEGUN_NCOLUMNS] = {
	[BEGUN_QUEUE] = {"queue_name", TEXTOID},
	[BEGUN_RESTRICTED] = {"restricted", BOOLOID},
};

enum
{
	BEGIN_PARTITION,
	BEGIN_TASK_ID,
	BEGIN_FENCE,
	BEGIN_NOW,
	BEGIN_NPARAMS
};
static const DurableParam begin_params[BEGIN_NPARAMS] = {
	[BEGIN_PARTITION] = {"partition", INT4OID},
	[BEGIN_TASK_ID] = {"task_id", INT8OID},
	[BEGIN_FENCE] = {"fence", INT8OID},
	[BEGIN_NOW] = {"now", TIMESTAMPTZOID},
};
static DurableStatement begin_task = {
	.name = "begin",
	.sql = "WITH u AS (UPDATE durable.live_tasks SET began_at = $now"
	" WHERE partition_key = $partition AND task_id = $task_id"
	" AND fence = $fence AND state = 'running'"
	" RETURNING queue_name)"
	" SELECT u.queue_name, q.restricted FROM u" QUEUE_OF_U,
	DURABLE_PARAMS(begin_params),
	DURABLE_COLUMNS(begun_columns),
};

/*
 * The decision on a lease that ran out with no step in doubt: when the
 * task has not begun since its claim, and has not come back unbegun too
 * often, it is counted and the row returned; otherwise no row.
 */
enum
{
	UNBEGUN_PARTITION,
	UNBEGUN_TASK_ID,
	UNBEGUN_LIMIT,
	UNBEGUN_NPARAMS
};
static const DurableParam unbegun_params[UNBEGUN_NPARAMS] = {
	[UNBEGUN_PARTITION] = {"partition", INT4OID},
	[UNBEGUN_TASK_ID] = {"task_id", INT8OID},
	[UNBEGUN_LIMIT] = {"limit", INT4OID},
};
static const DurableColumn unbegun_columns[] = {
	{"unbegun_expiries", INT4OID},
};
static DurableStatement count_unbegun = {
	.name = "count_unbegun",
	.sql = "UPDATE durable.live_tasks t SET unbegun_expiries = t.unbegun_expiries + 1"
	" WHERE t.partition_key = $partition AND t.task_id = $task_id"
	" AND t.unbegun_expiries < $limit"
	" AND (t.began_at IS NULL OR t.began_at < t.claimed_at)"
	" AND t.progress_at <= t.claimed_at"
	" AND NOT EXISTS (SELECT FROM durable.live_steps s"
	"  WHERE s.partition_key = $partition AND s.task_id = $task_id"
	"  AND s.updated_at >= t.claimed_at)"
	" RETURNING t.unbegun_expiries",
	DURABLE_PARAMS(unbegun_params),
	DURABLE_COLUMNS(unbegun_columns),
};

/*
 * DurableBeginTask
 *		Mark a task held under fence begun: from now on, a lease that runs
 *		out spends its attempt.  Raises 55U01 for a stale fence, 42501 for
 *		a role the task's queue does not let work.
 */
void
DurableBeginTask(int64 task_id, int64 fence)
{
	Datum		args[BEGIN_NPARAMS];
	DurableResult res;

	args[BEGIN_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[BEGIN_TASK_ID] = Int64GetDatum(task_id);
	args[BEGIN_FENCE] = Int64GetDatum(fence);
	args[BEGIN_NOW] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	res = DurableRun(&begin_task, args, NULL, SPI_OK_SELECT, 0);
	DurableCheckFencedWrite(res, task_id, fence, BEGUN_QUEUE, BEGUN_RESTRICTED);
}

/*
 * DurableCountUnbegunExpiry
 *		For a locked running task whose lease ran out with no step in
 *		doubt: whether it never began under that lease, and so goes back
 *		without spending its attempt; counted when it does.  Sets *returned
 *		to how many times it has, with this one.
 */
bool
DurableCountUnbegunExpiry(const DurableTask *task, int32 *returned)
{
	Datum		args[UNBEGUN_NPARAMS];
	DurableResult res;

	args[UNBEGUN_PARTITION] = Int32GetDatum(task->partition);
	args[UNBEGUN_TASK_ID] = Int64GetDatum(task->task_id);
	args[UNBEGUN_LIMIT] = Int32GetDatum(DURABLE_UNBEGUN_EXPIRIES);
	res = DurableRun(&count_unbegun, args, NULL, SPI_OK_UPDATE_RETURNING, 0);
	if (res.rows == 0)
		return false;
	*returned = DurableGetInt32(res, 0, 0);
	return true;
}
