/*-------------------------------------------------------------------------
 *
 * flow_keys.c
 *	  Calls coalesced by a key into one task: debounce and throttle.  The
 *	  SQL functions are api/flow.c's.
 *
 * A key's row in durable.flow_keys names the task its calls made.  Both
 * are in the key's partition of the queue (a hash of the key, as for an
 * idempotency key), so on Citus a call stays on one node.  A call takes
 * the key's row first, by an upsert that waits for a concurrent call of
 * the key to commit or roll back and then sees what it did: the calls of
 * a key take turns.  Under REPEATABLE READ and SERIALIZABLE a call after
 * one that committed since its snapshot is refused with 40001, as any
 * update of a row changed since then.
 *
 * A throttle's task stays the key's for the period after its call: a call
 * within it returns that task, a call after it makes a new one.  A
 * debounce's task stays the key's until its first claim: a call moves its
 * run_at to delay after the call, never past max_wait after the first
 * call, and in trailing mode gives it the call's payload.  That update
 * takes the task's row lock and tests again that the task is still ready
 * and never claimed (its fence is 0: a release gives the attempt back,
 * not the fence), so a call that comes with a claim either delays the
 * task before the claim takes it or makes a new one after.  A change of
 * the waiting task's run_at and payload is no event of the task: the
 * key's row counts the calls.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"
#include "core/row.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/*
 * The key's row, taken by a call (flow_key_take) or given the task the
 * call made (flow_key_task, which takes the task's id too).
 */
enum
{
	FLOW_PARTITION,
	FLOW_QUEUE,
	FLOW_KIND,
	FLOW_KEY,
	FLOW_NOW,
	FLOW_EXPIRES_AT,
	FLOW_TASK_ID,
	FLOW_NPARAMS
};
#define FLOW_KEY_PARAMS \
	[FLOW_PARTITION] = {"partition", INT4OID}, \
	[FLOW_QUEUE] = {"queue", TEXTOID}, \
	[FLOW_KIND] = {"kind", TEXTOID}, \
	[FLOW_KEY] = {"key", TEXTOID}, \
	[FLOW_NOW] = {"now", TIMESTAMPTZOID}, \
	[FLOW_EXPIRES_AT] = {"expires_at", TIMESTAMPTZOID}
static const DurableParam flow_key_params[FLOW_TASK_ID] = {
	FLOW_KEY_PARAMS,
};
static const DurableParam flow_key_task_params[FLOW_NPARAMS] = {
	FLOW_KEY_PARAMS,
	[FLOW_TASK_ID] = {"task_id", INT8OID},
};

/* what the key's row says: its task (NULL for a new row) and first call */
enum
{
	TAKEN_TASK_ID,
	TAKEN_FIRST_AT,
	TAKEN_NCOLUMNS
};
static const DurableColumn taken_columns[TAKEN_NCOLUMNS] = {
	[TAKEN_TASK_ID] = {"task_id", INT8OID},
	[TAKEN_FIRST_AT] = {"first_at", TIMESTAMPTZOID},
};

/* the key's row, made or locked, with this call counted */
static DurableStatement flow_key_take = {
	.name = "flow_key_take",
	.sql = "INSERT INTO durable.flow_keys AS f (partition_key, queue_name, kind,"
	" flow_key, task_id, first_at, last_at, calls, expires_at)"
	" VALUES ($partition, $queue, $kind, $key, NULL, $now, $now, 1, $expires_at)"
	" ON CONFLICT (partition_key, queue_name, kind, flow_key) DO UPDATE"
	" SET calls = f.calls + 1, last_at = GREATEST(f.last_at, excluded.last_at),"
	" expires_at = GREATEST(f.expires_at, excluded.expires_at)"
	" RETURNING task_id, first_at",
	DURABLE_PARAMS(flow_key_params),
	DURABLE_COLUMNS(taken_columns),
};

