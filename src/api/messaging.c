/*-------------------------------------------------------------------------
 *
 * messaging.c
 *	  Inbox, outbox and request idempotency of the SQL API (README,
 *	  "Inbox, outbox, request idempotency").  Each checks its arguments and
 *	  calls the core (inbox.c, outbox.c, request.c).
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
 * durable_inbox_receive(consumer text, message_id text, payload jsonb = NULL)
 *		RETURNS boolean
 *
 * True the first time the consumer receives the message, false for a
 * duplicate delivery; 55U03 when the same id comes with another payload.
 */
PG_FUNCTION_INFO_V1(durable_inbox_receive);
Datum
durable_inbox_receive(PG_FUNCTION_ARGS)
{
	char	   *consumer = DurableNameArg(fcinfo, 0, "consumer name");
	char	   *message_id;
	Jsonb	   *payload = DurableJsonbArg(fcinfo, 2, "payload");
	bool		first;

	DurableRequireArg(fcinfo, 1, "message_id");
	message_id = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (message_id[0] == '\0' || strlen(message_id) > DURABLE_MAX_MESSAGE_ID_LEN)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("message id must have between 1 and %d bytes",
					   DURABLE_MAX_MESSAGE_ID_LEN));

	SPI_connect();
	first = DurableInboxReceive(consumer, message_id, payload);
	SPI_finish();
	PG_RETURN_BOOL(first);
}

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
	int64		message_id;

	DurableRequireArg(fcinfo, 1, "payload");
	payload = DurableJsonbArg(fcinfo, 1, "payload");
	if (!PG_ARGISNULL(2))
		key = DurableTextArgCString(fcinfo, 2, "key");

	SPI_connect();
	message_id = DurableOutboxEmit(topic, key, payload);
	SPI_finish();
	PG_RETURN_INT64(message_id);
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

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	DurableOutboxClaim(publisher, batch, lease, rsinfo->setResult);
	SPI_finish();
	return (Datum) 0;
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
	uint64		acked;

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

	SPI_connect();
	acked = DurableOutboxAck(elems, nelems, fence);
	SPI_finish();
	PG_RETURN_INT32((int32) acked);
}

/* the columns of durable_idempotent_begin's result */
#define BEGIN_COLUMNS 4

/* the scope and key of a request, checked */
static void
request_key_args(FunctionCallInfo fcinfo, char **scope, char **key)
{
	*scope = DurableNameArg(fcinfo, 0, "scope");
	DurableRequireArg(fcinfo, 1, "key");
	*key = text_to_cstring(PG_GETARG_TEXT_PP(1));
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
 * durable_idempotent_begin(scope text, key text, request jsonb,
 *							lock interval = '1 minute')
 *		RETURNS TABLE(status text, recovery_point text, fence bigint,
 *					  response jsonb)
 *
 * 'started': the caller owns the request under fence until the lock ends,
 * from recovery_point on ('started' for a new key); 'in_progress': another
 * handler owns it now; 'completed': the stored response is the answer.
 * fence is NULL unless 'started'.  Raises 55U03 when the key was used for
 * another request.
 */
PG_FUNCTION_INFO_V1(durable_idempotent_begin);
Datum
durable_idempotent_begin(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo;
	char	   *scope;
	char	   *key;
	Jsonb	   *request;
	Interval   *lock = DurablePositiveIntervalArg(fcinfo, 3, "lock");
	DurableRequestStatus status;
	Datum		values[BEGIN_COLUMNS];
	bool		nulls[BEGIN_COLUMNS];

	request_key_args(fcinfo, &scope, &key);
	DurableRequireArg(fcinfo, 2, "request");
	request = DurableJsonbArg(fcinfo, 2, "request");
	InitMaterializedSRF(fcinfo, 0);
	rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	if (rsinfo->setDesc->natts != BEGIN_COLUMNS)
		refuse_unfenced("durable_idempotent_begin");

	SPI_connect();
	DurableIdempotentBegin(scope, key, request, lock, &status);
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
 * durable_idempotent_advance(scope text, key text, fence bigint,
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
	char	   *scope;
	char	   *key;
	int64		fence;
	text	   *recovery_point;
	Interval   *lock = NULL;

	if (PG_NARGS() != 5)
		refuse_unfenced("durable_idempotent_advance");
	request_key_args(fcinfo, &scope, &key);
	fence = request_fence_arg(fcinfo, 2);
	DurableRequireArg(fcinfo, 3, "recovery_point");
	recovery_point = DurableTextArg(fcinfo, 3, "recovery_point");
	if (!PG_ARGISNULL(4))
		lock = DurablePositiveIntervalArg(fcinfo, 4, "lock");

	SPI_connect();
	DurableIdempotentAdvance(scope, key, fence, recovery_point, lock);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_idempotent_finish(scope text, key text, fence bigint,
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
	char	   *scope;
	char	   *key;
	int64		fence;
	Jsonb	   *response;
	Interval   *retention;

	if (PG_NARGS() != 5)
		refuse_unfenced("durable_idempotent_finish");
	request_key_args(fcinfo, &scope, &key);
	fence = request_fence_arg(fcinfo, 2);
	DurableRequireArg(fcinfo, 3, "response");
	response = DurableJsonbArg(fcinfo, 3, "response");
	retention = DurablePositiveIntervalArg(fcinfo, 4, "retention");

	SPI_connect();
	DurableIdempotentFinish(scope, key, fence, response, retention);
	SPI_finish();
	PG_RETURN_VOID();
}
