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
	QUEUE_FAIR,
	QUEUE_RATE_LIMITED,
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
	[QUEUE_FAIR] = {"fair", BOOLOID},
	[QUEUE_RATE_LIMITED] = {"rate_limited", BOOLOID},
};

/* a queue's settings, by name, as queue_columns */
#define QUEUE_SELECT \
	"SELECT partition_base, partitions, lease, max_attempts, deadline," \
	" notify, paused, restricted, concurrency_limit, version_timeout," \
	" paused_partitions, fair, rate_limited" \
	" FROM durable.queues WHERE queue_name = $queue"

/* the parameters of QUEUE_SELECT */
enum
{
	GET_QUEUE,
	GET_NPARAMS
};
static const DurableParam queue_get_params[GET_NPARAMS] = {
	[GET_QUEUE] = {"queue", TEXTOID},
};

static DurableStatement queue_get = {
	.name = "queue_get",
	.sql = QUEUE_SELECT,
	DURABLE_PARAMS(queue_get_params),
	DURABLE_COLUMNS(queue_columns),
	.reads_reference = true,
};

static DurableStatement queue_get_share = {
	.name = "queue_get_share",
	.sql = QUEUE_SELECT
	" FOR KEY SHARE",
	DURABLE_PARAMS(queue_get_params),
	DURABLE_COLUMNS(queue_columns),
};

