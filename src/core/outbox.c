/*-------------------------------------------------------------------------
 *
 * outbox.c
 *	  The transactional outbox: messages emitted in the business
 *	  transaction, published at least once by fenced publishers.
 *
 * A claim leases a batch of unpublished messages under one new fence;
 * an ack publishes them only while that fence is theirs.  A message whose
 * lease runs out unacknowledged is handed out again with a new fence, so a
 * slow publisher's late ack is rejected and the message is not lost.
 * Emits NOTIFY durable_outbox '<queue>' at commit to wake publishers.
 *
 * Messages belong to a queue: a publisher claims and acknowledges only the
 * messages of the queue it names, and a restricted queue lets only the
 * roles it grants emit into it (enqueue) and publish from it (work),
 * checked before anything about its messages is looked at.  The SQL entry
 * points are api/messaging.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#define DURABLE_OUTBOX_CHANNEL "durable_outbox"

enum
{
	OUTBOX_INSERTED_ID,
	OUTBOX_INSERTED_NCOLUMNS
};
static const DurableColumn outbox_inserted_columns[OUTBOX_INSERTED_NCOLUMNS] = {
	[OUTBOX_INSERTED_ID] = {"message_id", INT8OID},
};
enum
{
	INSERT_PARTITION,
	INSERT_ID_SUFFIX,
	INSERT_NOW,
	INSERT_TOPIC,
	INSERT_KEY,
	INSERT_PAYLOAD,
	INSERT_QUEUE,
	INSERT_NPARAMS
};
static const DurableParam outbox_insert_params[INSERT_NPARAMS] = {
	[INSERT_PARTITION] = {"partition", INT4OID},
	[INSERT_ID_SUFFIX] = {"id_suffix", INT8OID},
	[INSERT_NOW] = {"now", TIMESTAMPTZOID},
	[INSERT_TOPIC] = {"topic", TEXTOID},
	[INSERT_KEY] = {"key", TEXTOID},
	[INSERT_PAYLOAD] = {"payload", JSONBOID},
	[INSERT_QUEUE] = {"queue", TEXTOID},
};
static DurableStatement outbox_insert = {
	.name = "outbox_insert",
	.sql = "INSERT INTO durable.outbox (partition_key, message_id, created_at,"
	" topic, key, payload, queue_name)"
	" VALUES ($partition,"
	" pg_catalog.nextval('durable.outbox_seq'::pg_catalog.regclass)"
	" << " CppAsString2(DURABLE_ID_SHIFT) " | $id_suffix,"
	" $now, $topic, $key, $payload, $queue)"
	" RETURNING message_id",
	DURABLE_PARAMS(outbox_insert_params),
	DURABLE_COLUMNS(outbox_inserted_columns),
};

/*
 * DurableOutboxEmit
 *		Add a message to a queue in the caller's transaction (key may be
 *		NULL); it exists, and publishers hear of it, only if that
 *		transaction commits.  Messages of one topic and key share one of the
 *		queue's partitions.  Returns its id.  42704 for an unknown queue,
 *		42501 without its enqueue grant where it is restricted.
 */
int64
DurableOutboxEmit(const char *queue, const char *topic, const char *key,
				  Jsonb *payload)
{
	DurableResult res;
	DurableQueue settings;
	int32		partition;
	Datum		args[INSERT_NPARAMS];
	char		nulls[INSERT_NPARAMS] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int64		message_id;

	/* as an enqueue: the queue cannot be dropped under the new message */
	DurableQueueGetShared(queue, &settings);
	DurableCheckRestrictedQueue(queue, settings.restricted, DURABLE_PRIV_ENQUEUE);
	partition = DurableQueuePairPartition(&settings, topic, key ? key : "");

	args[INSERT_PARTITION] = Int32GetDatum(partition);
	args[INSERT_ID_SUFFIX] = Int64GetDatum(DURABLE_TASK_ID_SUFFIX(partition, DurableNodeId()));
	args[INSERT_NOW] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args[INSERT_TOPIC] = CStringGetTextDatum(topic);
	args[INSERT_KEY] = key ? CStringGetTextDatum(key) : (Datum) 0;
	nulls[INSERT_KEY] = key ? ' ' : 'n';
	args[INSERT_PAYLOAD] = JsonbPGetDatum(payload);
	args[INSERT_QUEUE] = CStringGetTextDatum(queue);
	res = DurableRun(&outbox_insert, args, nulls, SPI_OK_INSERT_RETURNING, 0);
	message_id = DurableGetInt64(res, 0, OUTBOX_INSERTED_ID);
	Async_Notify(DURABLE_OUTBOX_CHANNEL, queue);
	return message_id;
}

