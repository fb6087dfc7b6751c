/*-------------------------------------------------------------------------
 *
 * enqueue.c
 *	  Adding tasks, idempotently: one, a batch, a child, an occurrence.
 *	  The SQL functions are api/tasks.c's.
 *
 * With an idempotency key, the key's partition comes from a hash of the
 * key, and a unique index on (partition, queue, key) of durable.task_keys
 * makes the insert idempotent with ON CONFLICT DO NOTHING: a concurrent
 * enqueue of the same key waits for the first one to commit or roll back.
 * The key is bound to the hash of the payload it was first used with.
 *
 * A task goes to its concurrency key's partition, so that a claim counts
 * the key's tasks in one partition (on Citus, on one shard); else to its
 * idempotency key's; else to the next in turn.  A task with both keys
 * lives in the concurrency key's partition and binds its idempotency key
 * in the idempotency key's: the binding is found by the key alone, and
 * the task by its id, whose suffix carries its partition.
 *
 * On Citus "the next in turn" is the next of the queue's partitions on the
 * node the call runs on, when it has any: the enqueue then sends no remote
 * command, and a claim on the same node, which looks at its own node's
 * partitions first, finds the task there.  Tasks enqueued where the queue
 * has no shard go round the whole queue.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "catalog/namespace.h"
#include "commands/async.h"
#include "commands/sequence.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

/* the event of an enqueue: the versions it pinned the task to, if any */
#define ENQUEUE_DETAIL(param) \
	"CASE WHEN " param "::text IS NOT NULL" \
	" THEN pg_catalog.jsonb_build_object('versions'," \
	"  pg_catalog.jsonb_build_object('workflow', " param "::text)) END"

/* the event of an enqueue, from the inserted task t */
#define ENQUEUE_EVENT \
	" INSERT INTO durable.event_log (partition_key, task_id, seq, state, fence," \
	" at, kind, actor, role, detail)" \
	" SELECT partition_key, task_id, version, 'ready', fence, $7," \
	" 'enqueued', $15, $15, " ENQUEUE_DETAIL("$12") " FROM t" \
	" RETURNING task_id"

#define ENQUEUE_ARGTYPES \
	{INT4OID, INT8OID, TEXTOID, INT4OID, INT4OID, TIMESTAMPTZOID, \
	 TIMESTAMPTZOID, INTERVALOID, TEXTOID, TEXTOID, BYTEAOID, TEXTOID, \
	 JSONBOID, JSONBOID, TEXTOID, INT8OID, TEXTOID}

/* the event of an enqueue, from the task's row given as $18..$21 */
#define ENQUEUE_EVENT_SPLIT \
	"INSERT INTO durable.event_log (partition_key, task_id, seq, state, fence," \
	" at, kind, actor, role, detail)" \
	" VALUES ($18, $19, $20, 'ready', $21, $7, 'enqueued', $15, $15," \
	" " ENQUEUE_DETAIL("$12") ")" \
	" RETURNING task_id"

#define ENQUEUE_COLUMNS \
	"partition_key, task_id, state, class, priority, max_attempts, run_at," \
	" created_at, deadline, queue_name, idempotency_key, request_hash," \
	" workflow_version, payload, metadata, parent_id, concurrency_key," \
	" versions"

/* a task enqueued with a workflow_version is pinned to it */
#define PINNED_AT_ENQUEUE(param) \
	"CASE WHEN " param "::text IS NOT NULL" \
	" THEN pg_catalog.jsonb_build_object('workflow', " param "::text) END"

/* round-robin over a queue's partitions, starting apart in each backend */
static uint32 next_partition_index;

/*
 * The next in turn of the queue's partitions on this node, or -1 when the
 * queue has none here.
 */
