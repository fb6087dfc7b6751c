/*-------------------------------------------------------------------------
 *
 * enqueue.c
 *	  Adding tasks, idempotently: one (a child, an occurrence, a task of
 *	  a debounce or a throttle too); a batch is enqueue_batch.c's.  The
 *	  SQL functions are api/tasks.c's.
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
#include "core/sql.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "catalog/namespace.h"
#include "commands/async.h"
#include "commands/sequence.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

/* the event of an enqueue, from the inserted task t */
#define ENQUEUE_EVENT \
	" INSERT INTO durable.event_log (partition_key, task_id, seq, state, fence," \
	" at, kind, actor, role, detail)" \
	" SELECT partition_key, task_id, version, 'ready', fence, $now," \
	" 'enqueued', $role, $role, " ENQUEUE_DETAIL("$workflow_version") " FROM t" \
	" RETURNING task_id"

/* the parameters of enqueue and enqueue_keyed */
enum
{
	ENQUEUE_PARTITION,
	ENQUEUE_TASK_ID,
	ENQUEUE_CLASS,
	ENQUEUE_PRIORITY,
	ENQUEUE_MAX_ATTEMPTS,
	ENQUEUE_RUN_AT,
	ENQUEUE_NOW,
	ENQUEUE_DEADLINE,
	ENQUEUE_QUEUE,
	ENQUEUE_IDEMPOTENCY_KEY,
	ENQUEUE_REQUEST_HASH,
	ENQUEUE_WORKFLOW_VERSION,
	ENQUEUE_PAYLOAD,
	ENQUEUE_METADATA,
	ENQUEUE_ROLE,
	ENQUEUE_PARENT_ID,
	ENQUEUE_CONCURRENCY_KEY,
	ENQUEUE_FAIRNESS_KEY,
	ENQUEUE_FAIR_PASS,
	ENQUEUE_RATE_LIMITS,
	ENQUEUE_NPARAMS
};
static const DurableParam enqueue_params[ENQUEUE_NPARAMS] = {
	[ENQUEUE_PARTITION] = {"partition", INT4OID},
	[ENQUEUE_TASK_ID] = {"task_id", INT8OID},
	[ENQUEUE_CLASS] = {"class", TEXTOID},
	[ENQUEUE_PRIORITY] = {"priority", INT4OID},
	[ENQUEUE_MAX_ATTEMPTS] = {"max_attempts", INT4OID},
	[ENQUEUE_RUN_AT] = {"run_at", TIMESTAMPTZOID},
	[ENQUEUE_NOW] = {"now", TIMESTAMPTZOID},
	[ENQUEUE_DEADLINE] = {"deadline", INTERVALOID},
	[ENQUEUE_QUEUE] = {"queue", TEXTOID},
	[ENQUEUE_IDEMPOTENCY_KEY] = {"idempotency_key", TEXTOID},
	[ENQUEUE_REQUEST_HASH] = {"request_hash", BYTEAOID},
	[ENQUEUE_WORKFLOW_VERSION] = {"workflow_version", TEXTOID},
	[ENQUEUE_PAYLOAD] = {"payload", JSONBOID},
	[ENQUEUE_METADATA] = {"metadata", JSONBOID},
	[ENQUEUE_ROLE] = {"role", TEXTOID},
	[ENQUEUE_PARENT_ID] = {"parent_id", INT8OID},
	[ENQUEUE_CONCURRENCY_KEY] = {"concurrency_key", TEXTOID},
	[ENQUEUE_FAIRNESS_KEY] = {"fairness_key", TEXTOID},
	[ENQUEUE_FAIR_PASS] = {"fair_pass", FLOAT8OID},
	[ENQUEUE_RATE_LIMITS] = {"rate_limits", JSONBOID},
};

/*
 * The event of an enqueue, from the task's row given as $21..$24: the
 * columns of the split's step before, past the 20 parameters.
 */
