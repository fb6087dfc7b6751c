/*-------------------------------------------------------------------------
 *
 * request.c
 *	  Request-level idempotency for request handlers: begin, advance
 *	  through recovery points, finish.
 *
 * A key is bound to the hash of the request it began with, for its
 * retention window.  Begin inserts it with ON CONFLICT DO NOTHING, so of two
 * handlers that begin the same key at once the second waits for the first
 * and then sees it in progress.  A handler that dies leaves its key locked
 * only until its lock interval ends; the next begin takes it over at the
 * recovery point it reached.
 *
 * Ownership is fenced like a task's lease: every 'started' (a new key, a
 * takeover, a restart) hands out a new fence from a sequence that starts
 * past anything an earlier installation issued, and advance and finish
 * write only under the key's current fence.  A handler
 * that was slow rather than dead, and was taken over, gets 55U01 and
 * writes nothing, so it cannot move the new owner's recovery point back or
 * finish the request with its own answer.  A fence that is still current is
 * accepted after its lock has run out, as long as nobody took over.
 *
 * Keys belong to a queue: a scope's keys are unique within the queue, so
 * two applications that use the same scope and key in their own queues
 * never meet, and a restricted queue lets only the roles with its enqueue
 * grant begin, advance or finish its requests (42501, before anything
 * about the key is looked at).  The SQL entry points are
 * api/messaging.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* how long a key that never finishes is remembered */
#define DURABLE_REQUEST_RETENTION_DAYS 1

typedef struct RequestKey
{
	Datum		args[3];		/* partition, scope, key */
	Datum		queue;			/* the last argument of every statement */
	const char *scope;
	const char *key;
} RequestKey;

/*
 * request_key
 *		The key of a request of a queue, in one of the queue's partitions.
 *		42704 for an unknown queue, 42501 without its enqueue grant where it
 *		is restricted.  A begin (shared) locks the queue's row as an enqueue
 *		does, so that the queue cannot be dropped under a new key.
 */
static void
request_key(const char *queue, const char *scope, const char *key,
			bool shared, RequestKey *rk)
{
	DurableQueue settings;

	if (shared)
		DurableQueueGetShared(queue, &settings);
	else
		DurableQueueGet(queue, &settings);
	DurableCheckRestrictedQueue(queue, settings.restricted, DURABLE_PRIV_ENQUEUE);
	rk->scope = scope;
	rk->key = key;
	rk->args[0] = Int32GetDatum(DurableQueuePairPartition(&settings, scope, key));
	rk->args[1] = CStringGetTextDatum(scope);
	rk->args[2] = CStringGetTextDatum(key);
	rk->queue = CStringGetTextDatum(queue);
}

enum
{
	NEXT_FENCE,
	NEXT_FENCE_NCOLUMNS
};
static const DurableColumn next_fence_columns[NEXT_FENCE_NCOLUMNS] = {
	[NEXT_FENCE] = {"nextval", INT8OID},
};
static DurableStatement idempotent_fence = {
	.name = "idempotent_fence",
	/* none before the 0.5.0 SQL, whose update makes the sequence */
	.sql = "SELECT pg_catalog.nextval(s)"
	" FROM pg_catalog.to_regclass('durable.request_fence_seq') s"
	" WHERE s IS NOT NULL",
	DURABLE_COLUMNS(next_fence_columns),
};

/*
 * new_fence
 *		The fence of a new owner, from durable.request_fence_seq, which
 *		starts from the clock at every installation (as the outbox's fences
 *		do): after DROP and CREATE EXTENSION a key begun again never hands
 *		out a fence that a handler of the earlier installation still holds.
 *		Each node has its own sequence, so on Citus a fence carries its
 *		node.  Under SQL older than 0.5.0 there is no sequence yet: NULL,
 *		and the statements number fences as they did (1, then one more).
 */