/* the rows of a claim, as durable_outbox_claim returns them */
enum
{
	OUTBOX_MESSAGE_ID,
	OUTBOX_FENCE,
	OUTBOX_TOPIC,
	OUTBOX_KEY,
	OUTBOX_PAYLOAD,
	OUTBOX_ATTEMPT,
	OUTBOX_NCOLUMNS
};
static const DurableColumn outbox_columns[OUTBOX_NCOLUMNS] = {
	[OUTBOX_MESSAGE_ID] = {"message_id", INT8OID},
	[OUTBOX_FENCE] = {"fence", INT8OID},
	[OUTBOX_TOPIC] = {"topic", TEXTOID},
	[OUTBOX_KEY] = {"key", TEXTOID},
	[OUTBOX_PAYLOAD] = {"payload", JSONBOID},
	[OUTBOX_ATTEMPT] = {"attempt", INT4OID},
};
/* a claim's values, which the statements of a claim on Citus share */
typedef struct ClaimValues
{
	Datum		now;
	Datum		publisher;
	Datum		lease_until;
	Datum		fence;
	Datum		queue;
	int32		batch;
} ClaimValues;

enum
{
	CLAIM_NOW,
	CLAIM_PUBLISHER,
	CLAIM_LEASE_UNTIL,
	CLAIM_BATCH,
	CLAIM_FENCE,
	CLAIM_QUEUE,
	CLAIM_NPARAMS
};
static const DurableParam outbox_claim_params[CLAIM_NPARAMS] = {
	[CLAIM_NOW] = {"now", TIMESTAMPTZOID},
	[CLAIM_PUBLISHER] = {"publisher", TEXTOID},
	[CLAIM_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID},
	[CLAIM_BATCH] = {"batch", INT4OID},
	[CLAIM_FENCE] = {"fence", INT8OID},
	[CLAIM_QUEUE] = {"queue", TEXTOID},
};
static DurableStatement outbox_claim = {
	.name = "outbox_claim",
	.sql = "UPDATE durable.outbox o SET fence = $fence,"
	" attempt = o.attempt + 1, publisher = $publisher, lease_until = $lease_until"
	" WHERE o.message_id = ANY (ARRAY("
	"  SELECT message_id FROM durable.outbox"
	"  WHERE queue_name = $queue AND published_at IS NULL"
	"  AND (lease_until IS NULL OR lease_until < $now)"
	"  ORDER BY message_id LIMIT $batch FOR UPDATE SKIP LOCKED))"
	" AND o.published_at IS NULL"
	" RETURNING o.message_id, o.fence, o.topic, o.key, o.payload, o.attempt",
	DURABLE_PARAMS(outbox_claim_params),
	DURABLE_COLUMNS(outbox_columns),
};

/*
 * On Citus, where a statement on many shards cannot lock rows with
 * SKIP LOCKED: the candidates are read first, then taken one by one,
 * each by a statement on its shard that skips it if another publisher
 * holds it, and checks again that it is free.
 */
enum
{
	CANDIDATE_PARTITION,
	CANDIDATE_MESSAGE_ID,
	CANDIDATE_NCOLUMNS
};
static const DurableColumn candidate_columns[CANDIDATE_NCOLUMNS] = {
	[CANDIDATE_PARTITION] = {"partition_key", INT4OID},
	[CANDIDATE_MESSAGE_ID] = {"message_id", INT8OID},
};
enum
{
	CANDIDATES_NOW,
	CANDIDATES_BATCH,
	CANDIDATES_AFTER,
	CANDIDATES_QUEUE,
	CANDIDATES_NPARAMS
};
static const DurableParam outbox_candidates_params[CANDIDATES_NPARAMS] = {
	[CANDIDATES_NOW] = {"now", TIMESTAMPTZOID},
	[CANDIDATES_BATCH] = {"batch", INT4OID},
	[CANDIDATES_AFTER] = {"after", INT8OID},
	[CANDIDATES_QUEUE] = {"queue", TEXTOID},
};
static DurableStatement outbox_candidates = {
	.name = "outbox_candidates",
	.sql = "SELECT partition_key, message_id FROM durable.outbox"
	" WHERE queue_name = $queue AND published_at IS NULL"
	" AND (lease_until IS NULL OR lease_until < $now)"
	" AND message_id > $after"
	" ORDER BY message_id LIMIT $batch",
	DURABLE_PARAMS(outbox_candidates_params),
	DURABLE_COLUMNS(candidate_columns),
};