#define ENQUEUE_EVENT_SPLIT \
	"INSERT INTO durable.event_log (partition_key, task_id, seq, state, fence," \
	" at, kind, actor, role, detail)" \
	" VALUES ($21, $22, $23, 'ready', $24, $now, 'enqueued', $role, $role," \
	" " ENQUEUE_DETAIL("$workflow_version") ")" \
	" RETURNING task_id"

#define ENQUEUE_COLUMNS \
	"partition_key, task_id, state, class, priority, max_attempts, run_at," \
	" created_at, deadline, queue_name, idempotency_key, request_hash," \
	" workflow_version, payload, metadata, parent_id, concurrency_key," \
	" versions, fairness_key, fair_pass, rate_limits"

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
 * DurableTaskPartition
 *		The partition of a new task: its concurrency key's (or the key of
 *		its first rate limit, as the caller passes it), else its
 *		idempotency key's, else the next in turn (on Citus, of this
 *		node's).
 */
int32
DurableTaskPartition(const DurableQueue *settings, const char *key,
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
	"  payload, metadata, parent_id, concurrency_key, versions, fairness_key,"
	"  fair_pass, rate_limits)"
	"  VALUES ($partition, $task_id,"
	"  'ready', $class::durable.activity_class, $priority, $max_attempts,"
	"  $run_at, $now, $deadline, $queue, $idempotency_key, $request_hash,"
	"  $workflow_version, $payload, $metadata, $parent_id, $concurrency_key,"
	"  " PINNED_AT_ENQUEUE("$workflow_version") ", $fairness_key, $fair_pass,"
	"  $rate_limits)"
	"  RETURNING partition_key, task_id, version, fence)"
	ENQUEUE_EVENT,
	DURABLE_PARAMS(enqueue_params),
	DURABLE_COLUMNS(enqueued_columns),
	.by_partition = true,
	.delegated = true,
	.nsplit = 2,
	.split = {
	{"INSERT INTO durable.live_tasks (" ENQUEUE_COLUMNS ")"
		" VALUES ($partition, $task_id,"
		" 'ready', $class::durable.activity_class, $priority, $max_attempts,"
		" $run_at, $now, $deadline, $queue, $idempotency_key, $request_hash,"
		" $workflow_version, $payload, $metadata, $parent_id, $concurrency_key,"
		" " PINNED_AT_ENQUEUE("$workflow_version") ", $fairness_key, $fair_pass,"
	"  $rate_limits)"
		" RETURNING partition_key, task_id, version, fence",
	DURABLE_SPLIT_NO_INPUT, true, true},
	{ENQUEUE_EVENT_SPLIT, 0, true, true},
	},
};

/*
 * A key is bound in durable.task_keys, where it outlives the task's run.
 * $partition is the key's, where the binding goes; the task's own is in
 * the suffix of its id, $task_id (task_partition), minted by mint_task_id.
 */
#define TASK_PARTITION_OF_SUFFIX \
	"($task_id & " CppAsString2(DURABLE_PARTITION_MASK) ")::pg_catalog.int4"

