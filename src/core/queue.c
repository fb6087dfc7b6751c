/*-------------------------------------------------------------------------
 *
 * queue.c
 *	  Queues: their settings, their partitions, creating, altering,
 *	  pausing, resuming and dropping them.  The SQL functions are
 *	  api/queues.c's.
 *
 * A queue spreads over "partitions" consecutive partition keys starting at
 * a base taken from a hash of its name.  The count is fixed when the queue
 * is created: the partition of an idempotency key depends on it.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "utils/guc.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "access/xact.h"

/* what of a queue's ($1, in its partitions $2) goes with it, by table */
#define QUEUE_TASKS(table) \
	" USING " table " t WHERE x.partition_key = t.partition_key" \
	" AND x.task_id = t.task_id AND t.partition_key = ANY ($2)" \
	" AND t.queue_name = $1"

/* a queue's settings */
enum
{
	QUEUE_PARTITION_BASE,
	QUEUE_PARTITIONS,
	QUEUE_LEASE,
	QUEUE_MAX_ATTEMPTS,
	QUEUE_DEADLINE,
	QUEUE_NOTIFY,
	QUEUE_PAUSED,
	QUEUE_RESTRICTED,
	QUEUE_CONCURRENCY_LIMIT,
	QUEUE_VERSION_TIMEOUT,
	QUEUE_PAUSED_PARTITIONS,
	QUEUE_NCOLUMNS
};

static const DurableColumn queue_columns[QUEUE_NCOLUMNS] = {
	[QUEUE_PARTITION_BASE] = {"partition_base", INT4OID},
	[QUEUE_PARTITIONS] = {"partitions", INT4OID},
	[QUEUE_LEASE] = {"lease", INTERVALOID},
	[QUEUE_MAX_ATTEMPTS] = {"max_attempts", INT4OID},
	[QUEUE_DEADLINE] = {"deadline", INTERVALOID},
	[QUEUE_NOTIFY] = {"notify", BOOLOID},
	[QUEUE_PAUSED] = {"paused", BOOLOID},
	[QUEUE_RESTRICTED] = {"restricted", BOOLOID},
	[QUEUE_CONCURRENCY_LIMIT] = {"concurrency_limit", INT4OID},
	[QUEUE_VERSION_TIMEOUT] = {"version_timeout", INTERVALOID},
	[QUEUE_PAUSED_PARTITIONS] = {"paused_partitions", INT4ARRAYOID},
};

/* a queue's settings, by name ($1), as queue_columns */
#define QUEUE_SELECT \
	"SELECT partition_base, partitions, lease, max_attempts, deadline," \
	" notify, paused, restricted, concurrency_limit, version_timeout," \
	" paused_partitions" \
	" FROM durable.queues WHERE queue_name = $1"

static DurableStatement queue_get = {
	.name = "queue_get",
	.sql = QUEUE_SELECT,
	.nargs = 1,
	.argtypes = {TEXTOID},
	DURABLE_COLUMNS(queue_columns),
};

static DurableStatement queue_get_share = {
	.name = "queue_get_share",
	.sql = QUEUE_SELECT
	" FOR KEY SHARE",
	.nargs = 1,
	.argtypes = {TEXTOID},
	DURABLE_COLUMNS(queue_columns),
};

static DurableStatement queue_get_for_drop = {
	.name = "queue_get_for_drop",
	.sql = QUEUE_SELECT
	" FOR UPDATE",
	.nargs = 1,
	.argtypes = {TEXTOID},
	DURABLE_COLUMNS(queue_columns),
};

static void
report_no_queue(const char *queue)
{
	ereport(ERROR,
			errcode(ERRCODE_UNDEFINED_OBJECT),
			errmsg("queue \"%s\" does not exist", queue),
			errhint("Create it with durable_create_queue()."));
}

