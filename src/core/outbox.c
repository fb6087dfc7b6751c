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
 * Emits NOTIFY durable_outbox '<topic>' at commit to wake publishers.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#define DURABLE_OUTBOX_CHANNEL "durable_outbox"

/*
 * durable_outbox_emit(topic text, payload jsonb, key text = NULL)
 *		RETURNS bigint
 *
 * Adds a message in the caller's transaction; it exists, and publishers
 * hear of it, only if that transaction commits.  Messages of one key share
 * a partition.
 */
PG_FUNCTION_INFO_V1(durable_outbox_emit);
Datum
durable_outbox_emit(PG_FUNCTION_ARGS)
{
	char	   *topic = DurableNameArg(fcinfo, 0, "topic");
	Jsonb	   *payload;
	char	   *key = NULL;
	int32		partition;
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	int64		message_id;

	DurableRequireArg(fcinfo, 1, "payload");
	payload = DurableJsonbArg(fcinfo, 1, "payload");
	if (!PG_ARGISNULL(2))
		key = DurableTextArgCString(fcinfo, 2, "key");
	partition = DurableKeyPartition(topic, key ? key : "");

	SPI_connect();
	args[0] = Int32GetDatum(partition);
	args[1] = Int64GetDatum(DURABLE_TASK_ID_SUFFIX(partition, DurableNodeId()));
	args[2] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args[3] = CStringGetTextDatum(topic);
	args[4] = key ? CStringGetTextDatum(key) : (Datum) 0;
	nulls[4] = key ? ' ' : 'n';
	args[5] = JsonbPGetDatum(payload);
	DurableExecuteStmt(STMT_OUTBOX_INSERT, args, nulls, SPI_OK_INSERT_RETURNING, 0);
	message_id = DurableResultInt64(0, 1);
	SPI_finish();
	Async_Notify(DURABLE_OUTBOX_CHANNEL, topic);
	PG_RETURN_INT64(message_id);
}

/*
 * claim_each
 *		durable_outbox_claim on Citus: each candidate by a statement on its
 *		own shard (see STMT_OUTBOX_CANDIDATES).  A candidate another
 *		publisher took meanwhile is passed over, as SKIP LOCKED would.
 */
static void
claim_each(ReturnSetInfo *rsinfo, Datum *claim_args)
{
	int32		batch = DatumGetInt32(claim_args[3]);
	int32		claimed = 0;
	Datum		args[6];
	Datum		candidate_args[3] = {claim_args[0], claim_args[3], Int64GetDatum(0)};
	uint64		n;

	memcpy(args, claim_args, sizeof(Datum) * 5);
	do
	{
		SPITupleTable *candidates;

		/* the next candidates after the last one looked at, in id order */
		n = DurableExecuteStmt(STMT_OUTBOX_CANDIDATES, candidate_args, NULL, SPI_OK_SELECT, 0);
		candidates = SPI_tuptable;
		for (uint64 row = 0; row < n && claimed < batch; row++)
		{
			bool		isnull;

			args[5] = SPI_getbinval(candidates->vals[row], candidates->tupdesc, 1, &isnull);
			args[3] = SPI_getbinval(candidates->vals[row], candidates->tupdesc, 2, &isnull);
			candidate_args[2] = args[3];
			if (DurableExecuteStmt(STMT_OUTBOX_CLAIM_ONE, args, NULL,
							   SPI_OK_UPDATE_RETURNING, 0) == 1)
			{
				tuplestore_puttuple(rsinfo->setResult, SPI_tuptable->vals[0]);
				claimed++;
			}
		}
	} while (n > 0 && claimed < batch);
}

/*
 * durable_outbox_claim(publisher text, batch int = 100,
 *						lease interval = '30 seconds')
 *		RETURNS TABLE(message_id bigint, fence bigint, topic text, key text,
 *					  payload jsonb, attempt int)
 *
 * Leases up to batch unpublished messages, oldest first, skipping those
 * another publisher holds, all under one new fence.
 */
