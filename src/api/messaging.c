/*-------------------------------------------------------------------------
 *
 * messaging.c
 *	  Inbox, outbox and request idempotency of the SQL API (README,
 *	  "Inbox, outbox, request idempotency").  Each checks its arguments and
 *	  calls the core (inbox.c, outbox.c, request.c).  Every one names the
 *	  queue its messages or keys belong to first (since 0.9.0).
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

/* message ids are names, not documents */
#define DURABLE_MAX_MESSAGE_ID_LEN 255

/*
 * The declarations of 0.8.0 and before had no queue, and reach this library
 * until ALTER EXTENSION durable UPDATE drops them.  They are refused with
 * what to do rather than served: no queue they could go to is right (one
 * for all would be the shared namespace again).
 */
static void
refuse_queueless(FunctionCallInfo fcinfo, int nargs, const char *function)
{
	if (PG_NARGS() == nargs)
		return;
	ereport(ERROR,
			errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			errmsg("%s() without a queue is no longer supported", function),
			errdetail("Outbox messages, inbox entries and request keys belong to a queue since durable 0.9.0; the installed SQL declaration of durable is older than its library."),
			errhint("Run ALTER EXTENSION durable UPDATE, then name the queue first."));
}

/*
 * durable_inbox_receive(queue text, consumer text, message_id text,
 *						 payload jsonb = NULL)
 *		RETURNS boolean
 *
 * True the first time the consumer of the queue receives the message,
 * false for a duplicate delivery; 55U03 when the same id comes with
 * another payload.  A restricted queue needs its work grant (42501).
 */
PG_FUNCTION_INFO_V1(durable_inbox_receive);
Datum
durable_inbox_receive(PG_FUNCTION_ARGS)
{
	char	   *queue;
	char	   *consumer;
	char	   *message_id;
	Jsonb	   *payload;
	bool		first;

	refuse_queueless(fcinfo, 4, "durable_inbox_receive");
	queue = DurableNameArg(fcinfo, 0, "queue name");
	consumer = DurableNameArg(fcinfo, 1, "consumer name");
	payload = DurableJsonbArg(fcinfo, 3, "payload");
	DurableRequireArg(fcinfo, 2, "message_id");
	message_id = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (message_id[0] == '\0' || strlen(message_id) > DURABLE_MAX_MESSAGE_ID_LEN)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("message id must have between 1 and %d bytes",
					   DURABLE_MAX_MESSAGE_ID_LEN));

	SPI_connect();
	first = DurableInboxReceive(queue, consumer, message_id, payload);
	SPI_finish();
	PG_RETURN_BOOL(first);
}

/*
 * durable_outbox_emit(queue text, topic text, payload jsonb, key text = NULL)
 *		RETURNS bigint
 *
 * Adds a message to the queue in the caller's transaction; it exists, and
 * publishers hear of it, only if that transaction commits.  Messages of
 * one topic and key share a partition.  A restricted queue needs its
 * enqueue grant (42501).
 */
PG_FUNCTION_INFO_V1(durable_outbox_emit);
Datum
durable_outbox_emit(PG_FUNCTION_ARGS)
{
	char	   *queue;
	char	   *topic;
	Jsonb	   *payload;
	char	   *key = NULL;
	int64		message_id;

	refuse_queueless(fcinfo, 4, "durable_outbox_emit");
	queue = DurableNameArg(fcinfo, 0, "queue name");
	topic = DurableNameArg(fcinfo, 1, "topic");
	DurableRequireArg(fcinfo, 2, "payload");
	payload = DurableJsonbArg(fcinfo, 2, "payload");
	if (!PG_ARGISNULL(3))
		key = DurableTextArgCString(fcinfo, 3, "key");

	SPI_connect();
	message_id = DurableOutboxEmit(queue, topic, key, payload);
	SPI_finish();
	PG_RETURN_INT64(message_id);
}