/* read a queue's settings with one of the queue_get statements */
static void
read_queue(DurableStatement *stmt, const char *queue, DurableQueue *result)
{
	Datum		arg = CStringGetTextDatum(queue);
	bool		isnull;
	Datum		d;

	if (DurableExecute(stmt, &arg, NULL, SPI_OK_SELECT, 1) == 0)
		report_no_queue(queue);

	result->partition_base = DurableColumnInt32(0, QUEUE_PARTITION_BASE);
	result->partitions = DurableColumnInt32(0, QUEUE_PARTITIONS);
	result->lease = *DatumGetIntervalP(DurableColumnDatum(0, QUEUE_LEASE, &isnull));
	result->max_attempts = DurableColumnInt32(0, QUEUE_MAX_ATTEMPTS);
	d = DurableColumnDatum(0, QUEUE_DEADLINE, &isnull);
	result->has_deadline = !isnull;
	if (!isnull)
		result->deadline = *DatumGetIntervalP(d);
	result->notify = DatumGetBool(DurableColumnDatum(0, QUEUE_NOTIFY, &isnull));
	result->paused = DatumGetBool(DurableColumnDatum(0, QUEUE_PAUSED, &isnull));
	result->restricted = DatumGetBool(DurableColumnDatum(0, QUEUE_RESTRICTED, &isnull));
	d = DurableColumnDatum(0, QUEUE_CONCURRENCY_LIMIT, &isnull);
	result->concurrency_limit = isnull ? 0 : DatumGetInt32(d);
	d = DurableColumnDatum(0, QUEUE_VERSION_TIMEOUT, &isnull);
	result->has_version_timeout = !isnull;
	if (!isnull)
		result->version_timeout = *DatumGetIntervalP(d);
	d = DurableColumnDatum(0, QUEUE_PAUSED_PARTITIONS, &isnull);
	result->npaused_partitions = 0;
	if (!isnull)
	{
		Datum	   *keys;
		int			n;

		deconstruct_array(DatumGetArrayTypeP(d), INT4OID, sizeof(int32), true,
						  TYPALIGN_INT, &keys, NULL, &n);
		result->paused_partitions = palloc(sizeof(int32) * Max(n, 1));
		for (int i = 0; i < n; i++)
			result->paused_partitions[i] = DatumGetInt32(keys[i]);
		result->npaused_partitions = n;
	}
}

/* 22023 unless partition is one of the queue's partition keys */
void
DurableCheckQueuePartition(const char *queue, const DurableQueue *settings,
						   int32 partition)
{
	if ((partition - settings->partition_base + DURABLE_PARTITION_SPACE) %
		DURABLE_PARTITION_SPACE >= settings->partitions)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("queue \"%s\" has no partition %d", queue, partition),
				errdetail("Its partitions are the %d from %d on (partition_key in durable.tasks).",
						  settings->partitions, settings->partition_base));
}

/* whether a partition of a queue is paused (durable_pause(..., partition)) */
bool
DurablePartitionPaused(const DurableQueue *queue, int32 partition)
{
	for (int i = 0; i < queue->npaused_partitions; i++)
		if (queue->paused_partitions[i] == partition)
			return true;
	return false;
}

/*
 * DurableQueueGet
 *		Read a queue's settings; 42704 when there is no such queue.  Takes
 *		no lock: for calls that move tasks already in the queue.
 */
void
DurableQueueGet(const char *queue, DurableQueue *result)
{
	read_queue(&queue_get, queue, result);
}

/*
 * DurableQueueGetShared
 *		The same, locking the queue's row FOR KEY SHARE until the end of the
 *		transaction: for calls that add a task to the queue, or make a
 *		finished one unfinished again.  durable_drop_queue locks the row FOR
 *		UPDATE, so such a call and a drop of its queue never overlap: the
 *		drop waits for the call's transaction, or the call waits for the
 *		drop and then finds no queue (42704).  KEY SHARE does not conflict
 *		with itself nor with the retry bucket's FOR NO KEY UPDATE, so
 *		enqueues do not wait for each other or for failures.  (Claims take
 *		no lock: many lockers of one row would share it through a
 *		multixact on every claim.)
 */
void
DurableQueueGetShared(const char *queue, DurableQueue *result)
{
	/*
	 * On Citus a lock on a row of a reference table is taken on every node,
	 * and makes each call a distributed transaction.  There the foreign key
	 * from durable.live_tasks to durable.queues (durable_enable_citus) takes
	 * the same lock where it matters: on the node of the task's shard, whose
	 * copy of the queue's row a drop also locks.
	 */
	read_queue(DurableDistributed() ? &queue_get : &queue_get_share,
			   queue, result);
}

/* the partition key of a queue's index-th partition */
int32
DurableQueuePartition(const DurableQueue *queue, int index)
{
	return (queue->partition_base + index % queue->partitions) %
		DURABLE_PARTITION_SPACE;
}

