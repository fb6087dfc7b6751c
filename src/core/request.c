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
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "access/xact.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

/* how long a key that never finishes is remembered */
#define DURABLE_REQUEST_RETENTION_DAYS 1

/* columns of STMT_IDEMPOTENT_LOCK */
enum
{
	KEY_REQUEST_HASH = 1,
	KEY_COMPLETED,
	KEY_LOCKED_UNTIL,
	KEY_EXPIRES_AT,
	KEY_RECOVERY_POINT,
	KEY_RESPONSE,
	KEY_FENCE
};

/* the arguments of durable_idempotent_begin's result */
#define BEGIN_COLUMNS 4

typedef struct RequestKey
{
	Datum		args[3];		/* partition, scope, key */
	const char *scope;
	const char *key;
} RequestKey;

static void
request_key_args(FunctionCallInfo fcinfo, RequestKey *rk)
{
	char	   *key;

	rk->scope = DurableNameArg(fcinfo, 0, "scope");
	DurableRequireArg(fcinfo, 1, "key");
	key = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (key[0] == '\0' || strlen(key) > 255)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("idempotency key must have between 1 and 255 bytes"));
	rk->key = key;
	rk->args[0] = Int32GetDatum(DurableKeyPartition(rk->scope, key));
	rk->args[1] = CStringGetTextDatum(rk->scope);
	rk->args[2] = CStringGetTextDatum(key);
}

static TimestampTz
plus_interval(TimestampTz t, Interval *span)
{
	return DurableTimePlus(t, span);
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

/* the fence is given to the one handler that owns the request, only */
static void
put_status(FunctionCallInfo fcinfo, const char *status, const char *point,
		   int64 fence, Datum response, bool response_null)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[BEGIN_COLUMNS];
	bool		nulls[BEGIN_COLUMNS] = {false, false, fence == 0, response_null};

	values[0] = CStringGetTextDatum(status);
	values[1] = CStringGetTextDatum(point);
	values[2] = Int64GetDatum(fence);
	values[3] = response;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

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

	if (DurableExecuteStmt(STMT_IDEMPOTENT_FENCE, NULL, NULL, SPI_OK_SELECT, 0) == 0)
	{
		*value = (Datum) 0;
		*null = 'n';
		return;
	}
	fence = DurableResultInt64(0, 1);
	if (DurableDistributed())
		fence = fence << DURABLE_NODE_BITS | DurableNodeId();
	*value = Int64GetDatum(fence);
	*null = ' ';
}

/* lock an existing key, or raise 42704 */
static void
lock_key(const RequestKey *rk)
{
	if (DurableExecuteStmt(STMT_IDEMPOTENT_LOCK, (Datum *) rk->args, NULL,
					   SPI_OK_SELECT, 1) == 0)
		ereport(ERROR,
				errcode(ERRCODE_UNDEFINED_OBJECT),
				errmsg("idempotency key \"%s\" in scope \"%s\" does not exist",
					   rk->key, rk->scope),
				errhint("Begin it with durable_idempotent_begin()."));
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
	RequestKey	rk;
	Jsonb	   *request;
	Interval   *lock = DurablePositiveIntervalArg(fcinfo, 3, "lock");
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	Interval	retention = {0, DURABLE_REQUEST_RETENTION_DAYS, 0};
	bytea	   *hash;
	Datum		args[8];
	char		args_nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;
	Datum		response;
	bool		response_null;
	char	   *point;
	int64		fence;

	request_key_args(fcinfo, &rk);
	DurableRequireArg(fcinfo, 2, "request");
	request = DurableJsonbArg(fcinfo, 2, "request");
	hash = DurableJsonbHash(request);
	InitMaterializedSRF(fcinfo, 0);
	if (((ReturnSetInfo *) fcinfo->resultinfo)->setDesc->natts != BEGIN_COLUMNS)
		refuse_unfenced("durable_idempotent_begin");

	memcpy(args, rk.args, sizeof(rk.args));
	args[3] = PointerGetDatum(hash);
	args[4] = TimestampTzGetDatum(now);
	args[5] = TimestampTzGetDatum(plus_interval(now, lock));
	args[6] = TimestampTzGetDatum(plus_interval(now, &retention));

	SPI_connect();
	new_fence(&args[7], &args_nulls[7]);
	if (DurableExecuteStmt(STMT_IDEMPOTENT_INSERT, args, args_nulls, SPI_OK_INSERT, 0) == 1)
	{
		put_status(fcinfo, "started", "started",
				   args_nulls[7] == 'n' ? 1 : DatumGetInt64(args[7]),
				   (Datum) 0, true);
		SPI_finish();
		return (Datum) 0;
	}

	lock_key(&rk);
	if (DatumGetTimestampTz(DurableResultDatum(0, KEY_EXPIRES_AT, &isnull)) <= now)
	{
		/*
		 * Forgotten after its retention window: a new request, under a new
		 * fence, so that a handler of the old one still cannot write.
		 */
		DurableExecuteStmt(STMT_IDEMPOTENT_RESTART, args, args_nulls,
					   SPI_OK_UPDATE_RETURNING, 0);
		put_status(fcinfo, "started", "started", DurableResultInt64(0, 1),
				   (Datum) 0, true);
		SPI_finish();
		return (Datum) 0;
	}
	if (!DurableRequestMatches(DatumGetByteaPP(DurableResultDatum(0, KEY_REQUEST_HASH, &isnull)),
							   hash, request))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_IDEMPOTENCY_CONFLICT),
				errmsg("idempotency key \"%s\" was already used for a different request",
					   rk.key),
				errdetail("The stored request hash in scope \"%s\" does not match the hash of this request.",
						  rk.scope),
				errhint("Use a new idempotency key for a new request."));

	point = DurableResultText(0, KEY_RECOVERY_POINT);
	response = DurableResultDatum(0, KEY_RESPONSE, &response_null);
	if (DatumGetBool(DurableResultDatum(0, KEY_COMPLETED, &isnull)))
		put_status(fcinfo, "completed", point, 0, response, response_null);
	else if (DatumGetTimestampTz(DurableResultDatum(0, KEY_LOCKED_UNTIL, &isnull)) > now)
		put_status(fcinfo, "in_progress", point, 0, (Datum) 0, true);
	else
	{
		Datum		update[10];
		char		nulls[10] = {' ', ' ', ' ', ' ', 'n', ' ', 'n', 'n', ' ', ' '};

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
		DurableExecuteStmt(STMT_IDEMPOTENT_UPDATE, update, nulls,
					   SPI_OK_UPDATE_RETURNING, 0);
		fence = DurableResultInt64(0, 1);
		put_status(fcinfo, "started", point, fence, (Datum) 0, true);
	}
	SPI_finish();
	return (Datum) 0;
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
 * require_held
 *		Lock the key and check that the caller's fence is its current one
 *		(else 55U01; the detail does not give the current fence away) and
 *		that it is not finished (55U04).
 */