/*
 * durable_outbox_claim(queue text, publisher text, batch int = 100,
 *						lease interval = '30 seconds')
 *		RETURNS TABLE(message_id bigint, fence bigint, topic text, key text,
 *					  payload jsonb, attempt int)
 *
 * Leases up to batch unpublished messages of the queue, oldest first,
 * skipping those another publisher holds, all under one new fence.  A
 * restricted queue needs its work grant (42501).
 */
PG_FUNCTION_INFO_V1(durable_outbox_claim);
Datum
durable_outbox_claim(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *queue;
	char	   *publisher;
	int32		batch;
	Interval   *lease;

	refuse_queueless(fcinfo, 4, "durable_outbox_claim");
	queue = DurableNameArg(fcinfo, 0, "queue name");
	publisher = DurableNameArg(fcinfo, 1, "publisher name");
	batch = DurableBatchArg(fcinfo, 2);
	lease = DurablePositiveIntervalArg(fcinfo, 3, "lease");
	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	DurableOutboxClaim(queue, publisher, batch, lease, rsinfo->setResult);
	SPI_finish();
	return (Datum) 0;
}

/*
 * durable_outbox_ack(queue text, message_ids bigint[], fence bigint)
 *		RETURNS int
 *
 * Marks the messages of the queue published; returns how many.  All of
 * them must still be held under fence: otherwise 55U01, and none is
 * marked.  A restricted queue needs its work grant (42501), also for an
 * empty array.
 */
PG_FUNCTION_INFO_V1(durable_outbox_ack);
Datum
durable_outbox_ack(PG_FUNCTION_ARGS)
{
	char	   *queue;
	int64		fence;
	Datum	   *elems;
	bool	   *elnulls;
	int			nelems;
	uint64		acked;

	refuse_queueless(fcinfo, 3, "durable_outbox_ack");
	queue = DurableNameArg(fcinfo, 0, "queue name");
	DurableRequireArg(fcinfo, 1, "message_ids");
	fence = DurableFenceArg(fcinfo, 2);
	nelems = DurableArrayArg(fcinfo, 1, INT8OID, "message_ids", &elems, &elnulls);
	for (int i = 0; i < nelems; i++)
		if (elnulls[i])
			ereport(ERROR,
					errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					errmsg("message id %d of the array is null", i + 1));

	SPI_connect();
	acked = DurableOutboxAck(queue, elems, nelems, fence);
	SPI_finish();
	PG_RETURN_INT32((int32) acked);
}

/* the columns of durable_idempotent_begin's result */
#define BEGIN_COLUMNS 4

/* the queue, scope and key of a request, checked */
static void
request_key_args(FunctionCallInfo fcinfo, char **queue, char **scope,
				 char **key)
{
	*queue = DurableNameArg(fcinfo, 0, "queue name");
	*scope = DurableNameArg(fcinfo, 1, "scope");
	DurableRequireArg(fcinfo, 2, "key");
	*key = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if ((*key)[0] == '\0' || strlen(*key) > 255)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("idempotency key must have between 1 and 255 bytes"));
}

/*
 * The 0.1.0 declarations of these functions had no fence.  A library that
 * is newer than the installed SQL refuses them rather than write unfenced.
 */
static void
refuse_unfenced(const char *function)
{
	ereport(ERROR,
			errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			errmsg("%s() without a fence is no longer supported", function),
			errdetail("The installed SQL declaration of durable is older than its library."),
			errhint("Run ALTER EXTENSION durable UPDATE."));
}

/* the fence argument of advance and finish */
static int64
request_fence_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("fence must not be null"),
				errhint("Pass the fence that durable_idempotent_begin returned with status \"started\"."));
	return PG_GETARG_INT64(argno);
}

/*
 * durable_idempotent_begin(queue text, scope text, key text, request jsonb,
 *							lock interval = '1 minute')
 *		RETURNS TABLE(status text, recovery_point text, fence bigint,
 *					  response jsonb)
 *
 * 'started': the caller owns the request under fence until the lock ends,
 * from recovery_point on ('started' for a new key); 'in_progress': another
 * handler owns it now; 'completed': the stored response is the answer.
 * fence is NULL unless 'started'.  Raises 55U03 when the key was used for
 * another request.  A restricted queue needs its enqueue grant (42501).
 */