static void
new_fence(Datum *value, char *null)
{
	int64		fence;

	if (DurableExecute(&idempotent_fence, NULL, NULL, SPI_OK_SELECT, 0) == 0)
	{
		*value = (Datum) 0;
		*null = 'n';
		return;
	}
	fence = DurableColumnInt64(0, NEXT_FENCE);
	if (DurableDistributed())
		fence = fence << DURABLE_NODE_BITS | DurableNodeId();
	*value = Int64GetDatum(fence);
	*null = ' ';
}

enum
{
	KEY_REQUEST_HASH,
	KEY_COMPLETED,
	KEY_LOCKED_UNTIL,
	KEY_EXPIRES_AT,
	KEY_RECOVERY_POINT,
	KEY_RESPONSE,
	KEY_FENCE,
	KEY_NCOLUMNS
};
static const DurableColumn key_columns[KEY_NCOLUMNS] = {
	[KEY_REQUEST_HASH] = {"request_hash", BYTEAOID},
	[KEY_COMPLETED] = {"completed", BOOLOID},
	[KEY_LOCKED_UNTIL] = {"locked_until", TIMESTAMPTZOID},
	[KEY_EXPIRES_AT] = {"expires_at", TIMESTAMPTZOID},
	[KEY_RECOVERY_POINT] = {"recovery_point", TEXTOID},
	[KEY_RESPONSE] = {"response", JSONBOID},
	[KEY_FENCE] = {"fence", INT8OID},
};
static DurableStatement idempotent_lock = {
	.name = "idempotent_lock",
	.sql = "SELECT request_hash, completed, locked_until, expires_at,"
	" recovery_point, response, fence"
	" FROM durable.idempotency_keys"
	" WHERE partition_key = $1 AND scope = $2 AND key = $3 AND queue_name = $4"
	" FOR NO KEY UPDATE",
	.nargs = 4, .argtypes = {INT4OID, TEXTOID, TEXTOID, TEXTOID},
	DURABLE_COLUMNS(key_columns),
};

/* lock an existing key, or raise 42704 */
static void
lock_key(const RequestKey *rk)
{
	Datum		args[4] = {rk->args[0], rk->args[1], rk->args[2], rk->queue};

	if (DurableExecute(&idempotent_lock, args, NULL, SPI_OK_SELECT, 1) == 0)
		ereport(ERROR,
				errcode(ERRCODE_UNDEFINED_OBJECT),
				errmsg("idempotency key \"%s\" in scope \"%s\" does not exist",
					   rk->key, rk->scope),
				errhint("Begin it with durable_idempotent_begin()."));
}

static DurableStatement idempotent_insert = {
	.name = "idempotent_insert",
	.sql = "INSERT INTO durable.idempotency_keys (partition_key, scope, key,"
	" request_hash, created_at, locked_until, expires_at, recovery_point,"
	" fence, queue_name)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, 'started', COALESCE($8, 1), $9)"
	" ON CONFLICT (partition_key, queue_name, scope, key) DO NOTHING",
	.nargs = 9, .argtypes = {INT4OID, TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TEXTOID},
};

/* restart and update return the key's fence */
enum
{
	KEY_NEW_FENCE,
	KEY_NEW_FENCE_NCOLUMNS
};
static const DurableColumn key_fence_columns[KEY_NEW_FENCE_NCOLUMNS] = {
	[KEY_NEW_FENCE] = {"fence", INT8OID},
};
static DurableStatement idempotent_restart = {
	.name = "idempotent_restart",
	.sql = "UPDATE durable.idempotency_keys SET request_hash = $4, completed = false,"
	" created_at = $5, locked_until = $6, expires_at = $7,"
	" recovery_point = 'started', response = NULL,"
	" fence = COALESCE($8, fence + 1)"
	" WHERE partition_key = $1 AND scope = $2 AND key = $3 AND queue_name = $9"
	" RETURNING fence",
	.nargs = 9, .argtypes = {INT4OID, TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TEXTOID},
	DURABLE_COLUMNS(key_fence_columns),
};