static void
require_held(const RequestKey *rk, int64 fence)
{
	bool		isnull;

	lock_key(rk);
	if (DurableResultInt64(0, KEY_FENCE) != fence)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_STALE_FENCING_TOKEN),
				errmsg("fencing token %lld is stale for idempotency key \"%s\" in scope \"%s\"",
					   (long long) fence, rk->key, rk->scope),
				errdetail("The request was taken over by another handler, or this fence was never handed out."),
				errhint("Stop handling the request and roll back; its current owner answers it."));
	if (DatumGetBool(DurableResultDatum(0, KEY_COMPLETED, &isnull)))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("idempotency key \"%s\" in scope \"%s\" is already completed",
					   rk->key, rk->scope));
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
	RequestKey	rk;
	int64		fence;
	Datum		update[10];
	char		nulls[10] = {' ', ' ', ' ', 'n', ' ', ' ', 'n', 'n', ' ', 'n'};

	if (PG_NARGS() != 5)
		refuse_unfenced("durable_idempotent_advance");
	request_key_args(fcinfo, &rk);
	fence = request_fence_arg(fcinfo, 2);
	memcpy(update, rk.args, sizeof(rk.args));
	DurableRequireArg(fcinfo, 3, "recovery_point");
	update[4] = PointerGetDatum(DurableTextArg(fcinfo, 3, "recovery_point"));
	update[5] = BoolGetDatum(false);
	update[8] = Int64GetDatum(0);
	if (!PG_ARGISNULL(4))
	{
		update[3] = TimestampTzGetDatum(plus_interval(GetCurrentTransactionStartTimestamp(),
													  DurablePositiveIntervalArg(fcinfo, 4, "lock")));
		nulls[3] = ' ';
	}

	SPI_connect();
	require_held(&rk, fence);
	DurableExecuteStmt(STMT_IDEMPOTENT_UPDATE, update, nulls,
				   SPI_OK_UPDATE_RETURNING, 0);
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
	RequestKey	rk;
	int64		fence;
	Datum		update[10];
	char		nulls[10] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', 'n'};
	TimestampTz now = GetCurrentTransactionStartTimestamp();

	if (PG_NARGS() != 5)
		refuse_unfenced("durable_idempotent_finish");
	request_key_args(fcinfo, &rk);
	fence = request_fence_arg(fcinfo, 2);
	DurableRequireArg(fcinfo, 3, "response");
	memcpy(update, rk.args, sizeof(rk.args));
	update[3] = TimestampTzGetDatum(now);
	update[4] = CStringGetTextDatum("finished");
	update[5] = BoolGetDatum(true);
	update[6] = JsonbPGetDatum(DurableJsonbArg(fcinfo, 3, "response"));
	update[7] = TimestampTzGetDatum(plus_interval(now,
												  DurablePositiveIntervalArg(fcinfo, 4, "retention")));
	update[8] = Int64GetDatum(0);

	SPI_connect();
	require_held(&rk, fence);
	DurableExecuteStmt(STMT_IDEMPOTENT_UPDATE, update, nulls,
				   SPI_OK_UPDATE_RETURNING, 0);
	SPI_finish();
	PG_RETURN_VOID();
}