/* first partition of a queue: a stable hash of its name */
static int32
queue_partition_base(const char *queue)
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];

	DurableSha256(queue, strlen(queue), digest);
	return (int32) ((((uint32) digest[0] << 8) | digest[1]) %
					DURABLE_PARTITION_SPACE);
}

/* all partition keys of a queue, as an int[] */
ArrayType *
DurableQueuePartitionArray(const DurableQueue *queue)
{
	Datum	   *keys = palloc(sizeof(Datum) * queue->partitions);

	for (int i = 0; i < queue->partitions; i++)
		keys[i] = Int32GetDatum(DurableQueuePartition(queue, i));
	return construct_array(keys, queue->partitions, INT4OID,
						   sizeof(int32), true, TYPALIGN_INT);
}

/* the optional settings of a queue, bound as NULL when they are 0 */
static void
bind_int(Datum *args, char *nulls, int i, int32 value)
{
	args[i] = Int32GetDatum(value);
	nulls[i] = value > 0 ? ' ' : 'n';
}

static void
bind_interval(Datum *args, char *nulls, int i, Interval *value)
{
	args[i] = PointerGetDatum(value);
	nulls[i] = value ? ' ' : 'n';
}

static DurableStatement queue_insert = {
	.name = "queue_insert",
	.sql = "INSERT INTO durable.queues (queue_name, partition_base, partitions,"
	" lease, max_attempts, retry_base, retry_cap, deadline,"
	" retry_capacity, retry_refill_rate, retry_tokens, retry_tokens_at,"
	" progress_timeout, notify, created_at, concurrency_limit,"
	" version_timeout)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,"
	" COALESCE($9, 0), $11, $12, $13, $11, $14, $15)"
	" ON CONFLICT (queue_name) DO NOTHING",
	.nargs = 15,
	.argtypes = {TEXTOID, INT4OID, INT4OID, INTERVALOID, INT4OID, INT4OID, INT4OID,
		INTERVALOID, INT4OID, FLOAT8OID, TIMESTAMPTZOID, INTERVALOID, BOOLOID,
	INT4OID, INTERVALOID},
};

/*
 * DurableCreateQueue
 *		Create a queue with settings (checked by the caller; every one is
 *		given, but the optional deadline, retry_capacity, progress_timeout,
 *		concurrency_limit and version_timeout).  42710 when the queue
 *		exists.
 */
void
DurableCreateQueue(const char *queue, const DurableQueueSettings *settings)
{
	Datum		args[15];
	char		nulls[15];

	memset(nulls, ' ', sizeof(nulls));
	args[0] = CStringGetTextDatum(queue);
	args[1] = Int32GetDatum(queue_partition_base(queue));
	args[2] = Int32GetDatum(settings->partitions);
	args[3] = PointerGetDatum(settings->lease);
	args[4] = Int32GetDatum(settings->max_attempts);
	args[5] = Int32GetDatum(settings->retry_base);
	args[6] = Int32GetDatum(settings->retry_cap);
	bind_interval(args, nulls, 7, settings->deadline);
	bind_int(args, nulls, 8, settings->retry_capacity);
	args[9] = Float8GetDatum(settings->retry_refill_rate);
	args[10] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	bind_interval(args, nulls, 11, settings->progress_timeout);
	args[12] = BoolGetDatum(settings->notify);
	bind_int(args, nulls, 13, settings->concurrency_limit);
	bind_interval(args, nulls, 14, settings->version_timeout);
	if (DurableExecute(&queue_insert, args, nulls, SPI_OK_INSERT, 0) == 0)
		ereport(ERROR,
				errcode(ERRCODE_DUPLICATE_OBJECT),
				errmsg("queue \"%s\" already exists", queue),
				errhint("Change its settings with durable_alter_queue()."));
}

