/*-------------------------------------------------------------------------
 *
 * enqueue.c
 *	  Adding tasks, idempotently: one, a batch, a child, an occurrence.
 *
 * With an idempotency key, the key's partition comes from a hash of the
 * key, and a unique index on (partition, queue, key) makes the insert
 * idempotent with ON CONFLICT DO NOTHING: a concurrent enqueue of the same
 * key waits for the first one to commit or roll back.  The key is bound to
 * the hash of the payload it was first used with.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* idempotency keys and concurrency keys are names, not documents */
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

/* the partition of a new task: its key's, or the next in turn */
static int32
task_partition(const DurableQueue *settings, const char *key)
{
	if (key != NULL)
		return DurableQueuePartition(settings,
									 key_partition_index(key, settings->partitions));
	if (next_partition_index == 0)
		next_partition_index = (uint32) MyProcPid;
	return DurableQueuePartition(settings,
								 (int) (next_partition_index++ % (uint32) settings->partitions));
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

static void
check_key(const char *key, const char *what)
{
	if (key[0] == '\0' || strlen(key) > DURABLE_MAX_KEY_LEN)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must have between 1 and %d bytes", what,
					   DURABLE_MAX_KEY_LEN),
				strcmp(what, "idempotency key") == 0 ?
				errhint("Derive long keys with durable_idempotency_key().") : 0);
}

/*
 * DurableEnqueueArgs
 *		Read the arguments that durable_enqueue, durable_enqueue_batch and
 *		durable_spawn share, from argno on: run_at, priority, class,
 *		max_attempts, deadline, workflow_version, metadata (and, when
 *		key_argno >= 0, the concurrency key there).
 */
void
DurableEnqueueArgs(FunctionCallInfo fcinfo, int argno, int key_argno,
				   DurableEnqueueRequest *req)
{
	if (!PG_ARGISNULL(argno))
		req->run_at = PG_GETARG_TIMESTAMPTZ(argno);
	if (req->run_at != 0 && TIMESTAMP_NOT_FINITE(req->run_at))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("run_at must be a finite time"));
	DurableRequireArg(fcinfo, argno + 1, "priority");
	req->priority = PG_GETARG_INT32(argno + 1);
	DurableRequireArg(fcinfo, argno + 2, "class");
	req->class = text_to_cstring(PG_GETARG_TEXT_PP(argno + 2));
	(void) DurableParseActivityClass(req->class);
	if (!PG_ARGISNULL(argno + 3))
		req->max_attempts = DurableIntArgAtLeast(fcinfo, argno + 3, "max_attempts", 1);
	if (!PG_ARGISNULL(argno + 4))
		req->deadline = DurablePositiveIntervalArg(fcinfo, argno + 4, "deadline");
	req->workflow_version = DurableTextArg(fcinfo, argno + 5, "workflow_version");
	req->metadata = DurableJsonbArg(fcinfo, argno + 6, "metadata");
	if (key_argno >= 0 && !PG_ARGISNULL(key_argno))
	{
		req->concurrency_key = text_to_cstring(PG_GETARG_TEXT_PP(key_argno));
		check_key(req->concurrency_key, "concurrency key");
	}
}

/* the parameters of STMT_ENQUEUE and STMT_ENQUEUE_KEYED */
#define ENQUEUE_NARGS 17

/*
 * DurableEnqueue
 *		Add one task to a queue whose row the caller has read with
 *		DurableQueueGetShared.  Returns the new task's id, or the first
 *		task's id for a key seen before with the same payload; raises 55U03
 *		for a key seen with another payload.
 */
