/*-------------------------------------------------------------------------
 *
 * enqueue_batch.c
 *	  Adding many tasks in one statement, all or none, each by
 *	  enqueue.c's rules for its own keys (durable_enqueue_batch).
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"
#include "core/sql.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

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

/* the sequence numbers of new tasks' ids */
enum
{
	IDS_NEXTVAL,
	IDS_NCOLUMNS
};

static const DurableColumn ids_columns[IDS_NCOLUMNS] = {
	[IDS_NEXTVAL] = {"nextval", INT8OID},
};

enum
{
	IDS_COUNT,
	IDS_NPARAMS
};
static const DurableParam task_ids_params[IDS_NPARAMS] = {
	[IDS_COUNT] = {"count", INT4OID},
};
static DurableStatement task_ids = {
	.name = "task_ids",
	.sql = "SELECT pg_catalog.nextval('durable.task_seq'::pg_catalog.regclass)"
	" FROM pg_catalog.generate_series(1, $count)",
	DURABLE_PARAMS(task_ids_params),
	DURABLE_COLUMNS(ids_columns),
};

/* the elements of a batch whose key was there before, counted from 1 */
enum
{
	BEFORE_N,
	BEFORE_NCOLUMNS
};

static const DurableColumn before_columns[BEFORE_NCOLUMNS] = {
	[BEFORE_N] = {"n", INT8OID},
};

enum
{
	BATCH_PARTITIONS,
	BATCH_TASK_IDS,
	BATCH_PAYLOADS,
	BATCH_IDEMPOTENCY_KEYS,
	BATCH_REQUEST_HASHES,
	BATCH_CONCURRENCY_KEYS,
	BATCH_QUEUE,
	BATCH_NOW,
	BATCH_RUN_AT,
	BATCH_CLASS,
	BATCH_PRIORITY,
	BATCH_MAX_ATTEMPTS,
	BATCH_DEADLINE,
	BATCH_WORKFLOW_VERSION,
	BATCH_METADATA,
	BATCH_ROLE,
	BATCH_KEY_PARTITIONS,
	BATCH_NPARAMS
};
static const DurableParam enqueue_batch_params[BATCH_NPARAMS] = {
	[BATCH_PARTITIONS] = {"partitions", INT4ARRAYOID},
	[BATCH_TASK_IDS] = {"task_ids", INT8ARRAYOID},
	[BATCH_PAYLOADS] = {"payloads", JSONBARRAYOID},
	[BATCH_IDEMPOTENCY_KEYS] = {"idempotency_keys", TEXTARRAYOID},
	[BATCH_REQUEST_HASHES] = {"request_hashes", BYTEAARRAYOID},
	[BATCH_CONCURRENCY_KEYS] = {"concurrency_keys", TEXTARRAYOID},
	[BATCH_QUEUE] = {"queue", TEXTOID},
	[BATCH_NOW] = {"now", TIMESTAMPTZOID},
	[BATCH_RUN_AT] = {"run_at", TIMESTAMPTZOID},
	[BATCH_CLASS] = {"class", TEXTOID},
	[BATCH_PRIORITY] = {"priority", INT4OID},
	[BATCH_MAX_ATTEMPTS] = {"max_attempts", INT4OID},
	[BATCH_DEADLINE] = {"deadline", INTERVALOID},
	[BATCH_WORKFLOW_VERSION] = {"workflow_version", TEXTOID},
	[BATCH_METADATA] = {"metadata", JSONBOID},
	[BATCH_ROLE] = {"role", TEXTOID},
	[BATCH_KEY_PARTITIONS] = {"key_partitions", INT4ARRAYOID},
};
static DurableStatement enqueue_batch = {
	.name = "enqueue_batch",
	.sql = "WITH i AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($partitions::int4[]),"
	"  pg_catalog.unnest($task_ids::int8[]), pg_catalog.unnest($payloads::jsonb[]),"
	"  pg_catalog.unnest($idempotency_keys::text[]),"
	"  pg_catalog.unnest($request_hashes::bytea[]),"
	"  pg_catalog.unnest($concurrency_keys::text[]),"
	"  pg_catalog.unnest($key_partitions::int4[]))"
	"  WITH ORDINALITY AS i(partition_key, task_id, payload, idempotency_key,"
	"  request_hash, concurrency_key, key_partition, n)),"
	" k AS (INSERT INTO durable.task_keys (partition_key, queue_name,"
	"  idempotency_key, task_id, request_hash, created_at)"
	"  SELECT key_partition, $queue, idempotency_key, task_id, request_hash, $now"
	"  FROM i WHERE idempotency_key IS NOT NULL ORDER BY n"
	"  ON CONFLICT (partition_key, queue_name, idempotency_key) DO NOTHING"
	"  RETURNING task_id),"
	" t AS (INSERT INTO durable.live_tasks (partition_key, task_id, state,"
	"  class, priority, max_attempts, run_at, created_at, deadline,"
	"  queue_name, idempotency_key, request_hash, workflow_version,"
	"  payload, metadata, concurrency_key, versions)"
	"  SELECT partition_key, task_id, 'ready', $class::durable.activity_class,"
	"  $priority, $max_attempts, $run_at, $now, $deadline, $queue,"
	"  idempotency_key, request_hash, $workflow_version, payload, $metadata,"
	"  concurrency_key, " PINNED_AT_ENQUEUE("$workflow_version") " FROM i"
	"  WHERE idempotency_key IS NULL OR task_id IN (SELECT task_id FROM k)"
	"  RETURNING partition_key, task_id, version, fence),"
	" e AS (INSERT INTO durable.event_log (partition_key, task_id, seq, state,"
	"  fence, at, kind, actor, role, detail)"
	"  SELECT partition_key, task_id, version, 'ready', fence, $now,"
	"  'enqueued', $role, $role, " ENQUEUE_DETAIL("$workflow_version") " FROM t)"
	" SELECT n FROM i WHERE task_id NOT IN (SELECT task_id FROM t) ORDER BY n",
	DURABLE_PARAMS(enqueue_batch_params),
	DURABLE_COLUMNS(before_columns),
};

