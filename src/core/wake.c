/*-------------------------------------------------------------------------
 *
 * wake.c
 *	  Waking a waiting task: the wait an event or the last child of a join
 *	  ends (an emit in event.c, a finish in move.c).
 *
 * A task waits on one thing at a time, in the row of its waits (wait.c).
 * What it waits for comes from another task's transaction, on another
 * partition, on a Citus cluster perhaps on another node: each statement
 * here goes to the one partition it names.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "core/sql.h"

/* the queue of a task woken, and whether it announces ready work */
enum
{
	WOKEN_QUEUE,
	WOKEN_NOTIFY,
	WOKEN_NCOLUMNS
};
static const DurableColumn woken_columns[WOKEN_NCOLUMNS] = {
	[WOKEN_QUEUE] = {"queue_name", TEXTOID},
	[WOKEN_NOTIFY] = {"notify", BOOLOID},
};

/*
 * One task's wait, still waiting and not past its deadline, ends now ($ending:
 * what its entry gains); a waiting task is ready at once.  The deadline is
 * compared in a query of its own: Citus refuses a cast from text to time,
 * which depends on settings, in an UPDATE.  On Citus, one statement per
 * table, each on the task's shard.
 */
#define WAKE_WAITING \
	"SELECT partition_key, task_id FROM durable.live_tasks" \
	" WHERE partition_key = $partition AND task_id = $task_id" \
	" AND waits -> $name ->> 'status' = 'waiting'" \
	" AND (waits -> $name ->> 'until' IS NULL" \
	"  OR " WAIT_UNTIL("waits -> $name") " > $now)" \
	" FOR UPDATE"
#define WAKE_SET \
	" SET waits = pg_catalog.jsonb_set(t.waits, ARRAY[$name]," \
	"  (t.waits -> $name) || $ending)," \
	" run_at = CASE WHEN t.state = 'waiting' THEN $now ELSE t.run_at END," \
	" version = t.version + 1"
#define WAKE_QUEUE(queue) \
	"SELECT " queue "::text AS queue_name, q.notify IS TRUE AS notify" \
	" FROM (SELECT) x LEFT JOIN durable.queues q ON q.queue_name = " queue

enum
{
	WAKE_PARTITION,
	WAKE_TASK_ID,
	WAKE_NAME,
	WAKE_ENDING,
	WAKE_NOW,
	WAKE_ROLE,
	WAKE_DETAIL,
	WAKE_NPARAMS
};
static const DurableParam wait_wake_params[WAKE_NPARAMS] = {
	[WAKE_PARTITION] = {"partition", INT4OID},
	[WAKE_TASK_ID] = {"task_id", INT8OID},
	[WAKE_NAME] = {"name", TEXTOID},
	[WAKE_ENDING] = {"ending", JSONBOID},
	[WAKE_NOW] = {"now", TIMESTAMPTZOID},
	[WAKE_ROLE] = {"role", TEXTOID},
	[WAKE_DETAIL] = {"detail", JSONBOID},
};
static DurableStatement wait_wake = {
	.name = "wait_wake",
	.sql = "WITH c AS (" WAKE_WAITING "),"
	" u AS (UPDATE durable.live_tasks t" WAKE_SET
	"  FROM c WHERE t.partition_key = c.partition_key AND t.task_id = c.task_id"
	"  RETURNING t.partition_key, t.task_id, t.version, t.state, t.fence,"
	"  t.queue_name),"
	" e AS (INSERT INTO durable.event_log (partition_key, task_id, seq, state,"
	"  fence, at, kind, actor, detail, role)"
	"  SELECT partition_key, task_id, version, state, fence, $now, 'woken', $role,"
	"  $detail, $role FROM u)"
	" SELECT u.queue_name, q.notify IS TRUE AS notify FROM u" QUEUE_OF_U,
	DURABLE_PARAMS(wait_wake_params),
	DURABLE_COLUMNS(woken_columns),
	.nsplit = 4,
	.split = {
		{WAKE_WAITING, DURABLE_SPLIT_NO_INPUT, true},
		/* $8, $9 (past the parameters): partition_key, task_id */
		{"UPDATE durable.live_tasks t" WAKE_SET
			" WHERE t.partition_key = $8 AND t.task_id = $9"
			" RETURNING t.partition_key, t.task_id, t.version, t.state, t.fence,"
			" t.queue_name",
		0, true},
		/* $8..$13: partition_key, task_id, version, state, fence, queue_name */
		{"INSERT INTO durable.event_log (partition_key, task_id, seq, state,"
			" fence, at, kind, actor, detail, role)"
			" VALUES ($8, $9, $10, $11, $12, $now, 'woken', $role, $detail, $role)"
			" RETURNING $13::text AS queue_name",
		1, true},
		/* $8: queue_name */
		{WAKE_QUEUE("$8"), 2, true},
	},
};