static int32
next_local_partition(const DurableQueue *settings, uint32 turn)
{
	int			n = settings->partitions;
	int32	   *partitions = palloc(sizeof(int32) * n);
	DurablePlacement *places = palloc(sizeof(DurablePlacement) * n);
	int32		local = DurableLocalGroup();
	int			nlocal = 0;
	int32		chosen = -1;

	for (int k = 0; k < n; k++)
		partitions[k] = DurableQueuePartition(settings, k);
	DurablePlacePartitions(partitions, n, places);
	for (int k = 0; k < n; k++)
		if (places[k].group == local)
			partitions[nlocal++] = partitions[k];
	if (nlocal > 0)
		chosen = partitions[turn % (uint32) nlocal];
	pfree(partitions);
	pfree(places);
	return chosen;
}

/*
 * The partition of a new task: its concurrency key's, else its idempotency
 * key's, else the next in turn (on Citus, of this node's).
 */
static int32
task_partition(const DurableQueue *settings, const char *key,
			   const char *concurrency_key)
{
	uint32		turn;
	int32		local;

	if (concurrency_key != NULL)
		key = concurrency_key;
	if (key != NULL)
		return DurableQueueKeyPartition(settings, key);
	if (next_partition_index == 0)
		next_partition_index = (uint32) MyProcPid;
	turn = next_partition_index++;
	if (DurableDistributed() &&
		(local = next_local_partition(settings, turn)) >= 0)
		return local;
	return DurableQueuePartition(settings, (int) (turn % (uint32) settings->partitions));
}

/* the id of the task an enqueue added */
enum
{
	ENQUEUED_TASK_ID,
	ENQUEUED_NCOLUMNS
};

static const DurableColumn enqueued_columns[ENQUEUED_NCOLUMNS] = {
	[ENQUEUED_TASK_ID] = {"task_id", INT8OID},
};

DurableStatement DurableEnqueueStatement = {
	.name = "enqueue",
	.sql = "WITH t AS (INSERT INTO durable.live_tasks (partition_key, task_id, state,"
	"  class, priority, max_attempts, run_at, created_at, deadline,"
	"  queue_name, idempotency_key, request_hash, workflow_version,"
	"  payload, metadata, parent_id, concurrency_key, versions)"
	"  VALUES ($1, $2,"
	"  'ready', $3::durable.activity_class, $4, $5, $6, $7, $8, $9, $10,"
	"  $11, $12, $13, $14, $16, $17, " PINNED_AT_ENQUEUE("$12") ")"
	"  RETURNING partition_key, task_id, version, fence)"
	ENQUEUE_EVENT,
	.nargs = 17,
	.argtypes = ENQUEUE_ARGTYPES,
	DURABLE_COLUMNS(enqueued_columns),
	.by_partition = true,
	.delegated = true,
	.nsplit = 2,
	.split = {
	{"INSERT INTO durable.live_tasks (" ENQUEUE_COLUMNS ")"
		" VALUES ($1, $2,"
		" 'ready', $3::durable.activity_class, $4, $5, $6, $7, $8, $9, $10,"
		" $11, $12, $13, $14, $16, $17, " PINNED_AT_ENQUEUE("$12") ")"
		" RETURNING partition_key, task_id, version, fence",
	DURABLE_SPLIT_NO_INPUT, true, true},
	{ENQUEUE_EVENT_SPLIT, 0, true, true},
	},
};

/*
 * A key is bound in durable.task_keys, where it outlives the task's run.
 * $1 is the key's partition, where the binding goes; the task's own is in
 * the suffix of its id, $2 (task_partition), minted by mint_task_id.
 */
#define TASK_PARTITION_OF_SUFFIX \
	"($2 & " CppAsString2(DURABLE_PARTITION_MASK) ")::pg_catalog.int4"