/* the key's new task, made by this call, the first of its calls */
static DurableStatement flow_key_task = {
	.name = "flow_key_task",
	.sql = "UPDATE durable.flow_keys SET task_id = $task_id, first_at = $now,"
	" calls = 1, expires_at = $expires_at"
	" WHERE partition_key = $partition AND queue_name = $queue"
	" AND kind = $kind AND flow_key = $key",
	DURABLE_PARAMS(flow_key_task_params),
};

/*
 * A debounced task delayed, while it waits for its first claim.  In a
 * fair queue a task delayed past now leaves its place in the claim order
 * until it is due again (fairness.c: a pass is a place among tasks that
 * can run now).
 */
#define DELAYED_RUN_AT "LEAST(GREATEST(run_at, $run_at), $latest)"
enum
{
	DELAY_PARTITION,
	DELAY_TASK_ID,
	DELAY_NOW,
	DELAY_RUN_AT,
	DELAY_LATEST,
	DELAY_PAYLOAD,
	DELAY_NPARAMS
};
static const DurableParam debounce_delay_params[DELAY_NPARAMS] = {
	[DELAY_PARTITION] = {"partition", INT4OID},
	[DELAY_TASK_ID] = {"task_id", INT8OID},
	[DELAY_NOW] = {"now", TIMESTAMPTZOID},
	[DELAY_RUN_AT] = {"run_at", TIMESTAMPTZOID},
	[DELAY_LATEST] = {"latest", TIMESTAMPTZOID},
	[DELAY_PAYLOAD] = {"payload", JSONBOID},
};
static DurableStatement debounce_delay = {
	.name = "debounce_delay",
	.sql = "UPDATE durable.live_tasks"
	" SET run_at = " DELAYED_RUN_AT ","
	" payload = COALESCE($payload, payload),"
	" fair_pass = CASE WHEN " DELAYED_RUN_AT " > $now THEN " UNADMITTED("fair_pass")
	"  ELSE fair_pass END"
	" WHERE partition_key = $partition AND task_id = $task_id"
	" AND state = 'ready' AND fence = 0",
	DURABLE_PARAMS(debounce_delay_params),
};

/* a call's key: its partition, and the parameters its statements share */
typedef struct FlowKey
{
	const char *queue;
	const char *kind;
	const char *what;			/* the key, as its errors name it */
	const char *key;
	DurableQueue settings;
	int32		partition;
	TimestampTz now;
} FlowKey;

/* the parameters of the key's row, for flow_key_take and flow_key_task */
static void
key_args(const FlowKey *fk, TimestampTz expires_at, Datum *args)
{
	args[FLOW_PARTITION] = Int32GetDatum(fk->partition);
	args[FLOW_QUEUE] = CStringGetTextDatum(fk->queue);
	args[FLOW_KIND] = CStringGetTextDatum(fk->kind);
	args[FLOW_KEY] = CStringGetTextDatum(fk->key);
	args[FLOW_NOW] = TimestampTzGetDatum(fk->now);
	args[FLOW_EXPIRES_AT] = TimestampTzGetDatum(expires_at);
}

/*
 * take_key
 *		Read the queue (42704 unknown, 42501 not granted to enqueue), take
 *		the key's row and count the call: the key's task into *task_id (0
 *		for none yet) and its first call into *first_at.
 */
static void
take_key(FlowKey *fk, TimestampTz expires_at, int64 *task_id, TimestampTz *first_at)
{
	Datum		args[FLOW_TASK_ID];
	DurableResult res;
	bool		isnull;
	Datum		id;

	DurableCheckKey(fk->key, fk->what);
	DurableQueueGetShared(fk->queue, &fk->settings);
	DurableCheckRestrictedQueue(fk->queue, fk->settings.restricted, DURABLE_PRIV_ENQUEUE);
	fk->partition = DurableQueueKeyPartition(&fk->settings, fk->key);

	key_args(fk, expires_at, args);
	res = DurableRun(&flow_key_take, args, NULL, SPI_OK_INSERT_RETURNING, 1);
	if (res.rows != 1)
		elog(ERROR, "flow_key_take returned " UINT64_FORMAT " rows", res.rows);
	id = DurableGetDatum(res, 0, TAKEN_TASK_ID, &isnull);
	*task_id = isnull ? 0 : DatumGetInt64(id);
	*first_at = DatumGetTimestampTz(DurableGetDatum(res, 0, TAKEN_FIRST_AT, &isnull));
}