static DurableStatement queue_alter = {
	.name = "queue_alter",
	.sql = "UPDATE durable.queues SET"
	" lease = COALESCE($2, lease),"
	" max_attempts = COALESCE($3, max_attempts),"
	" retry_base = COALESCE($4, retry_base),"
	" retry_cap = COALESCE($5, retry_cap),"
	" deadline = CASE WHEN $11 THEN NULL ELSE COALESCE($6, deadline) END,"
	" retry_capacity = CASE WHEN $12 THEN NULL ELSE COALESCE($7, retry_capacity) END,"
	" retry_tokens = CASE WHEN $7 IS NULL THEN retry_tokens"
	"  WHEN retry_capacity IS NULL THEN $7::float8"
	"  ELSE LEAST(retry_tokens, $7::float8) END,"
	" retry_refill_rate = COALESCE($8, retry_refill_rate),"
	" progress_timeout = CASE WHEN $13 THEN NULL ELSE COALESCE($9, progress_timeout) END,"
	" notify = COALESCE($10, notify),"
	" concurrency_limit = CASE WHEN $15 THEN NULL ELSE COALESCE($14, concurrency_limit) END,"
	" version_timeout = CASE WHEN $17 THEN NULL ELSE COALESCE($16, version_timeout) END"
	" WHERE queue_name = $1",
	.nargs = 17,
	.argtypes = {TEXTOID, INTERVALOID, INT4OID, INT4OID, INT4OID, INTERVALOID,
		INT4OID, FLOAT8OID, INTERVALOID, BOOLOID, BOOLOID, BOOLOID, BOOLOID,
	INT4OID, BOOLOID, INTERVALOID, BOOLOID},
};

/*
 * DurableAlterQueue
 *		Change the settings of a queue that are given (a NULL pointer, 0,
 *		or has_notify false keeps one), and remove the optional ones marked
 *		to clear.  The partition count cannot change.  42704 when there is
 *		no such queue.
 */
void
DurableAlterQueue(const char *queue, const DurableQueueSettings *settings)
{
	Datum		args[17];
	char		nulls[17];

	memset(nulls, ' ', sizeof(nulls));
	args[0] = CStringGetTextDatum(queue);
	bind_interval(args, nulls, 1, settings->lease);
	bind_int(args, nulls, 2, settings->max_attempts);
	bind_int(args, nulls, 3, settings->retry_base);
	bind_int(args, nulls, 4, settings->retry_cap);
	bind_interval(args, nulls, 5, settings->deadline);
	bind_int(args, nulls, 6, settings->retry_capacity);
	args[7] = Float8GetDatum(settings->retry_refill_rate);
	nulls[7] = settings->retry_refill_rate > 0 ? ' ' : 'n';
	bind_interval(args, nulls, 8, settings->progress_timeout);
	args[9] = BoolGetDatum(settings->notify);
	nulls[9] = settings->has_notify ? ' ' : 'n';
	args[10] = BoolGetDatum(settings->clear_deadline);
	args[11] = BoolGetDatum(settings->clear_retry_capacity);
	args[12] = BoolGetDatum(settings->clear_progress_timeout);
	bind_int(args, nulls, 13, settings->concurrency_limit);
	args[14] = BoolGetDatum(settings->clear_concurrency_limit);
	bind_interval(args, nulls, 15, settings->version_timeout);
	args[16] = BoolGetDatum(settings->clear_version_timeout);
	if (DurableExecute(&queue_alter, args, nulls, SPI_OK_UPDATE, 0) == 0)
		report_no_queue(queue);
}

static DurableStatement queue_set_paused = {
	.name = "queue_set_paused",
	.sql = "UPDATE durable.queues SET paused = $2"
	" WHERE queue_name = $1",
	.nargs = 2,
	.argtypes = {TEXTOID, BOOLOID},
};

/* who paused or resumed a queue, or one of its partitions ($3 or NULL) */
static DurableStatement queue_log = {
	.name = "queue_log",
	.sql = "INSERT INTO durable.queue_log (queue_name, at, kind, partition_key, role)"
	" VALUES ($1, $4, CASE WHEN $2 THEN 'paused' ELSE 'resumed' END, $3, $5)",
	.nargs = 5,
	.argtypes = {TEXTOID, BOOLOID, INT4OID, TIMESTAMPTZOID, TEXTOID},
};

/* a partition ($3) of a queue paused (or resumed, $2 false), once */
static DurableStatement queue_set_partition_paused = {
	.name = "queue_set_partition_paused",
	.sql = "UPDATE durable.queues SET paused_partitions ="
	" ARRAY(SELECT p FROM pg_catalog.unnest(paused_partitions) p WHERE p <> $3"
	"  UNION SELECT $3 WHERE $2 ORDER BY 1)"
	" WHERE queue_name = $1",
	.nargs = 3,
	.argtypes = {TEXTOID, BOOLOID, INT4OID},
};

