/*-------------------------------------------------------------------------
 *
 * inbox.c
 *	  Deduplicating incoming messages in the consumer's own transaction.
 *
 * durable_inbox_receive() inserts the message id with ON CONFLICT DO
 * NOTHING: two deliveries of one message at once make the second wait for
 * the first transaction, so exactly one of them sees true, and the mark
 * commits or rolls back with the consumer's business writes.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "access/xact.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

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
	bytea	   *hash = payload ? DurableJsonbHash(payload) : NULL;
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	bool		first;

	DurableRequireArg(fcinfo, 1, "message_id");
	message_id = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (message_id[0] == '\0' || strlen(message_id) > DURABLE_MAX_MESSAGE_ID_LEN)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("message id must have between 1 and %d bytes",
					   DURABLE_MAX_MESSAGE_ID_LEN));

	args[0] = Int32GetDatum(DurableKeyPartition(consumer, message_id));
	args[1] = CStringGetTextDatum(consumer);
	args[2] = CStringGetTextDatum(message_id);
	args[3] = PointerGetDatum(hash);
	nulls[3] = hash ? ' ' : 'n';
	args[4] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());

	SPI_connect();
	first = DurableExecuteStmt(STMT_INBOX_INSERT, args, nulls, SPI_OK_INSERT, 0) == 1;
	if (!first)
	{
		bool		isnull;
		Datum		d;

		if (DurableExecuteStmt(STMT_INBOX_GET, args, NULL, SPI_OK_SELECT, 1) == 0)
			ereport(ERROR,
					errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					errmsg("could not serialize access due to a concurrent delivery of message \"%s\"",
						   message_id));
		d = DurableResultDatum(0, 1, &isnull);
		if (!DurableRequestMatches(isnull ? NULL : DatumGetByteaPP(d), hash, payload))
			ereport(ERROR,
					errcode(ERRCODE_DURABLE_IDEMPOTENCY_CONFLICT),
					errmsg("message \"%s\" was already received by \"%s\" with a different payload",
						   message_id, consumer),
					errdetail("The stored payload hash does not match the hash of this payload."),
					errhint("A new message needs a new message id."));
	}
	SPI_finish();
	PG_RETURN_BOOL(first);
}
