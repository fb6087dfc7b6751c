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

/* a request's key, and the values every statement of it binds */
typedef struct RequestKey
{
	Datum		partition;
	Datum		scope_text;
	Datum		key_text;
	Datum		queue;
	const char *scope;
	const char *key;
} RequestKey;

/* bind a key's values to the parameters of a statement that has them */
static void
bind_key(Datum *args, const RequestKey *rk, int partition, int scope,
		 int key, int queue)
{
	args[partition] = rk->partition;
	args[scope] = rk->scope_text;
	args[key] = rk->key_text;
	args[queue] = rk->queue;
}

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
	rk->partition = Int32GetDatum(DurableQueuePairPartition(&settings, scope, key));
	rk->scope_text = CStringGetTextDatum(scope);
	rk->key_text = CStringGetTextDatum(key);
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
	DurableResult res;
	int64		fence;

	res = DurableRun(&idempotent_fence, NULL, NULL, SPI_OK_SELECT, 0);
	if (res.rows == 0)
	{
		*value = (Datum) 0;
		*null = 'n';
		return;
	}
	fence = DurableGetInt64(res, 0, NEXT_FENCE);
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
enum
{
	LOCK_PARTITION,
	LOCK_SCOPE,
	LOCK_KEY,
	LOCK_QUEUE,
	LOCK_NPARAMS
};
static const DurableParam idempotent_lock_params[LOCK_NPARAMS] = {
	[LOCK_PARTITION] = {"partition", INT4OID},
	[LOCK_SCOPE] = {"scope", TEXTOID},
	[LOCK_KEY] = {"key", TEXTOID},
	[LOCK_QUEUE] = {"queue", TEXTOID},
};
static DurableStatement idempotent_lock = {
	.name = "idempotent_lock",
	.sql = "SELECT request_hash, completed, locked_until, expires_at,"
	" recovery_point, response, fence"
	" FROM durable.idempotency_keys"
	" WHERE partition_key = $partition AND scope = $scope AND key = $key"
	" AND queue_name = $queue"
	" FOR NO KEY UPDATE",
	DURABLE_PARAMS(idempotent_lock_params),
	DURABLE_COLUMNS(key_columns),
};

/* lock an existing key and read it, or raise 42704 */
static DurableResult
lock_key(const RequestKey *rk)
{
	Datum		args[LOCK_NPARAMS];
	DurableResult res;

	bind_key(args, rk, LOCK_PARTITION, LOCK_SCOPE, LOCK_KEY, LOCK_QUEUE);
	res = DurableRun(&idempotent_lock, args, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 0)
		ereport(ERROR,
				errcode(ERRCODE_UNDEFINED_OBJECT),
				errmsg("idempotency key \"%s\" in scope \"%s\" does not exist",
					   rk->key, rk->scope),
				errhint("Begin it with durable_idempotent_begin()."));
	return res;
}

/* a key started anew: inserted, or restarted after its retention */
enum
{
	START_PARTITION,
	START_SCOPE,
	START_KEY,
	START_REQUEST_HASH,
	START_NOW,
	START_LOCKED_UNTIL,
	START_EXPIRES_AT,
	START_FENCE,
	START_QUEUE,
	START_NPARAMS
};
static const DurableParam idempotent_start_params[START_NPARAMS] = {
	[START_PARTITION] = {"partition", INT4OID},
	[START_SCOPE] = {"scope", TEXTOID},
	[START_KEY] = {"key", TEXTOID},
	[START_REQUEST_HASH] = {"request_hash", BYTEAOID},
	[START_NOW] = {"now", TIMESTAMPTZOID},
	[START_LOCKED_UNTIL] = {"locked_until", TIMESTAMPTZOID},
	[START_EXPIRES_AT] = {"expires_at", TIMESTAMPTZOID},
	[START_FENCE] = {"fence", INT8OID},
	[START_QUEUE] = {"queue", TEXTOID},
};
static DurableStatement idempotent_insert = {
	.name = "idempotent_insert",
	.sql = "INSERT INTO durable.idempotency_keys (partition_key, scope, key,"
	" request_hash, created_at, locked_until, expires_at, recovery_point,"
	" fence, queue_name)"
	" VALUES ($partition, $scope, $key, $request_hash, $now, $locked_until,"
	" $expires_at, 'started', COALESCE($fence, 1), $queue)"
	" ON CONFLICT (partition_key, queue_name, scope, key) DO NOTHING",
	DURABLE_PARAMS(idempotent_start_params),
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
	.sql = "UPDATE durable.idempotency_keys SET request_hash = $request_hash,"
	" completed = false, created_at = $now, locked_until = $locked_until,"
	" expires_at = $expires_at, recovery_point = 'started', response = NULL,"
	" fence = COALESCE($fence, fence + 1)"
	" WHERE partition_key = $partition AND scope = $scope AND key = $key"
	" AND queue_name = $queue"
	" RETURNING fence",
	DURABLE_PARAMS(idempotent_start_params),
	DURABLE_COLUMNS(key_fence_columns),
};

