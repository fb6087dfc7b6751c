/*-------------------------------------------------------------------------
 *
 * queue.c
 *	  Queues: their settings, their partitions, creating, altering,
 *	  pausing and resuming them (dropping them is drop.c's).  The SQL
 *	  functions are api/queues.c's.
 *
 * A queue spreads over "partitions" consecutive partition keys starting at
 * a base taken from a hash of its name.  The count is fixed when the queue
 * is created: the partition of an idempotency key depends on it.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

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
	.reads_reference = true,
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

void
DurableReportNoQueue(const char *queue)
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
		DurableReportNoQueue(queue);

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
		DurableReportNoQueue(queue);
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
			DurableReportNoQueue(queue);
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

/*
 * DurableQueueGetForDrop
 *		The same, locking the queue's row FOR UPDATE until the end of the
 *		transaction: for a drop of the queue (drop.c).
 */
void
DurableQueueGetForDrop(const char *queue, DurableQueue *result)
{
	read_queue(&queue_get_for_drop, queue, result);
}