/*
 * DurableSetQueuePaused
 *		Pause a queue, or resume it; or, when partition is not negative,
 *		one of its partitions (a partition_key of the queue, else 22023).
 *		A paused queue or partition hands out no task; enqueues, running
 *		tasks, their commits and the reconciler go on.  A partition's pause
 *		and the queue's are apart: resuming the queue leaves its paused
 *		partitions paused.  Each call is a row of durable.queue_log, with
 *		the caller's role.  42704 when there is no such queue.
 */
void
DurableSetQueuePaused(const char *queue, int32 partition, bool paused)
{
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	DurableQueue settings;

	args[0] = CStringGetTextDatum(queue);
	args[1] = BoolGetDatum(paused);
	if (partition < 0)
	{
		if (DurableExecute(&queue_set_paused, args, NULL, SPI_OK_UPDATE, 0) == 0)
			report_no_queue(queue);
		nulls[2] = 'n';
	}
	else
	{
		DurableQueueGet(queue, &settings);
		DurableCheckQueuePartition(queue, &settings, partition);
		args[2] = Int32GetDatum(partition);
		DurableExecute(&queue_set_partition_paused, args, NULL, SPI_OK_UPDATE, 0);
	}
	args[2] = Int32GetDatum(partition);
	args[3] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args[4] = CStringGetTextDatum(DurableCallerName());
	DurableExecute(&queue_log, args, nulls, SPI_OK_INSERT, 0);
}

/* the schedules that target a queue */
enum
{
	SCHEDULE_NAME,
	SCHEDULE_NCOLUMNS
};

static const DurableColumn schedule_columns[SCHEDULE_NCOLUMNS] = {
	[SCHEDULE_NAME] = {"schedule_name", TEXTOID},
};

static DurableStatement queue_schedules = {
	.name = "queue_schedules",
	.sql = "SELECT schedule_name FROM durable.schedules WHERE queue_name = $1"
	" ORDER BY schedule_name",
	.nargs = 1,
	.argtypes = {TEXTOID},
	DURABLE_COLUMNS(schedule_columns),
};

/*
 * The schedules in the rows of queue_schedules, one a line, as
 * PostgreSQL's DROP lists dependent objects: the first hundred, then how
 * many more.
 */
#define MAX_REPORTED_SCHEDULES 100

static char *
schedule_list_text(const char *queue, uint64 n)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (uint64 r = 0; r < n && r < MAX_REPORTED_SCHEDULES; r++)
		appendStringInfo(&buf, "%sschedule \"%s\" targets queue \"%s\"",
						 r > 0 ? "\n" : "", DurableColumnText(r, SCHEDULE_NAME), queue);
	if (n > MAX_REPORTED_SCHEDULES)
		appendStringInfo(&buf, "\nand %llu other schedules",
						 (unsigned long long) (n - MAX_REPORTED_SCHEDULES));
	return buf.data;
}

/*
 * The parts of the tick that are the queue's (tick.c): its retry tokens,
 * its versions and its schedules, named from the n rows of queue_schedules, as a
 * text[] datum.
 */
static Datum
queue_tick_parts(const char *queue, uint64 n)
{
	Datum	   *names = palloc(sizeof(Datum) * (n + 2));

	names[0] = CStringGetTextDatum(psprintf("retry tokens: %s", queue));
	names[1] = CStringGetTextDatum(psprintf("versions: %s", queue));
	for (uint64 r = 0; r < n; r++)
		names[r + 2] = CStringGetTextDatum(psprintf("schedule: %s",
													DurableColumnText(r, SCHEDULE_NAME)));
	return PointerGetDatum(construct_array(names, (int) n + 2, TEXTOID, -1,
										   false, TYPALIGN_INT));
}

/* the unfinished tasks of a queue */
enum
{
	UNFINISHED_COUNT,
	UNFINISHED_NCOLUMNS
};

static const DurableColumn unfinished_columns[UNFINISHED_NCOLUMNS] = {
	[UNFINISHED_COUNT] = {"unfinished", INT8OID},
};

static DurableStatement queue_unfinished = {
	.name = "queue_unfinished",
	.sql = "SELECT pg_catalog.count(*) AS unfinished FROM durable.live_tasks"
	" WHERE partition_key = ANY ($2)"
	" AND queue_name = $1"
	" AND state NOT IN ('completed', 'failed', 'cancelled')",
	.nargs = 2,
	.argtypes = {TEXTOID, INT4ARRAYOID},
	DURABLE_COLUMNS(unfinished_columns),
};