enum
{
	CLAIM_ONE_NOW,
	CLAIM_ONE_PUBLISHER,
	CLAIM_ONE_LEASE_UNTIL,
	CLAIM_ONE_MESSAGE_ID,
	CLAIM_ONE_FENCE,
	CLAIM_ONE_PARTITION,
	CLAIM_ONE_NPARAMS
};
static const DurableParam outbox_claim_one_params[CLAIM_ONE_NPARAMS] = {
	[CLAIM_ONE_NOW] = {"now", TIMESTAMPTZOID},
	[CLAIM_ONE_PUBLISHER] = {"publisher", TEXTOID},
	[CLAIM_ONE_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID},
	[CLAIM_ONE_MESSAGE_ID] = {"message_id", INT8OID},
	[CLAIM_ONE_FENCE] = {"fence", INT8OID},
	[CLAIM_ONE_PARTITION] = {"partition", INT4OID},
};
static DurableStatement outbox_claim_one = {
	.name = "outbox_claim_one",
	.sql = "UPDATE durable.outbox o SET fence = $fence,"
	" attempt = o.attempt + 1, publisher = $publisher, lease_until = $lease_until"
	" WHERE o.partition_key = $partition AND o.message_id = ANY (ARRAY("
	"  SELECT message_id FROM durable.outbox"
	"  WHERE partition_key = $partition AND message_id = $message_id"
	"  AND published_at IS NULL"
	"  AND (lease_until IS NULL OR lease_until < $now)"
	"  FOR UPDATE SKIP LOCKED))"
	" AND o.published_at IS NULL"
	" RETURNING o.message_id, o.fence, o.topic, o.key, o.payload, o.attempt",
	DURABLE_PARAMS(outbox_claim_one_params),
	DURABLE_COLUMNS(outbox_columns),
};

enum
{
	OUTBOX_NEXT_FENCE,
	OUTBOX_NEXT_FENCE_NCOLUMNS
};
static const DurableColumn outbox_fence_columns[OUTBOX_NEXT_FENCE_NCOLUMNS] = {
	[OUTBOX_NEXT_FENCE] = {"nextval", INT8OID},
};
static DurableStatement outbox_fence = {
	.name = "outbox_fence",
	.sql = "SELECT pg_catalog.nextval('durable.outbox_fence_seq'::pg_catalog.regclass)",
	DURABLE_COLUMNS(outbox_fence_columns),
};

/*
 * claim_each
 *		DurableOutboxClaim on Citus: each candidate by a statement on its
 *		own shard (see outbox_candidates).  A candidate another publisher
 *		took meanwhile is passed over, as SKIP LOCKED would.
 */
static void
claim_each(Tuplestorestate *store, const ClaimValues *claim)
{
	DurableResult res;
	int32		claimed = 0;
	Datum		args[CLAIM_ONE_NPARAMS];
	Datum		candidate_args[CANDIDATES_NPARAMS];
	uint64		n;

	candidate_args[CANDIDATES_NOW] = claim->now;
	candidate_args[CANDIDATES_BATCH] = Int32GetDatum(claim->batch);
	candidate_args[CANDIDATES_AFTER] = Int64GetDatum(0);
	candidate_args[CANDIDATES_QUEUE] = claim->queue;
	args[CLAIM_ONE_NOW] = claim->now;
	args[CLAIM_ONE_PUBLISHER] = claim->publisher;
	args[CLAIM_ONE_LEASE_UNTIL] = claim->lease_until;
	args[CLAIM_ONE_FENCE] = claim->fence;
	do
	{
		Datum	   *partitions;
		Datum	   *ids;
		bool		isnull;

		/* the next candidates after the last one looked at, in id order */
		res = DurableRun(&outbox_candidates, candidate_args, NULL, SPI_OK_SELECT, 0);
		n = res.rows;
		partitions = palloc(sizeof(Datum) * Max(n, 1));
		ids = palloc(sizeof(Datum) * Max(n, 1));
		for (uint64 row = 0; row < n; row++)
		{
			partitions[row] = DurableGetDatum(res, row, CANDIDATE_PARTITION, &isnull);
			ids[row] = DurableGetDatum(res, row, CANDIDATE_MESSAGE_ID, &isnull);
		}
		for (uint64 row = 0; row < n && claimed < claim->batch; row++)
		{
			args[CLAIM_ONE_PARTITION] = partitions[row];
			args[CLAIM_ONE_MESSAGE_ID] = ids[row];
			candidate_args[CANDIDATES_AFTER] = ids[row];
			res = DurableRun(&outbox_claim_one, args, NULL,
							 SPI_OK_UPDATE_RETURNING, 0);
			if (res.rows == 1)
			{
				tuplestore_puttuple(store, DurableGetRow(res, 0));
				claimed++;
			}
		}
		pfree(partitions);
		pfree(ids);
	} while (n > 0 && claimed < claim->batch);
}