/*
 * new_task
 *		Enqueue the key's new task, in the key's partition, and make it the
 *		key's, as its first call, until expires_at.
 */
static int64
new_task(const FlowKey *fk, Jsonb *payload, TimestampTz run_at, TimestampTz expires_at)
{
	DurableEnqueueRequest req = {0};
	Datum		args[FLOW_NPARAMS];
	int64		task_id;

	req.queue = fk->queue;
	req.payload = payload;
	req.run_at = run_at;
	req.class = "idempotent";
	req.has_partition = true;
	req.partition = fk->partition;
	task_id = DurableEnqueue(&req, &fk->settings, fk->now);

	key_args(fk, expires_at, args);
	args[FLOW_TASK_ID] = Int64GetDatum(task_id);
	(void) DurableRun(&flow_key_task, args, NULL, SPI_OK_UPDATE, 0);
	return task_id;
}

/*
 * DurableDebounce
 *		The key's task waiting for its first claim, delayed to run delay
 *		after this call (never later than max_wait, when given, after the
 *		key's first call), with payload when trailing; or, when the key has
 *		none, a new task with payload that runs delay from now (or max_wait,
 *		when that is sooner).  Returns the task's id.
 */
int64
DurableDebounce(const char *queue, const char *key, Jsonb *payload,
				const Interval *delay, const Interval *max_wait, bool trailing)
{
	FlowKey		fk = {.queue = queue, .kind = "debounce", .what = "debounce key", .key = key};
	TimestampTz run_at;
	TimestampTz first_at;
	int64		task_id;

	fk.now = GetCurrentTransactionStartTimestamp();
	run_at = DurableTimePlus(fk.now, delay);
	take_key(&fk, run_at, &task_id, &first_at);

	if (task_id != 0)
	{
		Datum		args[DELAY_NPARAMS];
		char		nulls[DELAY_NPARAMS] = {' ', ' ', ' ', ' ', ' ', ' '};

		args[DELAY_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
		args[DELAY_TASK_ID] = Int64GetDatum(task_id);
		args[DELAY_NOW] = TimestampTzGetDatum(fk.now);
		args[DELAY_RUN_AT] = TimestampTzGetDatum(run_at);
		args[DELAY_LATEST] = max_wait ?
			TimestampTzGetDatum(DurableTimePlus(first_at, max_wait)) : (Datum) 0;
		nulls[DELAY_LATEST] = max_wait ? ' ' : 'n';
		args[DELAY_PAYLOAD] = JsonbPGetDatum(payload);
		nulls[DELAY_PAYLOAD] = trailing ? ' ' : 'n';
		if (DurableRun(&debounce_delay, args, nulls, SPI_OK_UPDATE, 0).rows == 1)
			return task_id;
	}

	/* the first call of a task: max_wait counts from now */
	if (max_wait != NULL)
		run_at = Min(run_at, DurableTimePlus(fk.now, max_wait));
	return new_task(&fk, payload, run_at, run_at);
}

/*
 * DurableThrottle
 *		The key's task when it was made less than per ago, else a new task
 *		with payload that runs now.  Returns the task's id.
 */
int64
DurableThrottle(const char *queue, const char *key, Jsonb *payload,
				const Interval *per)
{
	FlowKey		fk = {.queue = queue, .kind = "throttle", .what = "throttle key", .key = key};
	TimestampTz first_at;
	int64		task_id;

	fk.now = GetCurrentTransactionStartTimestamp();
	take_key(&fk, fk.now, &task_id, &first_at);
	if (task_id != 0 && fk.now < DurableTimePlus(first_at, per))
		return task_id;
	return new_task(&fk, payload, fk.now, DurableTimePlus(fk.now, per));
}
