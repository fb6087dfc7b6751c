/*-------------------------------------------------------------------------
 *
 * inbox.c
 *	  Deduplicating incoming messages in the consumer's own transaction.
 *
 * DurableInboxReceive() inserts the message id with ON CONFLICT DO
 * NOTHING: two deliveries of one message at once make the second wait for
 * the first transaction, so exactly one of them sees true, and the mark
 * commits or rolls back with the consumer's business writes.  The SQL entry
 * point is api/messaging.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

static DurableStatement inbox_insert = {
	.name = "inbox_insert",
	.sql = "INSERT INTO durable.inbox (partition_key, consumer, message_id,"
	" payload_hash, received_at)"
	" VALUES ($1, $2, $3, $4, $5)"
	" ON CONFLICT (partition_key, consumer, message_id) DO NOTHING",
	.nargs = 5, .argtypes = {INT4OID, TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID},
};

enum
{
	INBOX_PAYLOAD_HASH,
	INBOX_NCOLUMNS
};
static const DurableColumn inbox_columns[INBOX_NCOLUMNS] = {
	[INBOX_PAYLOAD_HASH] = {"payload_hash", BYTEAOID},
};
static DurableStatement inbox_get = {
	.name = "inbox_get",
	.sql = "SELECT payload_hash FROM durable.inbox"
	" WHERE partition_key = $1 AND consumer = $2 AND message_id = $3",
	.nargs = 3, .argtypes = {INT4OID, TEXTOID, TEXTOID},
	DURABLE_COLUMNS(inbox_columns),
};

/*
 * DurableInboxReceive
 *		True the first time the consumer receives the message, false for a
 *		duplicate delivery; 55U03 when the same id comes with another
 *		payload.
 */
bool
DurableInboxReceive(const char *consumer, const char *message_id,
					Jsonb *payload)
{
	bytea	   *hash = payload ? DurableJsonbHash(payload) : NULL;
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	bool		first;

	args[0] = Int32GetDatum(DurableKeyPartition(consumer, message_id));
	args[1] = CStringGetTextDatum(consumer);
	args[2] = CStringGetTextDatum(message_id);
	args[3] = PointerGetDatum(hash);
	nulls[3] = hash ? ' ' : 'n';
	args[4] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());

	first = DurableExecute(&inbox_insert, args, nulls, SPI_OK_INSERT, 0) == 1;
	if (!first)
	{
		bool		isnull;
		Datum		d;

		if (DurableExecute(&inbox_get, args, NULL, SPI_OK_SELECT, 1) == 0)
			ereport(ERROR,
					errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					errmsg("could not serialize access due to a concurrent delivery of message \"%s\"",
						   message_id));
		d = DurableColumnDatum(0, INBOX_PAYLOAD_HASH, &isnull);
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