static DurableStatement enqueue_keyed = {
	.name = "enqueue_keyed",
	.sql = "WITH k AS (INSERT INTO durable.task_keys (partition_key, queue_name,"
	"  idempotency_key, task_id, request_hash, created_at)"
	"  VALUES ($partition, $queue, $idempotency_key, $task_id, $request_hash, $now)"
	"  ON CONFLICT (partition_key, queue_name, idempotency_key) DO NOTHING"
	"  RETURNING task_id),"
	" t AS (INSERT INTO durable.live_tasks (partition_key, task_id, state,"
	"  class, priority, max_attempts, run_at, created_at, deadline,"
	"  queue_name, idempotency_key, request_hash, workflow_version,"
	"  payload, metadata, parent_id, concurrency_key, versions, fairness_key,"
	"  fair_pass, rate_limits)"
	"  SELECT " TASK_PARTITION_OF_SUFFIX ", k.task_id, 'ready',"
	"  $class::durable.activity_class, $priority, $max_attempts,"
	"  $run_at, $now, $deadline, $queue, $idempotency_key, $request_hash,"
	"  $workflow_version, $payload, $metadata, $parent_id, $concurrency_key,"
	"  " PINNED_AT_ENQUEUE("$workflow_version") ", $fairness_key, $fair_pass,"
	"  $rate_limits FROM k"
	"  RETURNING partition_key, task_id, version, fence)"
	ENQUEUE_EVENT,
	DURABLE_PARAMS(enqueue_params),
	DURABLE_COLUMNS(enqueued_columns),
	.nsplit = 3,
	.split = {
	{"INSERT INTO durable.task_keys (partition_key, queue_name,"
		" idempotency_key, task_id, request_hash, created_at)"
		" VALUES ($partition, $queue, $idempotency_key, $task_id, $request_hash, $now)"
		" ON CONFLICT (partition_key, queue_name, idempotency_key) DO NOTHING"
		" RETURNING task_id",
	DURABLE_SPLIT_NO_INPUT, true},
	{"INSERT INTO durable.live_tasks (" ENQUEUE_COLUMNS ")"
		" VALUES (" TASK_PARTITION_OF_SUFFIX ", $21, 'ready',"
		" $class::durable.activity_class, $priority, $max_attempts,"
		" $run_at, $now, $deadline, $queue, $idempotency_key, $request_hash,"
		" $workflow_version, $payload, $metadata, $parent_id, $concurrency_key,"
		" " PINNED_AT_ENQUEUE("$workflow_version") ", $fairness_key, $fair_pass,"
	"  $rate_limits)"
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
	DurableResult res;
	Datum		args[ENQUEUE_NPARAMS];
	char		nulls[ENQUEUE_NPARAMS];
	const char *key = req->idempotency_key;
	TimestampTz run_at = req->run_at != 0 ? req->run_at : now;
	bytea	   *request_hash = NULL;
	int32		partition;
	int32		key_partition;
	const char *rate_home = NULL;
	ArrayType  *budgets;
	int64		task_id;

	DurableCheckPayloadSize(VARSIZE(req->payload), "payload");
	DurableEnsureHistoryDays(now);
	if (key != NULL)
	{
		DurableCheckKey(key, "idempotency key");
		request_hash = DurableJsonbHash(req->payload);
	}
	if (req->rate_limits != NULL)
	{
		rate_home = DurableRateLimitsCheck(req->rate_limits);
		if (rate_home != NULL)
			DurableMakeQueueRateLimited(req->queue, settings);
	}
	/* each budget once, in the order reserves lock them (spend.c) */
	budgets = req->budgets ? DurableBudgetsCheck(req->budgets) : NULL;
	if (req->spend_limit != NULL)
		DurableCheckAmount(req->spend_limit, "a task's spend_limit");
	partition = req->has_partition ? req->partition :
		DurableTaskPartition(settings, key,
							 req->concurrency_key ? req->concurrency_key : rate_home);
	key_partition = key ? DurableQueueKeyPartition(settings, key) : partition;

	memset(nulls, ' ', sizeof(nulls));
	args[ENQUEUE_PARTITION] = Int32GetDatum(key_partition);
	args[ENQUEUE_TASK_ID] = Int64GetDatum(mint_task_id(partition));
	args[ENQUEUE_CLASS] = CStringGetTextDatum(req->class);
	args[ENQUEUE_PRIORITY] = Int32GetDatum(req->priority);
	args[ENQUEUE_MAX_ATTEMPTS] = Int32GetDatum(req->max_attempts > 0 ? req->max_attempts :
											   settings->max_attempts);
	args[ENQUEUE_RUN_AT] = TimestampTzGetDatum(run_at);
	args[ENQUEUE_NOW] = TimestampTzGetDatum(now);
	if (req->deadline != NULL)
		args[ENQUEUE_DEADLINE] = IntervalPGetDatum(req->deadline);
	else
	{
		args[ENQUEUE_DEADLINE] = IntervalPGetDatum(&settings->deadline);
		nulls[ENQUEUE_DEADLINE] = settings->has_deadline ? ' ' : 'n';
	}
	args[ENQUEUE_QUEUE] = CStringGetTextDatum(req->queue);
	args[ENQUEUE_IDEMPOTENCY_KEY] = key ? CStringGetTextDatum(key) : (Datum) 0;
	nulls[ENQUEUE_IDEMPOTENCY_KEY] = key ? ' ' : 'n';
	args[ENQUEUE_REQUEST_HASH] = PointerGetDatum(request_hash);
	nulls[ENQUEUE_REQUEST_HASH] = key ? ' ' : 'n';
	args[ENQUEUE_WORKFLOW_VERSION] = PointerGetDatum(req->workflow_version);
	nulls[ENQUEUE_WORKFLOW_VERSION] = req->workflow_version ? ' ' : 'n';
	args[ENQUEUE_PAYLOAD] = JsonbPGetDatum(req->payload);
	args[ENQUEUE_METADATA] = JsonbPGetDatum(req->metadata);
	nulls[ENQUEUE_METADATA] = req->metadata ? ' ' : 'n';
	args[ENQUEUE_ROLE] = CStringGetTextDatum(DurableCallerName());
	args[ENQUEUE_PARENT_ID] = Int64GetDatum(req->parent_id);
	nulls[ENQUEUE_PARENT_ID] = req->parent_id != 0 ? ' ' : 'n';
	args[ENQUEUE_CONCURRENCY_KEY] = req->concurrency_key ?
		CStringGetTextDatum(req->concurrency_key) : (Datum) 0;
	nulls[ENQUEUE_CONCURRENCY_KEY] = req->concurrency_key ? ' ' : 'n';

	/*
	 * In a fair queue the task comes with its pass, or Infinity when it is
	 * not due yet (fairness.c); a batch gives its tasks theirs after their
	 * inserts, and the task none here.
	 */
	args[ENQUEUE_FAIRNESS_KEY] = req->fairness_key ?
		CStringGetTextDatum(req->fairness_key) : (Datum) 0;
	nulls[ENQUEUE_FAIRNESS_KEY] = req->fairness_key ? ' ' : 'n';
	nulls[ENQUEUE_FAIR_PASS] = 'n';
	if (req->fairness_key != NULL)
		DurableMakeQueueFair(req->queue, settings);
	if ((settings->fair || req->fairness_key != NULL) && !req->admitted_by_caller)
	{
		args[ENQUEUE_FAIR_PASS] = Float8GetDatum(run_at <= now ?
												 DurableFairPass(partition, req->queue,
																 req->priority,
																 req->fairness_key) :
												 get_float8_infinity());
		nulls[ENQUEUE_FAIR_PASS] = ' ';
	}

	args[ENQUEUE_RATE_LIMITS] = JsonbPGetDatum(req->rate_limits);
	nulls[ENQUEUE_RATE_LIMITS] = rate_home != NULL ? ' ' : 'n';
	if (rate_home != NULL)
		DurableRateLimitsMakeBuckets(req->rate_limits, partition, now);

	/* a key is bound in durable.task_keys, where it outlives the task's run */
	res = DurableRunInQueue(key ? &enqueue_keyed : &DurableEnqueueStatement,
							args, nulls, SPI_OK_INSERT_RETURNING, req->queue);
	if (res.rows == 1)
	{
		task_id = DurableGetInt64(res, 0, ENQUEUED_TASK_ID);
		if (budgets != NULL || req->inherited_budgets != NULL || req->spend_limit != NULL)
			DurableSetTaskBudgets(task_id, budgets, req->inherited_budgets,
								  req->spend_limit);
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