static DurableStatement queue_get_for_drop = {
	.name = "queue_get_for_drop",
	.sql = QUEUE_SELECT
	" FOR UPDATE",
	DURABLE_PARAMS(queue_get_params),
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

/*
 * Every claim reads its queue's settings by the queue's primary key,
 * without a statement (store/direct.c): on Citus in the shard of
 * durable.queues on the calling node, which every node holds.
 */
static DurableKeyRead queue_key_read = {
	.table = {.schema = "durable", .name = "queues", DURABLE_COLUMNS(queue_columns)},
	.keys = {.nkeys = 1},
};

/* whether a queue is restricted, read by a finish */
static const DurableColumn restricted_columns[] = {
	{"restricted", BOOLOID},
};

static DurableKeyRead restricted_read = {
	.table = {.schema = "durable", .name = "queues", DURABLE_COLUMNS(restricted_columns)},
	.keys = {.nkeys = 1},
};

/*
 * DurableQueueRestricted
 *		Whether queue is restricted: false for a queue that does not exist,
 *		as the join of a statement that finds none.  On Citus where the
 *		shard of durable.queues is not read here, 42704 for one, which a
 *		finish does not meet: a queue with live tasks always exists there
 *		(the foreign key of durable.live_tasks).
 */
bool
DurableQueueRestricted(const char *queue)
{
	Datum		key = CStringGetTextDatum(queue);
	Datum		restricted;
	bool		isnull;
	DurableKeyRead *read = DurableKeyReadInReference(&restricted_read);

	if (read == NULL)
	{
		DurableQueue settings;

		DurableQueueGet(queue, &settings);
		return settings.restricted;
	}
	return DurableReadByKey(read, &key, &restricted, &isnull) &&
		!isnull && DatumGetBool(restricted);
}

/* a queue's settings from the values of queue_columns */
static void
decode_queue(const Datum *values, const bool *isnull, DurableQueue *result)
{
	result->partition_base = DatumGetInt32(values[QUEUE_PARTITION_BASE]);
	result->partitions = DatumGetInt32(values[QUEUE_PARTITIONS]);
	result->lease = *DatumGetIntervalP(values[QUEUE_LEASE]);
	result->max_attempts = DatumGetInt32(values[QUEUE_MAX_ATTEMPTS]);
	result->has_deadline = !isnull[QUEUE_DEADLINE];
	if (result->has_deadline)
		result->deadline = *DatumGetIntervalP(values[QUEUE_DEADLINE]);
	result->notify = DatumGetBool(values[QUEUE_NOTIFY]);
	result->paused = DatumGetBool(values[QUEUE_PAUSED]);
	result->restricted = DatumGetBool(values[QUEUE_RESTRICTED]);
	result->concurrency_limit = isnull[QUEUE_CONCURRENCY_LIMIT] ? 0 :
		DatumGetInt32(values[QUEUE_CONCURRENCY_LIMIT]);
	result->has_version_timeout = !isnull[QUEUE_VERSION_TIMEOUT];
	if (result->has_version_timeout)
		result->version_timeout = *DatumGetIntervalP(values[QUEUE_VERSION_TIMEOUT]);
	result->fair = DatumGetBool(values[QUEUE_FAIR]);
	result->rate_limited = DatumGetBool(values[QUEUE_RATE_LIMITED]);
	result->npaused_partitions = 0;
	if (!isnull[QUEUE_PAUSED_PARTITIONS])
	{
		Datum	   *keys;
		int			n;

		deconstruct_array(DatumGetArrayTypeP(values[QUEUE_PAUSED_PARTITIONS]),
						  INT4OID, sizeof(int32), true, TYPALIGN_INT,
						  &keys, NULL, &n);
		result->paused_partitions = palloc(sizeof(int32) * Max(n, 1));
		for (int i = 0; i < n; i++)
			result->paused_partitions[i] = DatumGetInt32(keys[i]);
		result->npaused_partitions = n;
	}
}

/* read a queue's settings with one of the queue_get statements */
static void
read_queue(DurableStatement *stmt, const char *queue, DurableQueue *result)
{
	DurableResult res;
	Datum		args[GET_NPARAMS];
	Datum		values[QUEUE_NCOLUMNS];
	bool		isnull[QUEUE_NCOLUMNS];

	args[GET_QUEUE] = CStringGetTextDatum(queue);
	res = DurableRun(stmt, args, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 0)
		DurableReportNoQueue(queue);
	for (int i = 0; i < QUEUE_NCOLUMNS; i++)
		values[i] = DurableGetDatum(res, 0, i, &isnull[i]);
	decode_queue(values, isnull, result);
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
	Datum		key;
	Datum		values[QUEUE_NCOLUMNS];
	bool		isnull[QUEUE_NCOLUMNS];
	DurableKeyRead *read = DurableKeyReadInReference(&queue_key_read);

	if (read == NULL)
	{
		read_queue(&queue_get, queue, result);
		return;
	}
	key = CStringGetTextDatum(queue);
	if (!DurableReadByKey(read, &key, values, isnull))
		DurableReportNoQueue(queue);
	decode_queue(values, isnull, result);
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
	if (DurableDistributed())
		DurableQueueGet(queue, result);
	else
		read_queue(&queue_get_share, queue, result);
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

enum
{
	INSERT_QUEUE,
	INSERT_PARTITION_BASE,
	INSERT_PARTITIONS,
	INSERT_LEASE,
	INSERT_MAX_ATTEMPTS,
	INSERT_RETRY_BASE,
	INSERT_RETRY_CAP,
	INSERT_DEADLINE,
	INSERT_RETRY_CAPACITY,
	INSERT_RETRY_REFILL_RATE,
	INSERT_NOW,
	INSERT_PROGRESS_TIMEOUT,
	INSERT_NOTIFY,
	INSERT_CONCURRENCY_LIMIT,
	INSERT_VERSION_TIMEOUT,
	INSERT_NPARAMS
};
static const DurableParam queue_insert_params[INSERT_NPARAMS] = {
	[INSERT_QUEUE] = {"queue", TEXTOID},
	[INSERT_PARTITION_BASE] = {"partition_base", INT4OID},
	[INSERT_PARTITIONS] = {"partitions", INT4OID},
	[INSERT_LEASE] = {"lease", INTERVALOID},
	[INSERT_MAX_ATTEMPTS] = {"max_attempts", INT4OID},
	[INSERT_RETRY_BASE] = {"retry_base", INT4OID},
	[INSERT_RETRY_CAP] = {"retry_cap", INT4OID},
	[INSERT_DEADLINE] = {"deadline", INTERVALOID},
	[INSERT_RETRY_CAPACITY] = {"retry_capacity", INT4OID},
	[INSERT_RETRY_REFILL_RATE] = {"retry_refill_rate", FLOAT8OID},
	[INSERT_NOW] = {"now", TIMESTAMPTZOID},
	[INSERT_PROGRESS_TIMEOUT] = {"progress_timeout", INTERVALOID},
	[INSERT_NOTIFY] = {"notify", BOOLOID},
	[INSERT_CONCURRENCY_LIMIT] = {"concurrency_limit", INT4OID},
	[INSERT_VERSION_TIMEOUT] = {"version_timeout", INTERVALOID},
};
static DurableStatement queue_insert = {
	.name = "queue_insert",
	.sql = "INSERT INTO durable.queues (queue_name, partition_base, partitions,"
	" lease, max_attempts, retry_base, retry_cap, deadline,"
	" retry_capacity, retry_refill_rate, retry_tokens, retry_tokens_at,"
	" progress_timeout, notify, created_at, concurrency_limit,"
	" version_timeout)"
	" VALUES ($queue, $partition_base, $partitions, $lease, $max_attempts,"
	" $retry_base, $retry_cap, $deadline, $retry_capacity, $retry_refill_rate,"
	" COALESCE($retry_capacity, 0), $now, $progress_timeout, $notify, $now,"
	" $concurrency_limit, $version_timeout)"
	" ON CONFLICT (queue_name) DO NOTHING",
	DURABLE_PARAMS(queue_insert_params),
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
	Datum		args[INSERT_NPARAMS];
	char		nulls[INSERT_NPARAMS];

	memset(nulls, ' ', sizeof(nulls));
	args[INSERT_QUEUE] = CStringGetTextDatum(queue);
	args[INSERT_PARTITION_BASE] = Int32GetDatum(queue_partition_base(queue));
	args[INSERT_PARTITIONS] = Int32GetDatum(settings->partitions);
	args[INSERT_LEASE] = PointerGetDatum(settings->lease);
	args[INSERT_MAX_ATTEMPTS] = Int32GetDatum(settings->max_attempts);
	args[INSERT_RETRY_BASE] = Int32GetDatum(settings->retry_base);
	args[INSERT_RETRY_CAP] = Int32GetDatum(settings->retry_cap);
	bind_interval(args, nulls, INSERT_DEADLINE, settings->deadline);
	bind_int(args, nulls, INSERT_RETRY_CAPACITY, settings->retry_capacity);
	args[INSERT_RETRY_REFILL_RATE] = Float8GetDatum(settings->retry_refill_rate);
	args[INSERT_NOW] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	bind_interval(args, nulls, INSERT_PROGRESS_TIMEOUT, settings->progress_timeout);
	args[INSERT_NOTIFY] = BoolGetDatum(settings->notify);
	bind_int(args, nulls, INSERT_CONCURRENCY_LIMIT, settings->concurrency_limit);
	bind_interval(args, nulls, INSERT_VERSION_TIMEOUT, settings->version_timeout);
	if (DurableRun(&queue_insert, args, nulls, SPI_OK_INSERT, 0).rows == 0)
		ereport(ERROR,
				errcode(ERRCODE_DUPLICATE_OBJECT),
				errmsg("queue \"%s\" already exists", queue),
				errhint("Change its settings with durable_alter_queue()."));
}

enum
{
	ALTER_QUEUE,
	ALTER_LEASE,
	ALTER_MAX_ATTEMPTS,
	ALTER_RETRY_BASE,
	ALTER_RETRY_CAP,
	ALTER_DEADLINE,
	ALTER_RETRY_CAPACITY,
	ALTER_RETRY_REFILL_RATE,
	ALTER_PROGRESS_TIMEOUT,
	ALTER_NOTIFY,
	ALTER_CLEAR_DEADLINE,
	ALTER_CLEAR_RETRY_CAPACITY,
	ALTER_CLEAR_PROGRESS_TIMEOUT,
	ALTER_CONCURRENCY_LIMIT,
	ALTER_CLEAR_CONCURRENCY_LIMIT,
	ALTER_VERSION_TIMEOUT,
	ALTER_CLEAR_VERSION_TIMEOUT,
	ALTER_NPARAMS
};
static const DurableParam queue_alter_params[ALTER_NPARAMS] = {
	[ALTER_QUEUE] = {"queue", TEXTOID},
	[ALTER_LEASE] = {"lease", INTERVALOID},
	[ALTER_MAX_ATTEMPTS] = {"max_attempts", INT4OID},
	[ALTER_RETRY_BASE] = {"retry_base", INT4OID},
	[ALTER_RETRY_CAP] = {"retry_cap", INT4OID},
	[ALTER_DEADLINE] = {"deadline", INTERVALOID},
	[ALTER_RETRY_CAPACITY] = {"retry_capacity", INT4OID},
	[ALTER_RETRY_REFILL_RATE] = {"retry_refill_rate", FLOAT8OID},
	[ALTER_PROGRESS_TIMEOUT] = {"progress_timeout", INTERVALOID},
	[ALTER_NOTIFY] = {"notify", BOOLOID},
	[ALTER_CLEAR_DEADLINE] = {"clear_deadline", BOOLOID},
	[ALTER_CLEAR_RETRY_CAPACITY] = {"clear_retry_capacity", BOOLOID},
	[ALTER_CLEAR_PROGRESS_TIMEOUT] = {"clear_progress_timeout", BOOLOID},
	[ALTER_CONCURRENCY_LIMIT] = {"concurrency_limit", INT4OID},
	[ALTER_CLEAR_CONCURRENCY_LIMIT] = {"clear_concurrency_limit", BOOLOID},
	[ALTER_VERSION_TIMEOUT] = {"version_timeout", INTERVALOID},
	[ALTER_CLEAR_VERSION_TIMEOUT] = {"clear_version_timeout", BOOLOID},
};
static DurableStatement queue_alter = {
	.name = "queue_alter",
	.sql = "UPDATE durable.queues SET"
	" lease = COALESCE($lease, lease),"
	" max_attempts = COALESCE($max_attempts, max_attempts),"
	" retry_base = COALESCE($retry_base, retry_base),"
	" retry_cap = COALESCE($retry_cap, retry_cap),"
	" deadline = CASE WHEN $clear_deadline THEN NULL"
	"  ELSE COALESCE($deadline, deadline) END,"
	" retry_capacity = CASE WHEN $clear_retry_capacity THEN NULL"
	"  ELSE COALESCE($retry_capacity, retry_capacity) END,"
	" retry_tokens = CASE WHEN $retry_capacity IS NULL THEN retry_tokens"
	"  WHEN retry_capacity IS NULL THEN $retry_capacity::float8"
	"  ELSE LEAST(retry_tokens, $retry_capacity::float8) END,"
	" retry_refill_rate = COALESCE($retry_refill_rate, retry_refill_rate),"
	" progress_timeout = CASE WHEN $clear_progress_timeout THEN NULL"
	"  ELSE COALESCE($progress_timeout, progress_timeout) END,"
	" notify = COALESCE($notify, notify),"
	" concurrency_limit = CASE WHEN $clear_concurrency_limit THEN NULL"
	"  ELSE COALESCE($concurrency_limit, concurrency_limit) END,"
	" version_timeout = CASE WHEN $clear_version_timeout THEN NULL"
	"  ELSE COALESCE($version_timeout, version_timeout) END"
	" WHERE queue_name = $queue",
	DURABLE_PARAMS(queue_alter_params),
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
	Datum		args[ALTER_NPARAMS];
	char		nulls[ALTER_NPARAMS];

	memset(nulls, ' ', sizeof(nulls));
	args[ALTER_QUEUE] = CStringGetTextDatum(queue);
	bind_interval(args, nulls, ALTER_LEASE, settings->lease);
	bind_int(args, nulls, ALTER_MAX_ATTEMPTS, settings->max_attempts);
	bind_int(args, nulls, ALTER_RETRY_BASE, settings->retry_base);
	bind_int(args, nulls, ALTER_RETRY_CAP, settings->retry_cap);
	bind_interval(args, nulls, ALTER_DEADLINE, settings->deadline);
	bind_int(args, nulls, ALTER_RETRY_CAPACITY, settings->retry_capacity);
	args[ALTER_RETRY_REFILL_RATE] = Float8GetDatum(settings->retry_refill_rate);
	nulls[ALTER_RETRY_REFILL_RATE] = settings->retry_refill_rate > 0 ? ' ' : 'n';
	bind_interval(args, nulls, ALTER_PROGRESS_TIMEOUT, settings->progress_timeout);
	args[ALTER_NOTIFY] = BoolGetDatum(settings->notify);
	nulls[ALTER_NOTIFY] = settings->has_notify ? ' ' : 'n';
	args[ALTER_CLEAR_DEADLINE] = BoolGetDatum(settings->clear_deadline);
	args[ALTER_CLEAR_RETRY_CAPACITY] = BoolGetDatum(settings->clear_retry_capacity);
	args[ALTER_CLEAR_PROGRESS_TIMEOUT] = BoolGetDatum(settings->clear_progress_timeout);
	bind_int(args, nulls, ALTER_CONCURRENCY_LIMIT, settings->concurrency_limit);
	args[ALTER_CLEAR_CONCURRENCY_LIMIT] = BoolGetDatum(settings->clear_concurrency_limit);
	bind_interval(args, nulls, ALTER_VERSION_TIMEOUT, settings->version_timeout);
	args[ALTER_CLEAR_VERSION_TIMEOUT] = BoolGetDatum(settings->clear_version_timeout);
	if (DurableRun(&queue_alter, args, nulls, SPI_OK_UPDATE, 0).rows == 0)
		DurableReportNoQueue(queue);
}

enum
{
	PAUSED_QUEUE,
	PAUSED_PAUSED,
	PAUSED_NPARAMS
};
static const DurableParam queue_set_paused_params[PAUSED_NPARAMS] = {
	[PAUSED_QUEUE] = {"queue", TEXTOID},
	[PAUSED_PAUSED] = {"paused", BOOLOID},
};
static DurableStatement queue_set_paused = {
	.name = "queue_set_paused",
	.sql = "UPDATE durable.queues SET paused = $paused"
	" WHERE queue_name = $queue",
	DURABLE_PARAMS(queue_set_paused_params),
};

/* who paused or resumed a queue, or one of its partitions (or NULL) */
enum
{
	LOG_QUEUE,
	LOG_PAUSED,
	LOG_PARTITION,
	LOG_NOW,
	LOG_ROLE,
	LOG_NPARAMS
};
static const DurableParam queue_log_params[LOG_NPARAMS] = {
	[LOG_QUEUE] = {"queue", TEXTOID},
	[LOG_PAUSED] = {"paused", BOOLOID},
	[LOG_PARTITION] = {"partition", INT4OID},
	[LOG_NOW] = {"now", TIMESTAMPTZOID},
	[LOG_ROLE] = {"role", TEXTOID},
};
static DurableStatement queue_log = {
	.name = "queue_log",
	.sql = "INSERT INTO durable.queue_log (queue_name, at, kind, partition_key, role)"
	" VALUES ($queue, $now,"
	" CASE WHEN $paused THEN 'paused' ELSE 'resumed' END, $partition, $role)",
	DURABLE_PARAMS(queue_log_params),
};

/* a partition of a queue paused (or resumed, paused false), once */
enum
{
	PARTITION_PAUSED_QUEUE,
	PARTITION_PAUSED_PAUSED,
	PARTITION_PAUSED_PARTITION,
	PARTITION_PAUSED_NPARAMS
};
static const DurableParam queue_set_partition_paused_params[PARTITION_PAUSED_NPARAMS] = {
	[PARTITION_PAUSED_QUEUE] = {"queue", TEXTOID},
	[PARTITION_PAUSED_PAUSED] = {"paused", BOOLOID},
	[PARTITION_PAUSED_PARTITION] = {"partition", INT4OID},
};
static DurableStatement queue_set_partition_paused = {
	.name = "queue_set_partition_paused",
	.sql = "UPDATE durable.queues SET paused_partitions ="
	" ARRAY(SELECT p FROM pg_catalog.unnest(paused_partitions) p"
	"  WHERE p <> $partition"
	"  UNION SELECT $partition WHERE $paused ORDER BY 1)"
	" WHERE queue_name = $queue",
	DURABLE_PARAMS(queue_set_partition_paused_params),
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
	Datum		log[LOG_NPARAMS];
	char		nulls[LOG_NPARAMS] = {' ', ' ', ' ', ' ', ' '};
	DurableQueue settings;

	if (partition < 0)
	{
		Datum		args[PAUSED_NPARAMS];

		args[PAUSED_QUEUE] = CStringGetTextDatum(queue);
		args[PAUSED_PAUSED] = BoolGetDatum(paused);
		if (DurableRun(&queue_set_paused, args, NULL, SPI_OK_UPDATE, 0).rows == 0)
			DurableReportNoQueue(queue);
		nulls[LOG_PARTITION] = 'n';
	}
	else
	{
		Datum		args[PARTITION_PAUSED_NPARAMS];

		DurableQueueGet(queue, &settings);
		DurableCheckQueuePartition(queue, &settings, partition);
		args[PARTITION_PAUSED_QUEUE] = CStringGetTextDatum(queue);
		args[PARTITION_PAUSED_PAUSED] = BoolGetDatum(paused);
		args[PARTITION_PAUSED_PARTITION] = Int32GetDatum(partition);
		DurableRun(&queue_set_partition_paused, args, NULL, SPI_OK_UPDATE, 0);
	}
	log[LOG_QUEUE] = CStringGetTextDatum(queue);
	log[LOG_PAUSED] = BoolGetDatum(paused);
	log[LOG_PARTITION] = Int32GetDatum(partition);
	log[LOG_NOW] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	log[LOG_ROLE] = CStringGetTextDatum(DurableCallerName());
	DurableRun(&queue_log, log, nulls, SPI_OK_INSERT, 0);
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