/* 42704 for an unknown queue, 42501 unless the caller may publish from it */
static void
check_publisher(const char *queue)
{
	DurableQueue settings;

	DurableQueueGet(queue, &settings);
	DurableCheckRestrictedQueue(queue, settings.restricted, DURABLE_PRIV_WORK);
}

/*
 * DurableOutboxClaim
 *		Lease up to batch unpublished messages of a queue, oldest first,
 *		skipping those another publisher holds, all under one new fence;
 *		their rows go into store, as durable_outbox_claim returns them.
 *		42501 without the queue's work grant where it is restricted.
 */
void
DurableOutboxClaim(const char *queue, const char *publisher, int32 batch,
				   Interval *lease, Tuplestorestate *store)
{
	DurableResult res;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	ClaimValues claim;
	int64		fence;
	uint64		n;

	check_publisher(queue);
	res = DurableRun(&outbox_fence, NULL, NULL, SPI_OK_SELECT, 0);
	fence = DurableGetInt64(res, 0, OUTBOX_NEXT_FENCE);
	/* each node has its own sequence: on Citus a fence carries its node */
	if (DurableDistributed())
		fence = fence << DURABLE_NODE_BITS | DurableNodeId();
	claim.now = TimestampTzGetDatum(now);
	claim.publisher = CStringGetTextDatum(publisher);
	claim.lease_until = TimestampTzGetDatum(DurableTimePlus(now, lease));
	claim.fence = Int64GetDatum(fence);
	claim.queue = CStringGetTextDatum(queue);
	claim.batch = batch;
	if (!DurableDistributed())
	{
		Datum		args[CLAIM_NPARAMS];

		args[CLAIM_NOW] = claim.now;
		args[CLAIM_PUBLISHER] = claim.publisher;
		args[CLAIM_LEASE_UNTIL] = claim.lease_until;
		args[CLAIM_BATCH] = Int32GetDatum(batch);
		args[CLAIM_FENCE] = claim.fence;
		args[CLAIM_QUEUE] = claim.queue;
		res = DurableRun(&outbox_claim, args, NULL, SPI_OK_UPDATE_RETURNING, 0);
		n = res.rows;
		for (uint64 row = 0; row < n; row++)
			tuplestore_puttuple(store, DurableGetRow(res, row));
	}
	else
		claim_each(store, &claim);
}

static int
compare_ids(const void *a, const void *b)
{
	int64		x = DatumGetInt64(*(const Datum *) a);
	int64		y = DatumGetInt64(*(const Datum *) b);

	return (x > y) - (x < y);
}

enum
{
	ACK_MESSAGE_IDS,
	ACK_FENCE,
	ACK_NOW,
	ACK_PARTITIONS,
	ACK_QUEUE,
	ACK_NPARAMS
};
static const DurableParam outbox_ack_params[ACK_NPARAMS] = {
	[ACK_MESSAGE_IDS] = {"message_ids", INT8ARRAYOID},
	[ACK_FENCE] = {"fence", INT8OID},
	[ACK_NOW] = {"now", TIMESTAMPTZOID},
	[ACK_PARTITIONS] = {"partitions", INT4ARRAYOID},
	[ACK_QUEUE] = {"queue", TEXTOID},
};
static DurableStatement outbox_ack = {
	.name = "outbox_ack",
	.sql = "UPDATE durable.outbox SET published_at = $now, lease_until = NULL"
	" WHERE partition_key = ANY ($partitions) AND message_id = ANY ($message_ids)"
	" AND fence = $fence AND published_at IS NULL AND queue_name = $queue",
	DURABLE_PARAMS(outbox_ack_params),
};

