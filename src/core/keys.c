/*-------------------------------------------------------------------------
 *
 * keys.c
 *	  The keys of an enqueue: how long an idempotency key or a concurrency
 *	  key may be, which of a queue's partitions a key goes to, and the
 *	  task a key was first enqueued with (enqueue.c adds the tasks).
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

/* idempotency keys and concurrency keys are names, not documents */
#define DURABLE_MAX_KEY_LEN 255

static int
key_partition_index(const char *key, int partitions)
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	uint32		head;

	DurableSha256(key, strlen(key), digest);
	head = ((uint32) digest[0] << 24) | ((uint32) digest[1] << 16) |
		((uint32) digest[2] << 8) | (uint32) digest[3];
	return (int) (head % (uint32) partitions);
}

/*
 * DurableQueueKeyPartition
 *		The partition of the queue that a name within it (an event's) goes
 *		to: one of the queue's own, so that on Citus its rows distribute by
 *		the queue's partitioning as the queue's tasks do.  Stable, since a
 *		queue's partition count is fixed when it is created.
 */
int32
DurableQueueKeyPartition(const DurableQueue *settings, const char *key)
{
	return DurableQueuePartition(settings,
								 key_partition_index(key, settings->partitions));
}

/*
 * DurableCheckKey
 *		22023 unless an idempotency key or a concurrency key (what) has
 *		between 1 and DURABLE_MAX_KEY_LEN bytes.
 */
void
DurableCheckKey(const char *key, const char *what)
{
	if (key[0] == '\0' || strlen(key) > DURABLE_MAX_KEY_LEN)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must have between 1 and %d bytes", what,
					   DURABLE_MAX_KEY_LEN),
				strcmp(what, "idempotency key") == 0 ?
				errhint("Derive long keys with durable_idempotency_key().") : 0);
}

/* the task a key was first enqueued with, and the hash of its request */
enum
{
	EXISTING_TASK_ID,
	EXISTING_REQUEST_HASH,
	EXISTING_NCOLUMNS
};

static const DurableColumn existing_columns[EXISTING_NCOLUMNS] = {
	[EXISTING_TASK_ID] = {"task_id", INT8OID},
	[EXISTING_REQUEST_HASH] = {"request_hash", BYTEAOID},
};

enum
{
	EXISTING_PARTITION,
	EXISTING_QUEUE,
	EXISTING_KEY,
	EXISTING_NPARAMS
};
static const DurableParam enqueue_existing_params[EXISTING_NPARAMS] = {
	[EXISTING_PARTITION] = {"partition", INT4OID},
	[EXISTING_QUEUE] = {"queue", TEXTOID},
	[EXISTING_KEY] = {"key", TEXTOID},
};
static DurableStatement enqueue_existing = {
	.name = "enqueue_existing",
	.sql = "SELECT task_id, request_hash FROM durable.task_keys"
	" WHERE partition_key = $partition"
	" AND queue_name = $queue"
	" AND idempotency_key = $key",
	DURABLE_PARAMS(enqueue_existing_params),
	DURABLE_COLUMNS(existing_columns),
};

/*
 * DurableEnqueuedBefore
 *		The task a key was first enqueued with: the same request gets the
 *		same task, another request an error.
 */
int64
DurableEnqueuedBefore(int32 partition, const char *queue, const char *key,
					  bytea *request_hash, Jsonb *payload)
{
	DurableResult res;
	Datum		existing[EXISTING_NPARAMS];
	bool		isnull;
	bytea	   *first_hash;
	int64		task_id;

	existing[EXISTING_PARTITION] = Int32GetDatum(partition);
	existing[EXISTING_QUEUE] = CStringGetTextDatum(queue);
	existing[EXISTING_KEY] = CStringGetTextDatum(key);
	res = DurableRun(&enqueue_existing, existing, NULL,
					 SPI_OK_SELECT, 1);
	if (res.rows == 0)
		ereport(ERROR,
				errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				errmsg("could not serialize access due to a concurrent enqueue of idempotency key \"%s\"",
					   key));
	task_id = DurableGetInt64(res, 0, EXISTING_TASK_ID);
	first_hash = DatumGetByteaPP(DurableGetDatum(res, 0, EXISTING_REQUEST_HASH, &isnull));
	if (isnull || !DurableRequestMatches(first_hash, request_hash, payload))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_IDEMPOTENCY_CONFLICT),
				errmsg("idempotency key \"%s\" was already used for a different request",
					   key),
				errdetail("Task %lld in queue \"%s\" was enqueued with this key and another payload.",
						  (long long) task_id, queue),
				errhint("Use a new idempotency key for a new request."));
	return task_id;
}