PG_FUNCTION_INFO_V1(durable_outbox_claim);
Datum
durable_outbox_claim(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *publisher = DurableNameArg(fcinfo, 0, "publisher name");
	int32		batch = DurableBatchArg(fcinfo, 1);
	Interval   *lease = DurablePositiveIntervalArg(fcinfo, 2, "lease");
	Datum		args[5];
	int64		fence;
	uint64		n;

	InitMaterializedSRF(fcinfo, 0);
	args[0] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args[1] = CStringGetTextDatum(publisher);
	args[2] = TimestampTzGetDatum(DurableTimePlus(DatumGetTimestampTz(args[0]), lease));
	args[3] = Int32GetDatum(batch);

	SPI_connect();
	DurableExecuteStmt(STMT_OUTBOX_FENCE, NULL, NULL, SPI_OK_SELECT, 0);
	fence = DurableResultInt64(0, 1);
	/* each node has its own sequence: on Citus a fence carries its node */
	if (DurableDistributed())
		fence = fence << DURABLE_NODE_BITS | DurableNodeId();
	args[4] = Int64GetDatum(fence);
	if (!DurableDistributed())
	{
		n = DurableExecuteStmt(STMT_OUTBOX_CLAIM, args, NULL, SPI_OK_UPDATE_RETURNING, 0);
		for (uint64 row = 0; row < n; row++)
			tuplestore_puttuple(rsinfo->setResult, SPI_tuptable->vals[row]);
	}
	else
		claim_each(rsinfo, args);
	SPI_finish();
	return (Datum) 0;
}

static int
compare_ids(const void *a, const void *b)
{
	int64		x = DatumGetInt64(*(const Datum *) a);
	int64		y = DatumGetInt64(*(const Datum *) b);

	return (x > y) - (x < y);
}

/*
 * durable_outbox_ack(message_ids bigint[], fence bigint) RETURNS int
 *
 * Marks the messages published; returns how many.  All of them must still
 * be held under fence: otherwise 55U01, and none is marked.
 */
PG_FUNCTION_INFO_V1(durable_outbox_ack);
Datum
durable_outbox_ack(PG_FUNCTION_ARGS)
{
	ArrayType  *ids;
	int64		fence;
	Datum	   *elems;
	bool	   *elnulls;
	int			nelems;
	Datum	   *partitions;
	Datum		args[4];
	uint64		acked;

	int			ndistinct;

	DurableRequireArg(fcinfo, 0, "message_ids");
	ids = PG_GETARG_ARRAYTYPE_P(0);
	fence = DurableFenceArg(fcinfo, 1);
	deconstruct_array(ids, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
					  &elems, &elnulls, &nelems);
	if (nelems == 0)
		PG_RETURN_INT32(0);
	for (int i = 0; i < nelems; i++)
		if (elnulls[i])
			ereport(ERROR,
					errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					errmsg("message id %d of the array is null", i + 1));

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

	args[0] = PointerGetDatum(construct_array(elems, nelems, INT8OID,
											  sizeof(int64), true, TYPALIGN_DOUBLE));
	args[1] = Int64GetDatum(fence);
	args[2] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args[3] = PointerGetDatum(construct_array(partitions, nelems, INT4OID,
											  sizeof(int32), true, TYPALIGN_INT));
	SPI_connect();
	acked = DurableExecuteStmt(STMT_OUTBOX_ACK, args, NULL, SPI_OK_UPDATE, 0);
	if (acked != (uint64) nelems)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_STALE_FENCING_TOKEN),
				errmsg("fencing token %lld no longer holds every message acknowledged",
					   (long long) fence),
				errdetail("%llu of %d messages are held under this fence and unpublished.",
						  (unsigned long long) acked, nelems),
				errhint("The lease ran out and the messages were handed out again; they will be published by their new holder."));
	SPI_finish();
	PG_RETURN_INT32((int32) acked);
}