static DurableStatement idempotent_update = {
	.name = "idempotent_update",
	.sql = "UPDATE durable.idempotency_keys SET"
	" locked_until = COALESCE($4, locked_until),"
	" recovery_point = COALESCE($5, recovery_point),"
	" completed = $6, response = COALESCE($7, response),"
	" expires_at = COALESCE($8, expires_at),"
	" fence = COALESCE($10, fence + $9)"
	" WHERE partition_key = $1 AND scope = $2 AND key = $3 AND queue_name = $11"
	" RETURNING fence",
	.nargs = 11, .argtypes = {INT4OID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID,
	BOOLOID, JSONBOID, TIMESTAMPTZOID, INT8OID, INT8OID, TEXTOID},
	DURABLE_COLUMNS(key_fence_columns),
};

/* the answer of a begin; the fence goes to the one handler that owns it */
static void
set_status(DurableRequestStatus *out, const char *status, const char *point,
		   int64 fence, Datum response, bool response_null)
{
	out->status = status;
	out->recovery_point = point;
	out->fence = fence;
	out->response = response;
	out->response_null = response_null;
}

/*
 * DurableIdempotentBegin
 *		Begin a request under its key: 'started' (the caller owns it under
 *		a fence until the lock ends, from its recovery point on), or
 *		'in_progress' (another handler owns it now), or 'completed' (the
 *		stored response is the answer).  The fence is 0 unless 'started';
 *		the strings and the response are in SPI memory.  Raises 55U03 when
 *		the key was used for another request.
 */
void
DurableIdempotentBegin(const char *queue, const char *scope, const char *key,
					   Jsonb *request, Interval *lock,
					   DurableRequestStatus *out)
{
	RequestKey	rk;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	Interval	retention = {0, DURABLE_REQUEST_RETENTION_DAYS, 0};
	bytea	   *hash = DurableJsonbHash(request);
	Datum		args[9];
	char		args_nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;
	Datum		response;
	bool		response_null;
	char	   *point;

	request_key(queue, scope, key, true, &rk);
	memcpy(args, rk.args, sizeof(rk.args));
	args[3] = PointerGetDatum(hash);
	args[8] = rk.queue;
	args[4] = TimestampTzGetDatum(now);
	args[5] = TimestampTzGetDatum(DurableTimePlus(now, lock));
	args[6] = TimestampTzGetDatum(DurableTimePlus(now, &retention));

	new_fence(&args[7], &args_nulls[7]);
	if (DurableExecute(&idempotent_insert, args, args_nulls, SPI_OK_INSERT, 0) == 1)
	{
		set_status(out, "started", "started",
				   args_nulls[7] == 'n' ? 1 : DatumGetInt64(args[7]),
				   (Datum) 0, true);
		return;
	}

	lock_key(&rk);
	if (DatumGetTimestampTz(DurableColumnDatum(0, KEY_EXPIRES_AT, &isnull)) <= now)
	{
		/*
		 * Forgotten after its retention window: a new request, under a new
		 * fence, so that a handler of the old one still cannot write.
		 */
		DurableExecute(&idempotent_restart, args, args_nulls,
					   SPI_OK_UPDATE_RETURNING, 0);
		set_status(out, "started", "started",
				   DurableColumnInt64(0, KEY_NEW_FENCE), (Datum) 0, true);
		return;
	}
	if (!DurableRequestMatches(DatumGetByteaPP(DurableColumnDatum(0, KEY_REQUEST_HASH, &isnull)),
							   hash, request))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_IDEMPOTENCY_CONFLICT),
				errmsg("idempotency key \"%s\" was already used for a different request",
					   rk.key),
				errdetail("The stored request hash in scope \"%s\" does not match the hash of this request.",
						  rk.scope),
				errhint("Use a new idempotency key for a new request."));

	point = DurableColumnText(0, KEY_RECOVERY_POINT);
	response = DurableColumnDatum(0, KEY_RESPONSE, &response_null);
	if (DurableColumnBool(0, KEY_COMPLETED))
		set_status(out, "completed", point, 0, response, response_null);
	else if (DatumGetTimestampTz(DurableColumnDatum(0, KEY_LOCKED_UNTIL, &isnull)) > now)
		set_status(out, "in_progress", point, 0, (Datum) 0, true);
	else
	{
		Datum		update[11];
		char		nulls[11] = {' ', ' ', ' ', ' ', 'n', ' ', 'n', 'n', ' ', ' ', ' '};

		/*
		 * The last owner's lock ran out: take over at its recovery point,
		 * under a new fence that fences the last owner off.
		 */
		memcpy(update, rk.args, sizeof(rk.args));
		update[3] = args[5];
		update[5] = BoolGetDatum(false);
		update[8] = Int64GetDatum(1);
		update[9] = args[7];
		nulls[9] = args_nulls[7];
		update[10] = rk.queue;
		DurableExecute(&idempotent_update, update, nulls,
					   SPI_OK_UPDATE_RETURNING, 0);
		set_status(out, "started", point,
				   DurableColumnInt64(0, KEY_NEW_FENCE), (Datum) 0, true);
	}
}