static DurableStatement queue_drop = {
	.name = "queue_drop",
	.sql = "WITH l AS (DELETE FROM durable.live_tasks"
	"  WHERE partition_key = ANY ($2)"
	"  AND queue_name = $1"
	"  RETURNING partition_key, task_id),"
	" h AS (DELETE FROM durable.task_history"
	"  WHERE partition_key = ANY ($2)"
	"  AND queue_name = $1"
	"  RETURNING partition_key, task_id),"
	" t AS (SELECT * FROM l UNION ALL SELECT * FROM h),"
	" e AS (DELETE FROM durable.event_log e USING t"
	"  WHERE e.partition_key = t.partition_key"
	"  AND e.task_id = t.task_id),"
	" s AS (DELETE FROM durable.live_steps s USING l t"
	"  WHERE s.partition_key = t.partition_key"
	"  AND s.task_id = t.task_id),"
	" sh AS (DELETE FROM durable.step_history s USING h t"
	"  WHERE s.partition_key = t.partition_key"
	"  AND s.task_id = t.task_id),"
	" k AS (DELETE FROM durable.task_keys"
	"  WHERE partition_key = ANY ($2)"
	"  AND queue_name = $1)"
	" DELETE FROM durable.queues WHERE queue_name = $1",
	.nargs = 2,
	.argtypes = {TEXTOID, INT4ARRAYOID},
	.nsplit = 5,
	.split = {
	{"WITH a AS (DELETE FROM durable.event_log x" QUEUE_TASKS("durable.live_tasks") " RETURNING 1),"
		" b AS (DELETE FROM durable.event_log x" QUEUE_TASKS("durable.task_history") " RETURNING 1)"
		" SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)",
	DURABLE_SPLIT_NO_INPUT, false},
	{"WITH a AS (DELETE FROM durable.live_steps x" QUEUE_TASKS("durable.live_tasks") " RETURNING 1),"
		" b AS (DELETE FROM durable.step_history x" QUEUE_TASKS("durable.task_history") " RETURNING 1)"
		" SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)",
	DURABLE_SPLIT_NO_INPUT, false},
	{"WITH a AS (DELETE FROM durable.live_tasks WHERE partition_key = ANY ($2)"
		"  AND queue_name = $1 RETURNING 1),"
		" b AS (DELETE FROM durable.task_history WHERE partition_key = ANY ($2)"
		"  AND queue_name = $1 RETURNING 1)"
		" SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)",
	DURABLE_SPLIT_NO_INPUT, false},
	{"DELETE FROM durable.task_keys WHERE partition_key = ANY ($2) AND queue_name = $1",
	DURABLE_SPLIT_NO_INPUT, false},
	{"DELETE FROM durable.queues WHERE queue_name = $1", DURABLE_SPLIT_NO_INPUT, false},
	},
};

static DurableStatement queue_drop_events = {
	.name = "queue_drop_events",
	.sql = "WITH w AS (DELETE FROM durable.event_waits"
	"  WHERE partition_key = ANY ($2) AND queue_name = $1)"
	" DELETE FROM durable.emitted_events"
	" WHERE partition_key = ANY ($2) AND queue_name = $1",
	.nargs = 2,
	.argtypes = {TEXTOID, INT4ARRAYOID},
};

static DurableStatement queue_drop_workers = {
	.name = "queue_drop_workers",
	.sql = "WITH l AS (DELETE FROM durable.queue_log WHERE queue_name = $1)"
	" DELETE FROM durable.workers_seen WHERE queue_name = $1",
	.nargs = 1,
	.argtypes = {TEXTOID},
};

static DurableStatement tick_failures_forget = {
	.name = "tick_failures_forget",
	.sql = "DELETE FROM durable.tick_failures WHERE part = ANY ($1)",
	.nargs = 1,
	.argtypes = {TEXTARRAYOID},
};

static DurableStatement queue_drop_schedules = {
	.name = "queue_drop_schedules",
	.sql = "DELETE FROM durable.schedules WHERE queue_name = $1",
	.nargs = 1,
	.argtypes = {TEXTOID},
};

