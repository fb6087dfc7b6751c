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
static DurableStatement outbox_insert = {
	.name = "outbox_insert",
	.sql = "INSERT INTO durable.outbox (partition_key, message_id, created_at,"
	" topic, key, payload, queue_name)"
	" VALUES ($1, pg_catalog.nextval('durable.outbox_seq'::pg_catalog.regclass)"
	" << " CppAsString2(DURABLE_ID_SHIFT) " | $2, $3, $4, $5, $6, $7)"
	" RETURNING message_id",
	.nargs = 7, .argtypes = {INT4OID, INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID,
	JSONBOID, TEXTOID},
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
	DurableQueue settings;
	int32		partition;
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int64		message_id;

	/* as an enqueue: the queue cannot be dropped under the new message */
	DurableQueueGetShared(queue, &settings);
	DurableCheckRestrictedQueue(queue, settings.restricted, DURABLE_PRIV_ENQUEUE);
	partition = DurableQueuePairPartition(&settings, topic, key ? key : "");

	args[0] = Int32GetDatum(partition);
	args[1] = Int64GetDatum(DURABLE_TASK_ID_SUFFIX(partition, DurableNodeId()));
	args[2] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args[3] = CStringGetTextDatum(topic);
	args[4] = key ? CStringGetTextDatum(key) : (Datum) 0;
	nulls[4] = key ? ' ' : 'n';
	args[5] = JsonbPGetDatum(payload);
	args[6] = CStringGetTextDatum(queue);
	DurableExecute(&outbox_insert, args, nulls, SPI_OK_INSERT_RETURNING, 0);
	message_id = DurableColumnInt64(0, OUTBOX_INSERTED_ID);
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
static DurableStatement outbox_claim = {
	.name = "outbox_claim",
	.sql = "UPDATE durable.outbox o SET"
	" fence = $5, attempt = o.attempt + 1, publisher = $2, lease_until = $3"
	" WHERE o.message_id = ANY (ARRAY("
	"  SELECT message_id FROM durable.outbox"
	"  WHERE queue_name = $6 AND published_at IS NULL"
	"  AND (lease_until IS NULL OR lease_until < $1)"
	"  ORDER BY message_id LIMIT $4 FOR UPDATE SKIP LOCKED))"
	" AND o.published_at IS NULL"
	" RETURNING o.message_id, o.fence, o.topic, o.key, o.payload, o.attempt",
	.nargs = 6, .argtypes = {TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID, INT4OID,
	INT8OID, TEXTOID},
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
static DurableStatement outbox_candidates = {
	.name = "outbox_candidates",
	.sql = "SELECT partition_key, message_id FROM durable.outbox"
	" WHERE queue_name = $4 AND published_at IS NULL"
	" AND (lease_until IS NULL OR lease_until < $1)"
	" AND message_id > $3"
	" ORDER BY message_id LIMIT $2",
	.nargs = 4, .argtypes = {TIMESTAMPTZOID, INT4OID, INT8OID, TEXTOID},
	DURABLE_COLUMNS(candidate_columns),
};

static DurableStatement outbox_claim_one = {
	.name = "outbox_claim_one",
	.sql = "UPDATE durable.outbox o SET"
	" fence = $5, attempt = o.attempt + 1, publisher = $2, lease_until = $3"
	" WHERE o.partition_key = $6 AND o.message_id = ANY (ARRAY("
	"  SELECT message_id FROM durable.outbox"
	"  WHERE partition_key = $6 AND message_id = $4"
	"  AND published_at IS NULL"
	"  AND (lease_until IS NULL OR lease_until < $1)"
	"  FOR UPDATE SKIP LOCKED))"
	" AND o.published_at IS NULL"
	" RETURNING o.message_id, o.fence, o.topic, o.key, o.payload, o.attempt",
	.nargs = 6, .argtypes = {TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID, INT8OID,
	INT8OID, INT4OID},
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
claim_each(Tuplestorestate *store, Datum *claim_args)
{
	int32		batch = DatumGetInt32(claim_args[3]);
	int32		claimed = 0;
	Datum		args[6];
	Datum		candidate_args[4] = {claim_args[0], claim_args[3], Int64GetDatum(0),
	claim_args[5]};
	uint64		n;

	memcpy(args, claim_args, sizeof(Datum) * 5);
	do
	{
		Datum	   *partitions;
		Datum	   *ids;
		bool		isnull;

		/* the next candidates after the last one looked at, in id order */
		n = DurableExecute(&outbox_candidates, candidate_args, NULL, SPI_OK_SELECT, 0);
		partitions = palloc(sizeof(Datum) * Max(n, 1));
		ids = palloc(sizeof(Datum) * Max(n, 1));
		for (uint64 row = 0; row < n; row++)
		{
			partitions[row] = DurableColumnDatum(row, CANDIDATE_PARTITION, &isnull);
			ids[row] = DurableColumnDatum(row, CANDIDATE_MESSAGE_ID, &isnull);
		}
		for (uint64 row = 0; row < n && claimed < batch; row++)
		{
			args[5] = partitions[row];
			args[3] = ids[row];
			candidate_args[2] = args[3];
			if (DurableExecute(&outbox_claim_one, args, NULL,
							   SPI_OK_UPDATE_RETURNING, 0) == 1)
			{
				tuplestore_puttuple(store, SPI_tuptable->vals[0]);
				claimed++;
			}
		}
		pfree(partitions);
		pfree(ids);
	} while (n > 0 && claimed < batch);
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
	Datum		args[6];
	int64		fence;
	uint64		n;

	check_publisher(queue);
	args[0] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args[1] = CStringGetTextDatum(publisher);
	args[2] = TimestampTzGetDatum(DurableTimePlus(DatumGetTimestampTz(args[0]), lease));
	args[3] = Int32GetDatum(batch);

	DurableExecute(&outbox_fence, NULL, NULL, SPI_OK_SELECT, 0);
	fence = DurableColumnInt64(0, OUTBOX_NEXT_FENCE);
	/* each node has its own sequence: on Citus a fence carries its node */
	if (DurableDistributed())
		fence = fence << DURABLE_NODE_BITS | DurableNodeId();
	args[4] = Int64GetDatum(fence);
	args[5] = CStringGetTextDatum(queue);
	if (!DurableDistributed())
	{
		n = DurableExecute(&outbox_claim, args, NULL, SPI_OK_UPDATE_RETURNING, 0);
		for (uint64 row = 0; row < n; row++)
			tuplestore_puttuple(store, SPI_tuptable->vals[row]);
	}
	else
		claim_each(store, args);
}

static int
compare_ids(const void *a, const void *b)
{
	int64		x = DatumGetInt64(*(const Datum *) a);
	int64		y = DatumGetInt64(*(const Datum *) b);

	return (x > y) - (x < y);
}

static DurableStatement outbox_ack = {
	.name = "outbox_ack",
	.sql = "UPDATE durable.outbox SET published_at = $3, lease_until = NULL"
	" WHERE partition_key = ANY ($4) AND message_id = ANY ($1)"
	" AND fence = $2 AND published_at IS NULL AND queue_name = $5",
	.nargs = 5, .argtypes = {INT8ARRAYOID, INT8OID, TIMESTAMPTZOID, INT4ARRAYOID,
	TEXTOID},
};

/*
 * ack_by_shard
 *		outbox_ack on Citus, once per shard of the messages (with args[1]
 *		and args[2] bound): over many shards it would be a multi-shard
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
		args[0] = PointerGetDatum(construct_array(run_ids, len, INT8OID,
												  sizeof(int64), true, TYPALIGN_DOUBLE));
		args[3] = PointerGetDatum(construct_array(run_partitions, len, INT4OID,
												  sizeof(int32), true, TYPALIGN_INT));
		acked += DurableExecute(&outbox_ack, args, NULL, SPI_OK_UPDATE, 0);
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
	Datum		args[5];
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

	args[1] = Int64GetDatum(fence);
	args[2] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args[4] = CStringGetTextDatum(queue);
	if (DurableDistributed())
		acked = ack_by_shard(elems, partitions, nelems, args);
	else
	{
		args[0] = PointerGetDatum(construct_array(elems, nelems, INT8OID,
												  sizeof(int64), true, TYPALIGN_DOUBLE));
		args[3] = PointerGetDatum(construct_array(partitions, nelems, INT4OID,
												  sizeof(int32), true, TYPALIGN_INT));
		acked = DurableExecute(&outbox_ack, args, NULL, SPI_OK_UPDATE, 0);
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
