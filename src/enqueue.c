/*-------------------------------------------------------------------------
 *
 * enqueue.c
 *	  Adding tasks, idempotently.
 *
 * With an idempotency key, the key's partition comes from a hash of the
 * key, and a unique index on (partition, queue, key) makes the insert
 * idempotent with ON CONFLICT DO NOTHING: a concurrent enqueue of the same
 * key waits for the first one to commit or roll back.  The key is bound to
 * the hash of the payload it was first used with.
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/xact.h"
#include "commands/async.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* the channel on which durable announces ready work; the payload is the queue */
#define DURABLE_READY_CHANNEL "durable_ready"

/* idempotency keys are names, not documents */
#define DURABLE_MAX_KEY_LEN 255

/* round-robin over a queue's partitions, starting apart in each backend */
static uint32 next_partition_index;

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
 * durable_enqueue(queue text, payload jsonb = '{}', idempotency_key text = NULL,
 *		run_at timestamptz = NULL, priority int = 0, class text = 'idempotent',
 *		max_attempts int = NULL, deadline interval = NULL,
 *		workflow_version text = NULL, metadata jsonb = NULL) RETURNS bigint
 *
 * Returns the new task's id, or the first task's id for a key seen before
 * with the same payload.  Raises 55U03 for a key seen with another payload,
 * 42704 for an unknown queue, 22023/22004/54000 for bad arguments.
 */
PG_FUNCTION_INFO_V1(durable_enqueue);
Datum
durable_enqueue(PG_FUNCTION_ARGS)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	Jsonb	   *payload;
	char	   *key = NULL;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	TimestampTz run_at = now;
	char	   *class;
	DurableQueue settings;
	int32		partition;
	bytea	   *request_hash = NULL;
	Datum		args[15];
	char		nulls[15];
	int64		task_id;

	DurableRequireArg(fcinfo, 1, "payload");
	payload = DurableJsonbArg(fcinfo, 1, "payload");
	if (!PG_ARGISNULL(2))
	{
		key = text_to_cstring(PG_GETARG_TEXT_PP(2));
		if (key[0] == '\0' || strlen(key) > DURABLE_MAX_KEY_LEN)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("idempotency key must have between 1 and %d bytes",
						   DURABLE_MAX_KEY_LEN),
					errhint("Derive long keys with durable_idempotency_key()."));
		request_hash = DurableJsonbHash(payload);
	}
	if (!PG_ARGISNULL(3))
		run_at = PG_GETARG_TIMESTAMPTZ(3);
	if (TIMESTAMP_NOT_FINITE(run_at))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("run_at must be a finite time"));
	DurableRequireArg(fcinfo, 4, "priority");
	DurableRequireArg(fcinfo, 5, "class");
	class = text_to_cstring(PG_GETARG_TEXT_PP(5));
	(void) DurableParseActivityClass(class);

	memset(nulls, ' ', sizeof(nulls));
	if (!PG_ARGISNULL(6))
		args[4] = Int32GetDatum(DurableIntArgAtLeast(fcinfo, 6, "max_attempts", 1));
	if (!PG_ARGISNULL(7))
		args[7] = PointerGetDatum(DurablePositiveIntervalArg(fcinfo, 7, "deadline"));
	args[11] = PointerGetDatum(DurableTextArg(fcinfo, 8, "workflow_version"));
	nulls[11] = PG_ARGISNULL(8) ? 'n' : ' ';
	args[13] = JsonbPGetDatum(DurableJsonbArg(fcinfo, 9, "metadata"));
	nulls[13] = PG_ARGISNULL(9) ? 'n' : ' ';

	SPI_connect();
	DurableQueueGetShared(queue, &settings);
	DurableCheckRestrictedQueue(queue, settings.restricted, DURABLE_PRIV_ENQUEUE);
	if (key != NULL)
		partition = DurableQueuePartition(&settings,
										  key_partition_index(key, settings.partitions));
	else
	{
		if (next_partition_index == 0)
			next_partition_index = (uint32) MyProcPid;
		partition = DurableQueuePartition(&settings,
										  (int) (next_partition_index++ % (uint32) settings.partitions));
	}

	args[0] = Int32GetDatum(partition);
	args[1] = Int64GetDatum(DURABLE_TASK_ID_SUFFIX(partition, durable_node_id));
	args[2] = CStringGetTextDatum(class);
	args[3] = PG_GETARG_DATUM(4);
	if (PG_ARGISNULL(6))
		args[4] = Int32GetDatum(settings.max_attempts);
	args[5] = TimestampTzGetDatum(run_at);
	args[6] = TimestampTzGetDatum(now);
	if (PG_ARGISNULL(7))
	{
		args[7] = IntervalPGetDatum(&settings.deadline);
		nulls[7] = settings.has_deadline ? ' ' : 'n';
	}
	args[8] = CStringGetTextDatum(queue);
	args[9] = key ? CStringGetTextDatum(key) : (Datum) 0;
	nulls[9] = key ? ' ' : 'n';
	args[10] = PointerGetDatum(request_hash);
	nulls[10] = key ? ' ' : 'n';
	args[12] = JsonbPGetDatum(payload);
	args[14] = CStringGetTextDatum(DurableCallerName());

	/* a key is bound in durable.task_keys, where it outlives the task's run */
	if (DurableExecute(key ? STMT_ENQUEUE_KEYED : STMT_ENQUEUE, args, nulls,
					   SPI_OK_INSERT_RETURNING, 0) == 1)
	{
		task_id = DurableResultInt64(0, 1);
		if (settings.notify && run_at <= now)
			Async_Notify(DURABLE_READY_CHANNEL, queue);
	}
	else
	{
		Datum		existing[3] = {args[0], args[8], args[9]};
		bool		isnull;
		bytea	   *first_hash;

		/* the key exists: same request, same task; another request, error */
		if (DurableExecute(STMT_ENQUEUE_EXISTING, existing, NULL,
						   SPI_OK_SELECT, 1) == 0)
			ereport(ERROR,
					errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					errmsg("could not serialize access due to a concurrent enqueue of idempotency key \"%s\"",
						   key));
		task_id = DurableResultInt64(0, 1);
		first_hash = DatumGetByteaPP(DurableResultDatum(0, 2, &isnull));
		if (isnull || !DurableRequestMatches(first_hash, request_hash, payload))
			ereport(ERROR,
					errcode(ERRCODE_DURABLE_IDEMPOTENCY_CONFLICT),
					errmsg("idempotency key \"%s\" was already used for a different request",
						   key),
					errdetail("Task %lld in queue \"%s\" was enqueued with this key and another payload.",
							  (long long) task_id, queue),
					errhint("Use a new idempotency key for a new request."));
	}
	SPI_finish();
	PG_RETURN_INT64(task_id);
}