/*
 * DurableDropQueue
 *		Drop a queue, with its schedules when cascade (durable_drop_queue).
 *
 * Locks the queue's row FOR UPDATE, which waits for the enqueues and
 * replays under way in the queue and keeps new ones out (they lock the row
 * FOR KEY SHARE), and nothing else: other queues go on, and of two drops of
 * one queue the second waits and then finds no queue.  Then the queue goes
 * with its finished tasks, their steps and events, and the events emitted
 * into it (durable_emit) with the awaits of them.  Raises 55006 while any
 * of its tasks is unfinished.
 *
 * A schedule left behind would fire into any later queue of the same name,
 * perhaps one restricted to other roles: while schedules target the queue
 * the drop is refused (2BP01, naming them), unless cascade is true, which
 * removes them in the same transaction.  durable_schedule locks the queue's
 * row FOR KEY SHARE too, so no schedule comes to target the queue while the
 * drop holds it.
 */
void
DurableDropQueue(const char *queue, bool cascade)
{
	DurableQueue settings;
	Datum		args[2];
	int64		unfinished;
	uint64		schedules;
	char	   *schedule_names = NULL;
	Datum		parts;

	/*
	 * Under a transaction snapshot a task enqueued by a transaction that
	 * committed while the drop waited for the queue's row would be
	 * invisible to the check and to the delete, and stay behind.
	 */
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				errmsg("cannot drop queue \"%s\" under the %s isolation level",
					   queue, XactIsoLevel == XACT_SERIALIZABLE ?
					   "SERIALIZABLE" : "REPEATABLE READ"),
				errhint("Drop queues in a READ COMMITTED transaction."));

	/*
	 * On Citus the drop locks the queue's row on every node and then
	 * deletes on every shard, which Citus does in one transaction only over
	 * one connection per node.  An enqueue there takes no lock of the row
	 * on every node (DurableQueueGetShared): one racing the drop fails on
	 * the foreign key from durable.live_tasks instead (23503), on whichever
	 * side comes second, and no task is left without its queue.
	 */
	if (DurableDistributed())
		(void) set_config_option("citus.multi_shard_modify_mode", "sequential",
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
								 true, 0, false);
	read_queue(&queue_get_for_drop, queue, &settings);
	args[0] = CStringGetTextDatum(queue);
	args[1] = PointerGetDatum(DurableQueuePartitionArray(&settings));
	DurableExecute(&queue_unfinished, args, NULL, SPI_OK_SELECT, 0);
	unfinished = DurableColumnInt64(0, UNFINISHED_COUNT);
	if (unfinished > 0)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_IN_USE),
				errmsg("cannot drop queue \"%s\" because it has unfinished tasks",
					   queue),
				errdetail_plural("%lld task is not completed, failed or cancelled.",
								 "%lld tasks are not completed, failed or cancelled.",
								 unfinished, (long long) unfinished),
				errhint("Cancel them with durable_cancel() or let them finish."));
	schedules = DurableExecute(&queue_schedules, args, NULL, SPI_OK_SELECT, 0);
	if (schedules > 0)
		schedule_names = schedule_list_text(queue, schedules);
	parts = queue_tick_parts(queue, schedules);
	if (schedules > 0 && !cascade)
		ereport(ERROR,
				errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				errmsg("cannot drop queue \"%s\" because schedules target it",
					   queue),
				errdetail("%s", schedule_names),
				errhint("Use durable_drop_queue(..., cascade => true) to drop the schedules too, or durable_unschedule() them first."));
	DurableExecute(&queue_drop, args, NULL, SPI_OK_DELETE, 0);
	/*
	 * Its events go too, and the awaits of them that tasks of other queues
	 * registered: a new queue of that name starts with none, and its
	 * emits wake nobody who awaited the old one's.
	 */
	DurableExecute(&queue_drop_events, args, NULL, SPI_OK_DELETE, 0);
	DurableExecute(&queue_drop_workers, args, NULL, SPI_OK_DELETE, 0);
	/* what the tick failed to do for the queue is not shown any more */
	DurableExecute(&tick_failures_forget, &parts, NULL, SPI_OK_DELETE, 0);
	if (schedules > 0)
	{
		DurableExecute(&queue_drop_schedules, args, NULL, SPI_OK_DELETE, 0);
		ereport(NOTICE,
				errmsg_plural("drop cascades to %llu schedule",
							  "drop cascades to %llu schedules",
							  schedules, (unsigned long long) schedules),
				errdetail("%s", schedule_names));
	}
}