int64
DurableEnqueue(const DurableEnqueueRequest *req, const DurableQueue *settings,
			   TimestampTz now)
{
	Datum		args[ENQUEUE_NARGS];
	char		nulls[ENQUEUE_NARGS];
	const char *key = req->idempotency_key;
	TimestampTz run_at = req->run_at != 0 ? req->run_at : now;
	bytea	   *request_hash = NULL;
	int32		partition;
	int64		task_id;

	DurableCheckPayloadSize(VARSIZE(req->payload), "payload");
	DurableEnsureHistoryDays(now);
	if (key != NULL)
	{
		check_key(key, "idempotency key");
		request_hash = DurableJsonbHash(req->payload);
	}
	partition = task_partition(settings, key);

	memset(nulls, ' ', sizeof(nulls));
	args[0] = Int32GetDatum(partition);
	args[1] = Int64GetDatum(DURABLE_TASK_ID_SUFFIX(partition, DurableNodeId()));
	args[2] = CStringGetTextDatum(req->class);
	args[3] = Int32GetDatum(req->priority);
	args[4] = Int32GetDatum(req->max_attempts > 0 ? req->max_attempts :
							settings->max_attempts);
	args[5] = TimestampTzGetDatum(run_at);
	args[6] = TimestampTzGetDatum(now);
	if (req->deadline != NULL)
		args[7] = IntervalPGetDatum(req->deadline);
	else
	{
		args[7] = IntervalPGetDatum(&settings->deadline);
		nulls[7] = settings->has_deadline ? ' ' : 'n';
	}
	args[8] = CStringGetTextDatum(req->queue);
	args[9] = key ? CStringGetTextDatum(key) : (Datum) 0;
	nulls[9] = key ? ' ' : 'n';
	args[10] = PointerGetDatum(request_hash);
	nulls[10] = key ? ' ' : 'n';
	args[11] = PointerGetDatum(req->workflow_version);
	nulls[11] = req->workflow_version ? ' ' : 'n';
	args[12] = JsonbPGetDatum(req->payload);
	args[13] = JsonbPGetDatum(req->metadata);
	nulls[13] = req->metadata ? ' ' : 'n';
	args[14] = CStringGetTextDatum(DurableCallerName());
	args[15] = Int64GetDatum(req->parent_id);
	nulls[15] = req->parent_id != 0 ? ' ' : 'n';
	args[16] = req->concurrency_key ? CStringGetTextDatum(req->concurrency_key) : (Datum) 0;
	nulls[16] = req->concurrency_key ? ' ' : 'n';

	/* a key is bound in durable.task_keys, where it outlives the task's run */
	if (DurableExecuteStmt(key ? STMT_ENQUEUE_KEYED : STMT_ENQUEUE, args, nulls,
					   SPI_OK_INSERT_RETURNING, 0) == 1)
	{
		task_id = DurableResultInt64(0, 1);
		if (settings->notify && run_at <= now)
			Async_Notify(DURABLE_READY_CHANNEL, req->queue);
		return task_id;
	}
	return DurableEnqueuedBefore(partition, req->queue, key, request_hash,
								 req->payload);
}

/*
 * DurableEnqueuedBefore
 *		The task a key was first enqueued with: the same request gets the
 *		same task, another request an error.
 */
int64
DurableEnqueuedBefore(int32 partition, const char *queue, const char *key,
					  bytea *request_hash, Jsonb *payload)
{
	Datum		existing[3];
	bool		isnull;
	bytea	   *first_hash;
	int64		task_id;

	existing[0] = Int32GetDatum(partition);
	existing[1] = CStringGetTextDatum(queue);
	existing[2] = CStringGetTextDatum(key);
	if (DurableExecuteStmt(STMT_ENQUEUE_EXISTING, existing, NULL,
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
	return task_id;
}

/*
 * durable_enqueue(queue text, payload jsonb = '{}', idempotency_key text = NULL,
 *		run_at timestamptz = NULL, priority int = 0, class text = 'idempotent',
 *		max_attempts int = NULL, deadline interval = NULL,
 *		workflow_version text = NULL, metadata jsonb = NULL,
 *		concurrency_key text = NULL) RETURNS bigint
 *
 * Returns the new task's id, or the first task's id for a key seen before
 * with the same payload.  Raises 55U03 for a key seen with another payload,
 * 42704 for an unknown queue, 22023/22004/54000 for bad arguments.
 */
PG_FUNCTION_INFO_V1(durable_enqueue);
Datum
durable_enqueue(PG_FUNCTION_ARGS)
{
	DurableEnqueueRequest req = {0};
	DurableQueue settings;
	int64		task_id;

	req.queue = DurableNameArg(fcinfo, 0, "queue name");
	DurableRequireArg(fcinfo, 1, "payload");
	req.payload = DurableJsonbArg(fcinfo, 1, "payload");
	if (!PG_ARGISNULL(2))
		req.idempotency_key = text_to_cstring(PG_GETARG_TEXT_PP(2));
	DurableEnqueueArgs(fcinfo, 3, PG_NARGS() > 10 ? 10 : -1, &req);

	SPI_connect();
	DurableQueueGetShared(req.queue, &settings);
	DurableCheckRestrictedQueue(req.queue, settings.restricted, DURABLE_PRIV_ENQUEUE);
	task_id = DurableEnqueue(&req, &settings, GetCurrentTransactionStartTimestamp());
	SPI_finish();
	PG_RETURN_INT64(task_id);
}

/* the elements of a one-dimensional text[] or jsonb[] argument */
static int
array_arg(FunctionCallInfo fcinfo, int argno, Oid elemtype, const char *name,
		  Datum **elems, bool **elnulls)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(argno);
	int			n;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				errmsg("%s must be a one-dimensional array", name));
	deconstruct_array(array, elemtype, -1, false, TYPALIGN_INT,
					  elems, elnulls, &n);
	return n;
}