/*
 * ack_by_shard
 *		outbox_ack on Citus, once per shard of the messages (with its
 *		fence, time and queue bound in args): over many shards it would be a multi-shard
 *		update, which Citus commits in two phases even on one node.
 *		Returns how many were acknowledged.
 */
static uint64
ack_by_shard(Datum *elems, Datum *partitions, int n, Datum *args)
{
	int32	   *keys = palloc(sizeof(int32) * n);
	int		   *order = palloc(sizeof(int) * (n + 1));
	int		   *bounds = palloc(sizeof(int) * (n + 1));
	Datum	   *run_ids = palloc(sizeof(Datum) * n);
	Datum	   *run_partitions = palloc(sizeof(Datum) * n);
	uint64		acked = 0;
	int			runs;

	for (int i = 0; i < n; i++)
		keys[i] = DatumGetInt32(partitions[i]);
	runs = DurableGroupByShard(keys, n, order, bounds);
	for (int r = 0; r < runs; r++)
	{
		int			len = bounds[r + 1] - bounds[r];

		for (int i = 0; i < len; i++)
		{
			run_ids[i] = elems[order[bounds[r] + i]];
			run_partitions[i] = partitions[order[bounds[r] + i]];
		}
		args[ACK_MESSAGE_IDS] =
			PointerGetDatum(construct_array(run_ids, len, INT8OID,
											sizeof(int64), true, TYPALIGN_DOUBLE));
		args[ACK_PARTITIONS] =
			PointerGetDatum(construct_array(run_partitions, len, INT4OID,
											sizeof(int32), true, TYPALIGN_INT));
		acked += DurableRun(&outbox_ack, args, NULL, SPI_OK_UPDATE, 0).rows;
	}
	return acked;
}

/*
 * DurableOutboxAck
 *		Mark the messages of a queue of ids (nelems of them, none NULL,
 *		sorted here in place) published; returns how many.  All of them must
 *		still be held under fence in the queue: otherwise 55U01, and none is
 *		marked.  42501 without the queue's work grant where it is
 *		restricted, before anything about the messages is looked at.
 */
uint64
DurableOutboxAck(const char *queue, Datum *elems, int nelems, int64 fence)
{
	Datum	   *partitions;
	Datum		args[ACK_NPARAMS];
	uint64		acked;
	int			ndistinct;

	check_publisher(queue);
	if (nelems == 0)
		return 0;

	/*
	 * The same id twice is one message.  The partitions are taken from the
	 * distinct ids, so that both arrays the statement unnests keep step.
	 */
	qsort(elems, nelems, sizeof(Datum), compare_ids);
	ndistinct = 1;
	for (int i = 1; i < nelems; i++)
		if (DatumGetInt64(elems[i]) != DatumGetInt64(elems[ndistinct - 1]))
			elems[ndistinct++] = elems[i];
	nelems = ndistinct;
	partitions = palloc(sizeof(Datum) * nelems);
	for (int i = 0; i < nelems; i++)
		partitions[i] = Int32GetDatum(DURABLE_TASK_PARTITION(DatumGetInt64(elems[i])));

	args[ACK_FENCE] = Int64GetDatum(fence);
	args[ACK_NOW] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args[ACK_QUEUE] = CStringGetTextDatum(queue);
	if (DurableDistributed())
		acked = ack_by_shard(elems, partitions, nelems, args);
	else
	{
		args[ACK_MESSAGE_IDS] =
			PointerGetDatum(construct_array(elems, nelems, INT8OID,
											sizeof(int64), true, TYPALIGN_DOUBLE));
		args[ACK_PARTITIONS] =
			PointerGetDatum(construct_array(partitions, nelems, INT4OID,
											sizeof(int32), true, TYPALIGN_INT));
		acked = DurableRun(&outbox_ack, args, NULL, SPI_OK_UPDATE, 0).rows;
	}
	if (acked != (uint64) nelems)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_STALE_FENCING_TOKEN),
				errmsg("fencing token %lld no longer holds every message acknowledged",
					   (long long) fence),
				errdetail("%llu of %d messages are held in this queue under this fence and unpublished.",
						  (unsigned long long) acked, nelems),
				errhint("The lease ran out and the messages were handed out again; they will be published by their new holder."));
	return acked;
}