static DurableStatement enqueue_keyed = {
	.name = "enqueue_keyed",
	.sql = "WITH k AS (INSERT INTO durable.task_keys (partition_key, queue_name,"
	"  idempotency_key, task_id, request_hash, created_at)"
	"  VALUES ($1, $9, $10, $2, $11, $7)"
	"  ON CONFLICT (partition_key, queue_name, idempotency_key) DO NOTHING"
	"  RETURNING task_id),"
	" t AS (INSERT INTO durable.live_tasks (partition_key, task_id, state,"
	"  class, priority, max_attempts, run_at, created_at, deadline,"
	"  queue_name, idempotency_key, request_hash, workflow_version,"
	"  payload, metadata, parent_id, concurrency_key, versions)"
	"  SELECT " TASK_PARTITION_OF_SUFFIX ", k.task_id, 'ready',"
	"  $3::durable.activity_class, $4, $5, $6,"
	"  $7, $8, $9, $10, $11, $12, $13, $14, $16, $17,"
	"  " PINNED_AT_ENQUEUE("$12") " FROM k"
	"  RETURNING partition_key, task_id, version, fence)"
	ENQUEUE_EVENT,
	.nargs = 17,
	.argtypes = ENQUEUE_ARGTYPES,
	DURABLE_COLUMNS(enqueued_columns),
	.nsplit = 3,
	.split = {
	{"INSERT INTO durable.task_keys (partition_key, queue_name,"
		" idempotency_key, task_id, request_hash, created_at)"
		" VALUES ($1, $9, $10, $2, $11, $7)"
		" ON CONFLICT (partition_key, queue_name, idempotency_key) DO NOTHING"
		" RETURNING task_id",
	DURABLE_SPLIT_NO_INPUT, true},
	{"INSERT INTO durable.live_tasks (" ENQUEUE_COLUMNS ")"
		" VALUES (" TASK_PARTITION_OF_SUFFIX ", $18, 'ready',"
		" $3::durable.activity_class, $4, $5, $6,"
		" $7, $8, $9, $10, $11, $12, $13, $14, $16, $17,"
		" " PINNED_AT_ENQUEUE("$12") ")"
		" RETURNING partition_key, task_id, version, fence",
	0, true},
	{ENQUEUE_EVENT_SPLIT, 1, true},
	},
};

/*
 * A new task's id: this node's next of durable.task_seq over the suffix of
 * its partition and of this node, minted where the call is, also when the
 * row goes to another node (delegate.c), so that ids stay unique.
 */
static int64
mint_task_id(int32 partition)
{
	Oid			seq = get_relname_relid("task_seq",
										get_namespace_oid("durable", false));

	if (!OidIsValid(seq))
		elog(ERROR, "sequence durable.task_seq does not exist");
	return nextval_internal(seq, true) << DURABLE_ID_SHIFT |
		DURABLE_TASK_ID_SUFFIX(partition, DurableNodeId());
}

/* the parameters of enqueue and enqueue_keyed */
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
	int32		key_partition;
	int64		task_id;

	DurableCheckPayloadSize(VARSIZE(req->payload), "payload");
	DurableEnsureHistoryDays(now);
	if (key != NULL)
	{
		DurableCheckKey(key, "idempotency key");
		request_hash = DurableJsonbHash(req->payload);
	}
	partition = req->has_partition ? req->partition :
		task_partition(settings, key, req->concurrency_key);
	key_partition = key ? DurableQueueKeyPartition(settings, key) : partition;

	memset(nulls, ' ', sizeof(nulls));
	args[0] = Int32GetDatum(key_partition);
	args[1] = Int64GetDatum(mint_task_id(partition));
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
	if (DurableExecuteInQueue(key ? &enqueue_keyed : &DurableEnqueueStatement,
							  args, nulls, SPI_OK_INSERT_RETURNING,
							  req->queue) == 1)
	{
		task_id = DurableColumnInt64(0, ENQUEUED_TASK_ID);
		if (settings->notify && run_at <= now)
			Async_Notify(DURABLE_READY_CHANNEL, req->queue);
		DurableCount(req->queue, DURABLE_COUNT_ENQUEUED, 1);
		return task_id;
	}
	task_id = DurableEnqueuedBefore(key_partition, req->queue, key, request_hash,
									req->payload);
	DurableCount(req->queue, DURABLE_COUNT_IDEMPOTENT_REPLAYS, 1);
	return task_id;
}