/*
 * require_held
 *		Lock the key and check that the caller's fence is its current one
 *		(else 55U01; the detail does not give the current fence away) and
 *		that it is not finished (55U04).
 */
static void
require_held(const RequestKey *rk, int64 fence)
{
	lock_key(rk);
	if (DurableColumnInt64(0, KEY_FENCE) != fence)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_STALE_FENCING_TOKEN),
				errmsg("fencing token %lld is stale for idempotency key \"%s\" in scope \"%s\"",
					   (long long) fence, rk->key, rk->scope),
				errdetail("The request was taken over by another handler, or this fence was never handed out."),
				errhint("Stop handling the request and roll back; its current owner answers it."));
	if (DurableColumnBool(0, KEY_COMPLETED))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("idempotency key \"%s\" in scope \"%s\" is already completed",
					   rk->key, rk->scope));
}

/*
 * DurableIdempotentAdvance
 *		Record the recovery point a request has reached under fence (55U01
 *		unless it is the key's current one), and extend its lock when lock
 *		is not NULL.
 */
void
DurableIdempotentAdvance(const char *queue, const char *scope, const char *key,
						 int64 fence, text *recovery_point, Interval *lock)
{
	RequestKey	rk;
	Datum		update[11];
	char		nulls[11] = {' ', ' ', ' ', 'n', ' ', ' ', 'n', 'n', ' ', 'n', ' '};

	request_key(queue, scope, key, false, &rk);
	memcpy(update, rk.args, sizeof(rk.args));
	update[10] = rk.queue;
	update[4] = PointerGetDatum(recovery_point);
	update[5] = BoolGetDatum(false);
	update[8] = Int64GetDatum(0);
	if (lock != NULL)
	{
		update[3] = TimestampTzGetDatum(DurableTimePlus(GetCurrentTransactionStartTimestamp(),
														lock));
		nulls[3] = ' ';
	}

	require_held(&rk, fence);
	DurableExecute(&idempotent_update, update, nulls,
				   SPI_OK_UPDATE_RETURNING, 0);
}

/*
 * DurableIdempotentFinish
 *		Store a request's response under fence (55U01 unless it is the
 *		key's current one); every later begin of the key with the same
 *		request gets it back, until retention has passed.
 */
void
DurableIdempotentFinish(const char *queue, const char *scope, const char *key,
						int64 fence, Jsonb *response, Interval *retention)
{
	RequestKey	rk;
	Datum		update[11];
	char		nulls[11] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', 'n', ' '};
	TimestampTz now = GetCurrentTransactionStartTimestamp();

	request_key(queue, scope, key, false, &rk);
	memcpy(update, rk.args, sizeof(rk.args));
	update[10] = rk.queue;
	update[3] = TimestampTzGetDatum(now);
	update[4] = CStringGetTextDatum("finished");
	update[5] = BoolGetDatum(true);
	update[6] = JsonbPGetDatum(response);
	update[7] = TimestampTzGetDatum(DurableTimePlus(now, retention));
	update[8] = Int64GetDatum(0);

	require_held(&rk, fence);
	DurableExecute(&idempotent_update, update, nulls,
				   SPI_OK_UPDATE_RETURNING, 0);
}