PG_FUNCTION_INFO_V1(durable_idempotent_begin);
Datum
durable_idempotent_begin(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo;
	char	   *queue;
	char	   *scope;
	char	   *key;
	Jsonb	   *request;
	Interval   *lock;
	DurableRequestStatus status;
	Datum		values[BEGIN_COLUMNS];
	bool		nulls[BEGIN_COLUMNS];

	InitMaterializedSRF(fcinfo, 0);
	rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	if (rsinfo->setDesc->natts != BEGIN_COLUMNS)
		refuse_unfenced("durable_idempotent_begin");
	refuse_queueless(fcinfo, 5, "durable_idempotent_begin");
	request_key_args(fcinfo, &queue, &scope, &key);
	DurableRequireArg(fcinfo, 3, "request");
	request = DurableJsonbArg(fcinfo, 3, "request");
	lock = DurablePositiveIntervalArg(fcinfo, 4, "lock");

	SPI_connect();
	DurableIdempotentBegin(queue, scope, key, request, lock, &status);
	values[0] = CStringGetTextDatum(status.status);
	values[1] = CStringGetTextDatum(status.recovery_point);
	values[2] = Int64GetDatum(status.fence);
	values[3] = status.response;
	nulls[0] = false;
	nulls[1] = false;
	nulls[2] = status.fence == 0;
	nulls[3] = status.response_null;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	SPI_finish();
	return (Datum) 0;
}

/*
 * durable_idempotent_advance(queue text, scope text, key text, fence bigint,
 *							  recovery_point text, lock interval = NULL)
 *		RETURNS void
 *
 * Records the point the request has reached (after committing the work
 * up to it in the same transaction), and extends the lock when given.
 * Raises 55U01 unless fence is the key's current one.
 */
PG_FUNCTION_INFO_V1(durable_idempotent_advance);
Datum
durable_idempotent_advance(PG_FUNCTION_ARGS)
{
	char	   *queue;
	char	   *scope;
	char	   *key;
	int64		fence;
	text	   *recovery_point;
	Interval   *lock = NULL;

	if (PG_NARGS() == 4)
		refuse_unfenced("durable_idempotent_advance");
	refuse_queueless(fcinfo, 6, "durable_idempotent_advance");
	request_key_args(fcinfo, &queue, &scope, &key);
	fence = request_fence_arg(fcinfo, 3);
	DurableRequireArg(fcinfo, 4, "recovery_point");
	recovery_point = DurableTextArg(fcinfo, 4, "recovery_point");
	if (!PG_ARGISNULL(5))
		lock = DurablePositiveIntervalArg(fcinfo, 5, "lock");

	SPI_connect();
	DurableIdempotentAdvance(queue, scope, key, fence, recovery_point, lock);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_idempotent_finish(queue text, scope text, key text, fence bigint,
 *							 response jsonb, retention interval = '24 hours')
 *		RETURNS void
 *
 * Stores the response; every later begin of the key with the same request
 * gets it back, until retention has passed.  Raises 55U01 unless fence is
 * the key's current one.
 */
PG_FUNCTION_INFO_V1(durable_idempotent_finish);
Datum
durable_idempotent_finish(PG_FUNCTION_ARGS)
{
	char	   *queue;
	char	   *scope;
	char	   *key;
	int64		fence;
	Jsonb	   *response;
	Interval   *retention;

	if (PG_NARGS() == 4)
		refuse_unfenced("durable_idempotent_finish");
	refuse_queueless(fcinfo, 6, "durable_idempotent_finish");
	request_key_args(fcinfo, &queue, &scope, &key);
	fence = request_fence_arg(fcinfo, 3);
	DurableRequireArg(fcinfo, 4, "response");
	response = DurableJsonbArg(fcinfo, 4, "response");
	retention = DurablePositiveIntervalArg(fcinfo, 5, "retention");

	SPI_connect();
	DurableIdempotentFinish(queue, scope, key, fence, response, retention);
	SPI_finish();
	PG_RETURN_VOID();
}