/*
 * DurableEnqueueTask
 *		Add one task to a queue as DurableEnqueue does, at the
 *		transaction's start time, after reading the queue's row: 42704 for
 *		an unknown queue, 42501 for a role the queue does not let enqueue.
 */
int64
DurableEnqueueTask(const DurableEnqueueRequest *req)
{
	DurableQueue settings;

	DurableQueueGetShared(req->queue, &settings);
	DurableCheckRestrictedQueue(req->queue, settings.restricted, DURABLE_PRIV_ENQUEUE);
	return DurableEnqueue(req, &settings, GetCurrentTransactionStartTimestamp());
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

/* the sequence numbers of new tasks' ids */
enum
{
	IDS_NEXTVAL,
	IDS_NCOLUMNS
};

static const DurableColumn ids_columns[IDS_NCOLUMNS] = {
	[IDS_NEXTVAL] = {"nextval", INT8OID},
};

static DurableStatement task_ids = {
	.name = "task_ids",
	.sql = "SELECT pg_catalog.nextval('durable.task_seq'::pg_catalog.regclass)"
	" FROM pg_catalog.generate_series(1, $1)",
	.nargs = 1,
	.argtypes = {INT4OID},
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

static DurableStatement enqueue_batch = {
	.name = "enqueue_batch",
	.sql = "WITH i AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1::int4[]),"
	"  pg_catalog.unnest($2::int8[]), pg_catalog.unnest($3::jsonb[]),"
	"  pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::bytea[]),"
	"  pg_catalog.unnest($6::text[]), pg_catalog.unnest($17::int4[]))"
	"  WITH ORDINALITY AS i(partition_key, task_id, payload, idempotency_key,"
	"  request_hash, concurrency_key, key_partition, n)),"
	" k AS (INSERT INTO durable.task_keys (partition_key, queue_name,"
	"  idempotency_key, task_id, request_hash, created_at)"
	"  SELECT key_partition, $7, idempotency_key, task_id, request_hash, $8"
	"  FROM i WHERE idempotency_key IS NOT NULL ORDER BY n"
	"  ON CONFLICT (partition_key, queue_name, idempotency_key) DO NOTHING"
	"  RETURNING task_id),"
	" t AS (INSERT INTO durable.live_tasks (partition_key, task_id, state,"
	"  class, priority, max_attempts, run_at, created_at, deadline,"
	"  queue_name, idempotency_key, request_hash, workflow_version,"
	"  payload, metadata, concurrency_key, versions)"
	"  SELECT partition_key, task_id, 'ready', $10::durable.activity_class,"
	"  $11, $12, $9, $8, $13, $7, idempotency_key, request_hash, $14,"
	"  payload, $15, concurrency_key, " PINNED_AT_ENQUEUE("$14") " FROM i"
	"  WHERE idempotency_key IS NULL OR task_id IN (SELECT task_id FROM k)"
	"  RETURNING partition_key, task_id, version, fence),"
	" e AS (INSERT INTO durable.event_log (partition_key, task_id, seq, state,"
	"  fence, at, kind, actor, role, detail)"
	"  SELECT partition_key, task_id, version, 'ready', fence, $8,"
	"  'enqueued', $16, $16, " ENQUEUE_DETAIL("$14") " FROM t)"
	" SELECT n FROM i WHERE task_id NOT IN (SELECT task_id FROM t) ORDER BY n",
	.nargs = 17,
	.argtypes = {INT4ARRAYOID, INT8ARRAYOID, JSONBARRAYOID, TEXTARRAYOID,
		BYTEAARRAYOID, TEXTARRAYOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
		TEXTOID, INT4OID, INT4OID, INTERVALOID, TEXTOID, JSONBOID, TEXTOID,
	INT4ARRAYOID},
	DURABLE_COLUMNS(before_columns),
};

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
					ArrayType *key_array, ArrayType *ckey_array, int n,
					int64 *result)
{
	DurableQueue settings;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	Datum	   *payloads;
	bool	   *payload_nulls;
	Datum	   *keys = NULL;
	bool	   *key_nulls = NULL;
	Datum	   *ckeys = NULL;
	bool	   *ckey_nulls = NULL;
	int			count;
	Datum	   *partitions;
	Datum	   *key_partitions;
	Datum	   *ids;
	Datum	   *hashes;
	bool	   *hash_nulls;
	Datum		args[17];
	char		nulls[17];
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
	partitions = palloc(sizeof(Datum) * Max(n, 1));
	key_partitions = palloc(sizeof(Datum) * Max(n, 1));
	ids = palloc(sizeof(Datum) * Max(n, 1));
	hashes = palloc0(sizeof(Datum) * Max(n, 1));
	hash_nulls = palloc(sizeof(bool) * Max(n, 1));

	DurableQueueGetShared(req->queue, &settings);
	DurableCheckRestrictedQueue(req->queue, settings.restricted, DURABLE_PRIV_ENQUEUE);
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
			keys_of[i] = task_partition(&settings, keys && !key_nulls[i] ?
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
			one.has_partition = true;
			one.partition = keys_of[i];
			result[i] = DurableEnqueue(&one, &settings, now);
		}
		return;
	}
	if (n > 0)
	{
		Datum		number = Int32GetDatum(n);

		DurableExecute(&task_ids, &number, NULL, SPI_OK_SELECT, 0);
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
			partitions[i] = Int32GetDatum(task_partition(&settings, key, ckey));
			key_partitions[i] = key ?
				Int32GetDatum(DurableQueueKeyPartition(&settings, key)) : partitions[i];
			result[i] = DurableColumnInt64(i, IDS_NEXTVAL) << DURABLE_ID_SHIFT |
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
	args[2] = PointerGetDatum(payload_array);
	args[3] = PointerGetDatum(key_array);
	nulls[3] = key_array ? ' ' : 'n';
	args[4] = PointerGetDatum(construct_md_array(hashes, hash_nulls, 1, dims, lbs,
												 BYTEAOID, -1, false, TYPALIGN_INT));
	args[5] = PointerGetDatum(ckey_array);
	nulls[5] = ckey_array ? ' ' : 'n';
	args[6] = CStringGetTextDatum(req->queue);
	args[7] = TimestampTzGetDatum(now);
	args[8] = TimestampTzGetDatum(req->run_at != 0 ? req->run_at : now);
	args[9] = CStringGetTextDatum(req->class);
	args[10] = Int32GetDatum(req->priority);
	args[11] = Int32GetDatum(req->max_attempts > 0 ? req->max_attempts :
							 settings.max_attempts);
	if (req->deadline != NULL)
		args[12] = IntervalPGetDatum(req->deadline);
	else
	{
		args[12] = IntervalPGetDatum(&settings.deadline);
		nulls[12] = settings.has_deadline ? ' ' : 'n';
	}
	args[13] = PointerGetDatum(req->workflow_version);
	nulls[13] = req->workflow_version ? ' ' : 'n';
	args[14] = JsonbPGetDatum(req->metadata);
	nulls[14] = req->metadata ? ' ' : 'n';
	args[15] = CStringGetTextDatum(DurableCallerName());
	args[16] = PointerGetDatum(construct_array(key_partitions, n, INT4OID,
											   sizeof(int32), true, TYPALIGN_INT));

	/* the statement returns the elements whose key was there before */
	existing = n > 0 ? DurableExecute(&enqueue_batch, args, nulls,
									  SPI_OK_SELECT, 0) : 0;
	if (existing > 0)
	{
		int		   *which = palloc(sizeof(int) * existing);

		for (uint64 r = 0; r < existing; r++)
			which[r] = (int) DurableColumnInt64(r, BEFORE_N) - 1;
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