/*
 * DurableWakeWait
 *		What a task's wait of that name waits for has come (an event, the
 *		last child of a join): unless the wait has ended or is past its
 *		deadline, its entry gains ending (DurableWaitEnding's, or an empty
 *		object for a join, whose replay reads the children itself), a
 *		waiting task becomes ready now, the event says why (detail), and the
 *		task's queue is told at commit, as an enqueue of ready work does.
 *		True when it woke the task.
 */
bool
DurableWakeWait(int64 task_id, const char *name, Jsonb *ending, Jsonb *detail,
				TimestampTz now)
{
	DurableResult res;
	Datum		args[WAKE_NPARAMS];
	const char *queue;

	args[WAKE_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[WAKE_TASK_ID] = Int64GetDatum(task_id);
	args[WAKE_NAME] = CStringGetTextDatum(name);
	args[WAKE_ENDING] = JsonbPGetDatum(ending);
	args[WAKE_NOW] = TimestampTzGetDatum(now);
	args[WAKE_ROLE] = CStringGetTextDatum(DurableCallerName());
	args[WAKE_DETAIL] = JsonbPGetDatum(detail);
	res = DurableRun(&wait_wake, args, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 0)
		return false;
	queue = DurableGetText(res, 0, WOKEN_QUEUE);
	if (DurableGetBool(res, 0, WOKEN_NOTIFY))
		Async_Notify(DURABLE_READY_CHANNEL, queue);
	DurableCount(queue, DURABLE_COUNT_WAKEUPS, 1);
	return true;
}

/* a child has finished: its spawn in its parent's row says so */
enum
{
	MARK_PARTITION,
	MARK_TASK_ID,
	MARK_CHILD_ID,
	MARK_NPARAMS
};
static const DurableParam parent_mark_params[MARK_NPARAMS] = {
	[MARK_PARTITION] = {"partition", INT4OID},
	[MARK_TASK_ID] = {"task_id", INT8OID},
	[MARK_CHILD_ID] = {"child_id", INT8OID},
};
static DurableStatement parent_mark = {
	.name = "parent_mark",
	.sql = "WITH s AS (SELECT w.key FROM durable.live_tasks t,"
	"  pg_catalog.jsonb_each(t.waits) w"
	"  WHERE t.partition_key = $partition AND t.task_id = $task_id"
	"  AND w.value ->> 'kind' = 'spawn'"
	"  AND (w.value ->> 'task_id')::int8 = $child_id)"
	" UPDATE durable.live_tasks t SET waits = pg_catalog.jsonb_set(t.waits,"
	"  ARRAY[s.key], (t.waits -> s.key) || '{\"child_finished\": true}')"
	" FROM s WHERE t.partition_key = $partition AND t.task_id = $task_id",
	DURABLE_PARAMS(parent_mark_params),
};

/*
 * the joins a task waits in, each with the children it names that have
 * no mark (unfinished, or finished before 0.8.0, which marked nothing)
 */
enum
{
	JOIN_NAME,
	JOIN_UNMARKED,
	JOIN_NCOLUMNS
};
static const DurableColumn join_columns[JOIN_NCOLUMNS] = {
	[JOIN_NAME] = {"name", TEXTOID},
	[JOIN_UNMARKED] = {"unmarked", INT8ARRAYOID},
};
enum
{
	JOINS_PARTITION,
	JOINS_TASK_ID,
	JOINS_NPARAMS
};
static const DurableParam parent_joins_params[JOINS_NPARAMS] = {
	[JOINS_PARTITION] = {"partition", INT4OID},
	[JOINS_TASK_ID] = {"task_id", INT8OID},
};
static DurableStatement parent_joins = {
	.name = "parent_joins",
	.sql = "SELECT j.key AS name, ARRAY(SELECT (s.value ->> 'task_id')::int8"
	"  FROM pg_catalog.jsonb_each(t.waits) s"
	"  WHERE s.value ->> 'kind' = 'spawn' AND NOT s.value ? 'child_finished'"
	"  AND (pg_catalog.jsonb_typeof(j.value -> 'args' -> 'children') = 'null'"
	"   OR j.value -> 'args' -> 'children' ? s.key)) AS unmarked"
	" FROM durable.live_tasks t, pg_catalog.jsonb_each(t.waits) j"
	" WHERE t.partition_key = $partition AND t.task_id = $task_id"
	" AND t.state = 'waiting'"
	" AND j.value ->> 'kind' = 'join' AND j.value ->> 'status' = 'waiting'",
	DURABLE_PARAMS(parent_joins_params),
	DURABLE_COLUMNS(join_columns),
};

enum
{
	LIVE_PARTITION,
	LIVE_TASK_ID,
	LIVE_NPARAMS
};
static const DurableParam child_live_params[LIVE_NPARAMS] = {
	[LIVE_PARTITION] = {"partition", INT4OID},
	[LIVE_TASK_ID] = {"task_id", INT8OID},
};
static DurableStatement child_live = {
	.name = "child_live",
	.sql = "SELECT FROM durable.live_tasks"
	" WHERE partition_key = $partition AND task_id = $task_id",
	DURABLE_PARAMS(child_live_params),
};

/* whether none of the children a join names without a mark is live */
static bool
unmarked_finished(ArrayType *unmarked)
{
	Datum	   *ids;
	int			n;

	deconstruct_array(unmarked, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
					  TYPALIGN_DOUBLE, &ids, NULL, &n);
	for (int i = 0; i < n; i++)
	{
		Datum		key[LIVE_NPARAMS];

		key[LIVE_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(DatumGetInt64(ids[i])));
		key[LIVE_TASK_ID] = ids[i];
		if (DurableRun(&child_live, key, NULL, SPI_OK_SELECT, 1).rows > 0)
			return false;
	}
	return true;
}

/*
 * DurableWakeParent
 *		A child has finished: mark it so in its parent's row, and wake the
 *		parent if it waits in a join whose children have now all finished.
 *
 *		The mark is an update of the parent's row, whatever its state.  A
 *		parent that is registering its join holds that row, so this waits
 *		for the join to commit and then sees it; a join that comes later
 *		waits for this transaction and then sees the mark.  The joins are
 *		read in a statement of its own, with a snapshot taken after the row
 *		was had.  (An update rather than a lock, so that a transaction under
 *		REPEATABLE READ whose snapshot missed a concurrent change fails to
 *		serialize instead of missing it.)
 */
void
DurableWakeParent(int64 parent_id, int64 child_id, TimestampTz now)
{
	DurableResult res;
	Datum		mark[MARK_NPARAMS];
	Datum		joins[JOINS_NPARAMS];
	uint64		n;
	char	  **names;
	ArrayType **unmarked;

	mark[MARK_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(parent_id));
	mark[MARK_TASK_ID] = Int64GetDatum(parent_id);
	mark[MARK_CHILD_ID] = Int64GetDatum(child_id);
	res = DurableRun(&parent_mark, mark, NULL, SPI_OK_UPDATE, 0);
	if (res.rows == 0)
		return;
	joins[JOINS_PARTITION] = mark[MARK_PARTITION];
	joins[JOINS_TASK_ID] = mark[MARK_TASK_ID];
	res = DurableRun(&parent_joins, joins, NULL, SPI_OK_SELECT, 0);
	n = res.rows;
	names = palloc(sizeof(char *) * Max(n, 1));
	unmarked = palloc(sizeof(ArrayType *) * Max(n, 1));
	for (uint64 r = 0; r < n; r++)
	{
		bool		isnull;

		names[r] = DurableGetText(res, r, JOIN_NAME);
		unmarked[r] = DatumGetArrayTypePCopy(DurableGetDatum(res, r, JOIN_UNMARKED,
															 &isnull));
	}
	for (uint64 r = 0; r < n; r++)
	{
		DurableDetail nothing;
		DurableDetail detail;

		if (!unmarked_finished(unmarked[r]))
			continue;
		/* the join's entry stays as it is: its replay reads the children */
		DurableDetailInit(&nothing);
		DurableDetailInit(&detail);
		DurableDetailText(&detail, "wait", names[r]);
		DurableDetailInt(&detail, "child", child_id);
		(void) DurableWakeWait(parent_id, names[r], DurableDetailFinish(&nothing),
							   DurableDetailFinish(&detail), now);
	}
}