/* the fence moves by fence_step, or to new_fence when there is one */
enum
{
	UPDATE_PARTITION,
	UPDATE_SCOPE,
	UPDATE_KEY,
	UPDATE_LOCKED_UNTIL,
	UPDATE_RECOVERY_POINT,
	UPDATE_COMPLETED,
	UPDATE_RESPONSE,
	UPDATE_EXPIRES_AT,
	UPDATE_FENCE_STEP,
	UPDATE_NEW_FENCE,
	UPDATE_QUEUE,
	UPDATE_NPARAMS
};
static const DurableParam idempotent_update_params[UPDATE_NPARAMS] = {
	[UPDATE_PARTITION] = {"partition", INT4OID},
	[UPDATE_SCOPE] = {"scope", TEXTOID},
	[UPDATE_KEY] = {"key", TEXTOID},
	[UPDATE_LOCKED_UNTIL] = {"locked_until", TIMESTAMPTZOID},
	[UPDATE_RECOVERY_POINT] = {"recovery_point", TEXTOID},
	[UPDATE_COMPLETED] = {"completed", BOOLOID},
	[UPDATE_RESPONSE] = {"response", JSONBOID},
	[UPDATE_EXPIRES_AT] = {"expires_at", TIMESTAMPTZOID},
	[UPDATE_FENCE_STEP] = {"fence_step", INT8OID},
	[UPDATE_NEW_FENCE] = {"new_fence", INT8OID},
	[UPDATE_QUEUE] = {"queue", TEXTOID},
};
static DurableStatement idempotent_update = {
	.name = "idempotent_update",
	.sql = "UPDATE durable.idempotency_keys SET"
	" locked_until = COALESCE($locked_until, locked_until),"
	" recovery_point = COALESCE($recovery_point, recovery_point),"
	" completed = $completed, response = COALESCE($response, response),"
	" expires_at = COALESCE($expires_at, expires_at),"
	" fence = COALESCE($new_fence, fence + $fence_step)"
	" WHERE partition_key = $partition AND scope = $scope AND key = $key"
	" AND queue_name = $queue"
	" RETURNING fence",
	DURABLE_PARAMS(idempotent_update_params),
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
	DurableResult res;
	RequestKey	rk;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	Interval	retention = {0, DURABLE_REQUEST_RETENTION_DAYS, 0};
	bytea	   *hash = DurableJsonbHash(request);
	Datum		args[START_NPARAMS];
	char		args_nulls[START_NPARAMS] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;
	Datum		response;
	bool		response_null;
	char	   *point;

	request_key(queue, scope, key, true, &rk);
	bind_key(args, &rk, START_PARTITION, START_SCOPE, START_KEY, START_QUEUE);
	args[START_REQUEST_HASH] = PointerGetDatum(hash);
	args[START_NOW] = TimestampTzGetDatum(now);
	args[START_LOCKED_UNTIL] = TimestampTzGetDatum(DurableTimePlus(now, lock));
	args[START_EXPIRES_AT] = TimestampTzGetDatum(DurableTimePlus(now, &retention));

	new_fence(&args[START_FENCE], &args_nulls[START_FENCE]);
	res = DurableRun(&idempotent_insert, args, args_nulls, SPI_OK_INSERT, 0);
	if (res.rows == 1)
	{
		set_status(out, "started", "started",
				   args_nulls[START_FENCE] == 'n' ? 1 : DatumGetInt64(args[START_FENCE]),
				   (Datum) 0, true);
		return;
	}

	res = lock_key(&rk);
	if (DatumGetTimestampTz(DurableGetDatum(res, 0, KEY_EXPIRES_AT, &isnull)) <= now)
	{
		/*
		 * Forgotten after its retention window: a new request, under a new
		 * fence, so that a handler of the old one still cannot write.
		 */
		res = DurableRun(&idempotent_restart, args, args_nulls,
						 SPI_OK_UPDATE_RETURNING, 0);
		set_status(out, "started", "started",
				   DurableGetInt64(res, 0, KEY_NEW_FENCE), (Datum) 0, true);
		return;
	}
	if (!DurableRequestMatches(DatumGetByteaPP(DurableGetDatum(res, 0, KEY_REQUEST_HASH, &isnull)),
							   hash, request))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_IDEMPOTENCY_CONFLICT),
				errmsg("idempotency key \"%s\" was already used for a different request",
					   rk.key),
				errdetail("The stored request hash in scope \"%s\" does not match the hash of this request.",
						  rk.scope),
				errhint("Use a new idempotency key for a new request."));

	point = DurableGetText(res, 0, KEY_RECOVERY_POINT);
	response = DurableGetDatum(res, 0, KEY_RESPONSE, &response_null);
	if (DurableGetBool(res, 0, KEY_COMPLETED))
		set_status(out, "completed", point, 0, response, response_null);
	else if (DatumGetTimestampTz(DurableGetDatum(res, 0, KEY_LOCKED_UNTIL, &isnull)) > now)
		set_status(out, "in_progress", point, 0, (Datum) 0, true);
	else
	{
		Datum		update[UPDATE_NPARAMS];
		char		nulls[UPDATE_NPARAMS];

		/*
		 * The last owner's lock ran out: take over at its recovery point,
		 * under a new fence that fences the last owner off.
		 */
		memset(nulls, ' ', sizeof(nulls));
		bind_key(update, &rk, UPDATE_PARTITION, UPDATE_SCOPE, UPDATE_KEY, UPDATE_QUEUE);
		update[UPDATE_LOCKED_UNTIL] = args[START_LOCKED_UNTIL];
		nulls[UPDATE_RECOVERY_POINT] = 'n';
		update[UPDATE_COMPLETED] = BoolGetDatum(false);
		nulls[UPDATE_RESPONSE] = 'n';
		nulls[UPDATE_EXPIRES_AT] = 'n';
		update[UPDATE_FENCE_STEP] = Int64GetDatum(1);
		update[UPDATE_NEW_FENCE] = args[START_FENCE];
		nulls[UPDATE_NEW_FENCE] = args_nulls[START_FENCE];
		res = DurableRun(&idempotent_update, update, nulls,
						 SPI_OK_UPDATE_RETURNING, 0);
		set_status(out, "started", point,
				   DurableGetInt64(res, 0, KEY_NEW_FENCE), (Datum) 0, true);
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
	DurableResult res = lock_key(rk);

	if (DurableGetInt64(res, 0, KEY_FENCE) != fence)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_STALE_FENCING_TOKEN),
				errmsg("fencing token %lld is stale for idempotency key \"%s\" in scope \"%s\"",
					   (long long) fence, rk->key, rk->scope),
				errdetail("The request was taken over by another handler, or this fence was never handed out."),
				errhint("Stop handling the request and roll back; its current owner answers it."));
	if (DurableGetBool(res, 0, KEY_COMPLETED))
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
	Datum		update[UPDATE_NPARAMS];
	char		nulls[UPDATE_NPARAMS];

	request_key(queue, scope, key, false, &rk);
	memset(nulls, ' ', sizeof(nulls));
	bind_key(update, &rk, UPDATE_PARTITION, UPDATE_SCOPE, UPDATE_KEY, UPDATE_QUEUE);
	nulls[UPDATE_LOCKED_UNTIL] = 'n';
	update[UPDATE_RECOVERY_POINT] = PointerGetDatum(recovery_point);
	update[UPDATE_COMPLETED] = BoolGetDatum(false);
	nulls[UPDATE_RESPONSE] = 'n';
	nulls[UPDATE_EXPIRES_AT] = 'n';
	update[UPDATE_FENCE_STEP] = Int64GetDatum(0);
	nulls[UPDATE_NEW_FENCE] = 'n';
	if (lock != NULL)
	{
		update[UPDATE_LOCKED_UNTIL] =
			TimestampTzGetDatum(DurableTimePlus(GetCurrentTransactionStartTimestamp(),
												lock));
		nulls[UPDATE_LOCKED_UNTIL] = ' ';
	}

	require_held(&rk, fence);
	DurableRun(&idempotent_update, update, nulls,
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
	Datum		update[UPDATE_NPARAMS];
	char		nulls[UPDATE_NPARAMS];
	TimestampTz now = GetCurrentTransactionStartTimestamp();

	request_key(queue, scope, key, false, &rk);
	memset(nulls, ' ', sizeof(nulls));
	bind_key(update, &rk, UPDATE_PARTITION, UPDATE_SCOPE, UPDATE_KEY, UPDATE_QUEUE);
	update[UPDATE_LOCKED_UNTIL] = TimestampTzGetDatum(now);
	update[UPDATE_RECOVERY_POINT] = CStringGetTextDatum("finished");
	update[UPDATE_COMPLETED] = BoolGetDatum(true);
	update[UPDATE_RESPONSE] = JsonbPGetDatum(response);
	update[UPDATE_EXPIRES_AT] = TimestampTzGetDatum(DurableTimePlus(now, retention));
	update[UPDATE_FENCE_STEP] = Int64GetDatum(0);
	nulls[UPDATE_NEW_FENCE] = 'n';

	require_held(&rk, fence);
	DurableRun(&idempotent_update, update, nulls,
			   SPI_OK_UPDATE_RETURNING, 0);
}