/* 22004 for a null payload of a batch, 54000 for one too large */
static void
check_batch_element(int i, Datum *payloads, bool *payload_nulls)
{
	if (payload_nulls[i])
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("payload %d of the batch is null", i + 1));
	DurableCheckPayloadSize(VARSIZE_ANY(DatumGetPointer(payloads[i])), "payload");
}

/* the ids of a batch, as the array it returns */
static ArrayType *
id_array(const int64 *result, int n)
{
	Datum	   *ids = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		ids[i] = Int64GetDatum(result[i]);
	return construct_array(ids, n, INT8OID, sizeof(int64),
						   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
}

/*
 * durable_enqueue_batch(queue text, payloads jsonb[], idempotency_keys
 *		text[] = NULL, run_at timestamptz = NULL, priority int = 0,
 *		class text = 'idempotent', max_attempts int = NULL,
 *		deadline interval = NULL, workflow_version text = NULL,
 *		metadata jsonb = NULL, concurrency_keys text[] = NULL)
 *		RETURNS bigint[]
 *
 * Adds a task per payload, in one statement, and returns their ids in
 * order.  Each element follows durable_enqueue's rules for its own key (a
 * NULL element has none): a key seen before with the same payload gives
 * its first task's id (also a key repeated within the batch), with another
 * payload 55U03 for the whole batch.  All or nothing: any error adds none.
 */
PG_FUNCTION_INFO_V1(durable_enqueue_batch);
Datum
durable_enqueue_batch(PG_FUNCTION_ARGS)
{
	DurableEnqueueRequest req = {0};
	DurableQueue settings;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	Datum	   *payloads;
	bool	   *payload_nulls;
	Datum	   *keys = NULL;
	bool	   *key_nulls = NULL;
	Datum	   *ckeys = NULL;
	bool	   *ckey_nulls = NULL;
	int			n;
	Datum	   *partitions;
	Datum	   *ids;
	Datum	   *hashes;
	bool	   *hash_nulls;
	int64	   *result;
	Datum		args[16];
	char		nulls[16];
	uint64		existing;
	int			dims[1];
	int			lbs[1] = {1};

	req.queue = DurableNameArg(fcinfo, 0, "queue name");
	DurableRequireArg(fcinfo, 1, "payloads");
	n = array_arg(fcinfo, 1, JSONBOID, "payloads", &payloads, &payload_nulls);
	if (n > DURABLE_MAX_BATCH)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("a batch can enqueue at most %d tasks", DURABLE_MAX_BATCH),
				errdetail("The batch has %d payloads.", n));
	if (!PG_ARGISNULL(2) &&
		array_arg(fcinfo, 2, TEXTOID, "idempotency_keys", &keys, &key_nulls) != n)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("idempotency_keys must have one element per payload"));
	if (!PG_ARGISNULL(10) &&
		array_arg(fcinfo, 10, TEXTOID, "concurrency_keys", &ckeys, &ckey_nulls) != n)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("concurrency_keys must have one element per payload"));
	DurableEnqueueArgs(fcinfo, 3, -1, &req);

	result = palloc(sizeof(int64) * Max(n, 1));
	partitions = palloc(sizeof(Datum) * Max(n, 1));
	ids = palloc(sizeof(Datum) * Max(n, 1));
	hashes = palloc0(sizeof(Datum) * Max(n, 1));
	hash_nulls = palloc(sizeof(bool) * Max(n, 1));

	SPI_connect();
	DurableQueueGetShared(req.queue, &settings);
	DurableCheckRestrictedQueue(req.queue, settings.restricted, DURABLE_PRIV_ENQUEUE);
	if (DurableDistributed())
	{
		/* on Citus, task by task, each on its own shard */
		for (int i = 0; i < n; i++)
		{
			DurableEnqueueRequest one = req;

			check_batch_element(i, payloads, payload_nulls);
			one.payload = DatumGetJsonbP(payloads[i]);
			one.idempotency_key = keys && !key_nulls[i] ?
				TextDatumGetCString(keys[i]) : NULL;
			one.concurrency_key = ckeys && !ckey_nulls[i] ?
				TextDatumGetCString(ckeys[i]) : NULL;
			result[i] = DurableEnqueue(&one, &settings, now);
		}
		SPI_finish();
		PG_RETURN_ARRAYTYPE_P(id_array(result, n));
	}
	if (n > 0)
	{
		Datum		count = Int32GetDatum(n);

		DurableExecuteStmt(STMT_TASK_IDS, &count, NULL, SPI_OK_SELECT, 0);
		for (int i = 0; i < n; i++)
		{
			char	   *key = NULL;

			check_batch_element(i, payloads, payload_nulls);
			if (keys && !key_nulls[i])
			{
				key = TextDatumGetCString(keys[i]);
				check_key(key, "idempotency key");
				hashes[i] = PointerGetDatum(DurableJsonbHash(DatumGetJsonbP(payloads[i])));
			}
			hash_nulls[i] = key == NULL;
			if (ckeys && !ckey_nulls[i])
				check_key(TextDatumGetCString(ckeys[i]), "concurrency key");
			partitions[i] = Int32GetDatum(task_partition(&settings, key));
			result[i] = DurableResultInt64(i, 1) << DURABLE_ID_SHIFT |
				DURABLE_TASK_ID_SUFFIX(DatumGetInt32(partitions[i]), DurableNodeId());
			ids[i] = Int64GetDatum(result[i]);
		}
	}

	dims[0] = n;
	memset(nulls, ' ', sizeof(nulls));
	args[0] = PointerGetDatum(construct_array(partitions, n, INT4OID, sizeof(int32),
											  true, TYPALIGN_INT));
	args[1] = PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64),
											  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[2] = PG_GETARG_DATUM(1);
	if (keys)
		args[3] = PG_GETARG_DATUM(2);
	else
		nulls[3] = 'n';
	args[4] = PointerGetDatum(construct_md_array(hashes, hash_nulls, 1, dims, lbs,
												 BYTEAOID, -1, false, TYPALIGN_INT));
	if (ckeys)
		args[5] = PG_GETARG_DATUM(10);
	else
		nulls[5] = 'n';
	args[6] = CStringGetTextDatum(req.queue);
	args[7] = TimestampTzGetDatum(now);
	args[8] = TimestampTzGetDatum(req.run_at != 0 ? req.run_at : now);
	args[9] = CStringGetTextDatum(req.class);
	args[10] = Int32GetDatum(req.priority);
	args[11] = Int32GetDatum(req.max_attempts > 0 ? req.max_attempts :
							 settings.max_attempts);
	if (req.deadline != NULL)
		args[12] = IntervalPGetDatum(req.deadline);
	else
	{
		args[12] = IntervalPGetDatum(&settings.deadline);
		nulls[12] = settings.has_deadline ? ' ' : 'n';
	}
	args[13] = PointerGetDatum(req.workflow_version);
	nulls[13] = req.workflow_version ? ' ' : 'n';
	args[14] = JsonbPGetDatum(req.metadata);
	nulls[14] = req.metadata ? ' ' : 'n';
	args[15] = CStringGetTextDatum(DurableCallerName());

	/* the statement returns the elements whose key was there before */
	existing = n > 0 ? DurableExecuteStmt(STMT_ENQUEUE_BATCH, args, nulls,
									  SPI_OK_SELECT, 0) : 0;
	if (existing > 0)
	{
		int		   *which = palloc(sizeof(int) * existing);

		for (uint64 r = 0; r < existing; r++)
			which[r] = (int) DurableResultInt64(r, 1) - 1;
		for (uint64 r = 0; r < existing; r++)
		{
			int			i = which[r];

			result[i] = DurableEnqueuedBefore(DatumGetInt32(partitions[i]),
											  req.queue,
											  TextDatumGetCString(keys[i]),
											  DatumGetByteaPP(hashes[i]),
											  DatumGetJsonbP(payloads[i]));
		}
	}
	if (n > 0 && settings.notify && (req.run_at == 0 || req.run_at <= now))
		Async_Notify(DURABLE_READY_CHANNEL, req.queue);
	SPI_finish();
	PG_RETURN_ARRAYTYPE_P(id_array(result, n));
}
