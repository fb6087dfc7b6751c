/*-------------------------------------------------------------------------
 *
 * inbox.c
 *	  Deduplicating incoming messages in the consumer's own transaction.
 *
 * DurableInboxReceive() inserts the message id with ON CONFLICT DO
 * NOTHING: two deliveries of one message at once make the second wait for
 * the first transaction, so exactly one of them sees true, and the mark
 * commits or rolls back with the consumer's business writes.
 *
 * Message ids are unique per consumer of a queue: two applications that
 * use the same id in their own queues never meet, and a restricted queue
 * lets only the roles with its work grant receive (42501, before anything
 * about the message is looked at).  The SQL entry point is
 * api/messaging.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/*
 * DurableQueuePairPartition
 *		The partition of the queue that a name made of two goes to (an
 *		inbox's consumer and message id, and likewise a request's scope and
 *		key, an outbox message's topic and key): DurableQueueKeyPartition of
 *		their unambiguous encoding, the one DurableKeyPartition hashes.
 */
int32
DurableQueuePairPartition(const DurableQueue *queue, const char *a,
						  const char *b)
{
	char	   *pair = psprintf("%zu:%s%zu:%s", strlen(a), a, strlen(b), b);
	int32		partition = DurableQueueKeyPartition(queue, pair);

	pfree(pair);
	return partition;
}

enum
{
	INSERT_PARTITION,
	INSERT_CONSUMER,
	INSERT_MESSAGE_ID,
	INSERT_PAYLOAD_HASH,
	INSERT_NOW,
	INSERT_QUEUE,
	INSERT_NPARAMS
};
static const DurableParam inbox_insert_params[INSERT_NPARAMS] = {
	[INSERT_PARTITION] = {"partition", INT4OID},
	[INSERT_CONSUMER] = {"consumer", TEXTOID},
	[INSERT_MESSAGE_ID] = {"message_id", TEXTOID},
	[INSERT_PAYLOAD_HASH] = {"payload_hash", BYTEAOID},
	[INSERT_NOW] = {"now", TIMESTAMPTZOID},
	[INSERT_QUEUE] = {"queue", TEXTOID},
};
static DurableStatement inbox_insert = {
	.name = "inbox_insert",
	.sql = "INSERT INTO durable.inbox (partition_key, consumer, message_id,"
	" payload_hash, received_at, queue_name)"
	" VALUES ($partition, $consumer, $message_id, $payload_hash, $now, $queue)"
	" ON CONFLICT (partition_key, queue_name, consumer, message_id) DO NOTHING",
	DURABLE_PARAMS(inbox_insert_params),
};

enum
{
	INBOX_PAYLOAD_HASH,
	INBOX_NCOLUMNS
};
static const DurableColumn inbox_columns[INBOX_NCOLUMNS] = {
	[INBOX_PAYLOAD_HASH] = {"payload_hash", BYTEAOID},
};
enum
{
	GET_PARTITION,
	GET_CONSUMER,
	GET_MESSAGE_ID,
	GET_QUEUE,
	GET_NPARAMS
};
static const DurableParam inbox_get_params[GET_NPARAMS] = {
	[GET_PARTITION] = {"partition", INT4OID},
	[GET_CONSUMER] = {"consumer", TEXTOID},
	[GET_MESSAGE_ID] = {"message_id", TEXTOID},
	[GET_QUEUE] = {"queue", TEXTOID},
};
static DurableStatement inbox_get = {
	.name = "inbox_get",
	.sql = "SELECT payload_hash FROM durable.inbox"
	" WHERE partition_key = $partition AND consumer = $consumer"
	" AND message_id = $message_id AND queue_name = $queue",
	DURABLE_PARAMS(inbox_get_params),
	DURABLE_COLUMNS(inbox_columns),
};

/*
 * DurableInboxReceive
 *		True the first time the consumer of the queue receives the message,
 *		false for a duplicate delivery; 55U03 when the same id comes with
 *		another payload.  42704 for an unknown queue, 42501 without its work
 *		grant where it is restricted.
 */
bool
DurableInboxReceive(const char *queue, const char *consumer,
					const char *message_id, Jsonb *payload)
{
	DurableResult res;
	bytea	   *hash = payload ? DurableJsonbHash(payload) : NULL;
	DurableQueue settings;
	Datum		args[INSERT_NPARAMS];
	char		nulls[INSERT_NPARAMS] = {' ', ' ', ' ', ' ', ' ', ' '};
	bool		first;

	/* as an enqueue: the queue cannot be dropped under the new entry */
	DurableQueueGetShared(queue, &settings);
	DurableCheckRestrictedQueue(queue, settings.restricted, DURABLE_PRIV_WORK);

	args[INSERT_PARTITION] =
		Int32GetDatum(DurableQueuePairPartition(&settings, consumer, message_id));
	args[INSERT_CONSUMER] = CStringGetTextDatum(consumer);
	args[INSERT_MESSAGE_ID] = CStringGetTextDatum(message_id);
	args[INSERT_PAYLOAD_HASH] = PointerGetDatum(hash);
	nulls[INSERT_PAYLOAD_HASH] = hash ? ' ' : 'n';
	args[INSERT_NOW] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args[INSERT_QUEUE] = CStringGetTextDatum(queue);

	first = DurableRun(&inbox_insert, args, nulls, SPI_OK_INSERT, 0).rows == 1;
	if (!first)
	{
		Datum		get[GET_NPARAMS];
		bool		isnull;
		Datum		d;

		get[GET_PARTITION] = args[INSERT_PARTITION];
		get[GET_CONSUMER] = args[INSERT_CONSUMER];
		get[GET_MESSAGE_ID] = args[INSERT_MESSAGE_ID];
		get[GET_QUEUE] = args[INSERT_QUEUE];
		res = DurableRun(&inbox_get, get, NULL, SPI_OK_SELECT, 1);
		if (res.rows == 0)
			ereport(ERROR,
					errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					errmsg("could not serialize access due to a concurrent delivery of message \"%s\"",
						   message_id));
		d = DurableGetDatum(res, 0, INBOX_PAYLOAD_HASH, &isnull);
		if (!DurableRequestMatches(isnull ? NULL : DatumGetByteaPP(d), hash, payload))
			ereport(ERROR,
					errcode(ERRCODE_DURABLE_IDEMPOTENCY_CONFLICT),
					errmsg("message \"%s\" was already received by \"%s\" with a different payload",
						   message_id, consumer),
					errdetail("The stored payload hash does not match the hash of this payload."),
					errhint("A new message needs a new message id."));
	}
	return first;
}