/* the fairness keys of a batch (text[]), NULL elements for none */
static const char **
fairness_keys(ArrayType *array)
{
	Datum	   *elems;
	bool	   *elnulls;
	int			n;
	const char **keys;

	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elems, &elnulls, &n);
	keys = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		keys[i] = elnulls[i] ? NULL : TextDatumGetCString(elems[i]);
		if (keys[i])
			DurableCheckKey(keys[i], "fairness key");
	}
	return keys;
}

/*
 * DurableEnqueueBatch
 *		Add a task per payload of payloads (jsonb[] of n elements), in one
 *		statement, with the settings of req and each its own idempotency key
 *		and concurrency key of keys and ckeys (text[] of n elements, or
 *		NULL for none), and write their ids, in order, to result.  Each
 *		element follows DurableEnqueue's rules for its own key (a NULL
 *		element has none); all or nothing.  On Citus, task by task, each on
 *		its own shard.  42704 for an unknown queue, 42501 for a role the
 *		queue does not let enqueue.
 */
void
DurableEnqueueBatch(const DurableEnqueueRequest *req, ArrayType *payload_array,
					ArrayType *key_array, ArrayType *ckey_array,
					ArrayType *fkey_array, int n, int64 *result)
{
	DurableResult res;
	DurableQueue settings;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	Datum	   *payloads;
	bool	   *payload_nulls;
	Datum	   *keys = NULL;
	bool	   *key_nulls = NULL;
	Datum	   *ckeys = NULL;
	bool	   *ckey_nulls = NULL;
	const char **fkeys = NULL;
	int			count;
	Datum	   *partitions;
	Datum	   *key_partitions;
	Datum	   *ids;
	Datum	   *hashes;
	bool	   *hash_nulls;
	Datum		args[BATCH_NPARAMS];
	char		nulls[BATCH_NPARAMS];
	uint64		existing;
	int			dims[1];
	int			lbs[1] = {1};

	deconstruct_array(payload_array, JSONBOID, -1, false, TYPALIGN_INT,
					  &payloads, &payload_nulls, &count);
	if (key_array)
		deconstruct_array(key_array, TEXTOID, -1, false, TYPALIGN_INT,
						  &keys, &key_nulls, &count);
	if (ckey_array)
		deconstruct_array(ckey_array, TEXTOID, -1, false, TYPALIGN_INT,
						  &ckeys, &ckey_nulls, &count);
	if (fkey_array)
		fkeys = fairness_keys(fkey_array);
	partitions = palloc(sizeof(Datum) * Max(n, 1));
	key_partitions = palloc(sizeof(Datum) * Max(n, 1));
	ids = palloc(sizeof(Datum) * Max(n, 1));
	hashes = palloc0(sizeof(Datum) * Max(n, 1));
	hash_nulls = palloc(sizeof(bool) * Max(n, 1));

	DurableQueueGetShared(req->queue, &settings);
	DurableCheckRestrictedQueue(req->queue, settings.restricted, DURABLE_PRIV_ENQUEUE);
	if (fkeys != NULL)
	{
		DurableMakeQueueFair(req->queue, &settings);
		settings.fair = true;
	}
	if (DurableDistributed())
	{
		/*
		 * On Citus, task by task, each on its own shard, node by node and
		 * this node's first; the partitions chosen in the given order.
		 */
		int32	   *keys_of = palloc(sizeof(int32) * Max(n, 1));
		int		   *order = palloc(sizeof(int) * (n + 1));
		int		   *bounds = palloc(sizeof(int) * (n + 1));

		for (int i = 0; i < n; i++)
		{
			check_batch_element(i, payloads, payload_nulls);
			keys_of[i] = DurableTaskPartition(&settings, keys && !key_nulls[i] ?
										TextDatumGetCString(keys[i]) : NULL,
										ckeys && !ckey_nulls[i] ?
										TextDatumGetCString(ckeys[i]) : NULL);
		}
		(void) DurableGroupByShard(keys_of, n, order, bounds);
		for (int k = 0; k < n; k++)
		{
			DurableEnqueueRequest one = *req;
			int			i = order[k];

			one.payload = DatumGetJsonbP(payloads[i]);
			one.idempotency_key = keys && !key_nulls[i] ?
				TextDatumGetCString(keys[i]) : NULL;
			one.concurrency_key = ckeys && !ckey_nulls[i] ?
				TextDatumGetCString(ckeys[i]) : NULL;
			one.fairness_key = fkeys ? fkeys[i] : NULL;
			one.admitted_by_caller = true;
			one.has_partition = true;
			one.partition = keys_of[i];
			result[i] = DurableEnqueue(&one, &settings, now);
		}
		/* as on one server: the batch's tasks admitted after its inserts */
		if (settings.fair)
			DurableAdmitEnqueued(result, fkeys, n, now);
		return;
	}
	if (n > 0)
	{
		Datum		number[IDS_NPARAMS];

		number[IDS_COUNT] = Int32GetDatum(n);
		res = DurableRun(&task_ids, number, NULL, SPI_OK_SELECT, 0);
		for (int i = 0; i < n; i++)
		{
			char	   *key = NULL;
			char	   *ckey = NULL;

			check_batch_element(i, payloads, payload_nulls);
			if (keys && !key_nulls[i])
			{
				key = TextDatumGetCString(keys[i]);
				DurableCheckKey(key, "idempotency key");
				hashes[i] = PointerGetDatum(DurableJsonbHash(DatumGetJsonbP(payloads[i])));
			}
			hash_nulls[i] = key == NULL;
			if (ckeys && !ckey_nulls[i])
			{
				ckey = TextDatumGetCString(ckeys[i]);
				DurableCheckKey(ckey, "concurrency key");
			}
			partitions[i] = Int32GetDatum(DurableTaskPartition(&settings, key, ckey));
			key_partitions[i] = key ?
				Int32GetDatum(DurableQueueKeyPartition(&settings, key)) : partitions[i];
			result[i] = DurableGetInt64(res, i, IDS_NEXTVAL) << DURABLE_ID_SHIFT |
				DURABLE_TASK_ID_SUFFIX(DatumGetInt32(partitions[i]), DurableNodeId());
			ids[i] = Int64GetDatum(result[i]);
		}
	}

	dims[0] = n;
	memset(nulls, ' ', sizeof(nulls));
	args[BATCH_PARTITIONS] = PointerGetDatum(construct_array(partitions, n, INT4OID,
															 sizeof(int32), true,
															 TYPALIGN_INT));
	args[BATCH_TASK_IDS] = PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64),
														   FLOAT8PASSBYVAL,
														   TYPALIGN_DOUBLE));
	args[BATCH_PAYLOADS] = PointerGetDatum(payload_array);
	args[BATCH_IDEMPOTENCY_KEYS] = PointerGetDatum(key_array);
	nulls[BATCH_IDEMPOTENCY_KEYS] = key_array ? ' ' : 'n';
	args[BATCH_REQUEST_HASHES] =
		PointerGetDatum(construct_md_array(hashes, hash_nulls, 1, dims, lbs,
										   BYTEAOID, -1, false, TYPALIGN_INT));
	args[BATCH_CONCURRENCY_KEYS] = PointerGetDatum(ckey_array);
	nulls[BATCH_CONCURRENCY_KEYS] = ckey_array ? ' ' : 'n';
	args[BATCH_QUEUE] = CStringGetTextDatum(req->queue);
	args[BATCH_NOW] = TimestampTzGetDatum(now);
	args[BATCH_RUN_AT] = TimestampTzGetDatum(req->run_at != 0 ? req->run_at : now);
	args[BATCH_CLASS] = CStringGetTextDatum(req->class);
	args[BATCH_PRIORITY] = Int32GetDatum(req->priority);
	args[BATCH_MAX_ATTEMPTS] = Int32GetDatum(req->max_attempts > 0 ? req->max_attempts :
											 settings.max_attempts);
	if (req->deadline != NULL)
		args[BATCH_DEADLINE] = IntervalPGetDatum(req->deadline);
	else
	{
		args[BATCH_DEADLINE] = IntervalPGetDatum(&settings.deadline);
		nulls[BATCH_DEADLINE] = settings.has_deadline ? ' ' : 'n';
	}
	args[BATCH_WORKFLOW_VERSION] = PointerGetDatum(req->workflow_version);
	nulls[BATCH_WORKFLOW_VERSION] = req->workflow_version ? ' ' : 'n';
	args[BATCH_METADATA] = JsonbPGetDatum(req->metadata);
	nulls[BATCH_METADATA] = req->metadata ? ' ' : 'n';
	args[BATCH_ROLE] = CStringGetTextDatum(DurableCallerName());
	args[BATCH_KEY_PARTITIONS] = PointerGetDatum(construct_array(key_partitions, n, INT4OID,
																 sizeof(int32), true,
																 TYPALIGN_INT));

	/* the statement returns the elements whose key was there before */
	existing = 0;
	if (n > 0)
	{
		res = DurableRun(&enqueue_batch, args, nulls, SPI_OK_SELECT, 0);
		existing = res.rows;
		if (settings.fair)
			DurableAdmitEnqueued(result, fkeys, n, now);
	}
	if (existing > 0)
	{
		int		   *which = palloc(sizeof(int) * existing);

		for (uint64 r = 0; r < existing; r++)
			which[r] = (int) DurableGetInt64(res, r, BEFORE_N) - 1;
		for (uint64 r = 0; r < existing; r++)
		{
			int			i = which[r];

			result[i] = DurableEnqueuedBefore(DatumGetInt32(key_partitions[i]),
											  req->queue,
											  TextDatumGetCString(keys[i]),
											  DatumGetByteaPP(hashes[i]),
											  DatumGetJsonbP(payloads[i]));
		}
	}
	if (n > 0 && settings.notify && (req->run_at == 0 || req->run_at <= now))
		Async_Notify(DURABLE_READY_CHANNEL, req->queue);
	DurableCount(req->queue, DURABLE_COUNT_ENQUEUED, n - (int64) existing);
	DurableCount(req->queue, DURABLE_COUNT_IDEMPOTENT_REPLAYS, (int64) existing);
}
