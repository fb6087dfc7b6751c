/*-------------------------------------------------------------------------
 *
 * tasks.c
 *	  The SQL functions of tasks (README, "The SQL API", Tasks): enqueue,
 *	  claim, heartbeat, begin, release, commit, fail and cancel; and the helpers
 *	  other api files share: the arguments of an enqueue, a claim's result.  Each checks its
 *	  arguments, connects to SPI, calls the core (enqueue.c, claim.c,
 *	  commit.c, step.c) and returns its result.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* progress is a phase or a sequence number, not a document */
#define DURABLE_MAX_PROGRESS_LEN 1024

/*
 * DurableEnqueueArgs
 *		Read the arguments that durable_enqueue, durable_enqueue_batch and
 *		durable_spawn share, from argno on: run_at, priority, class,
 *		max_attempts, deadline, workflow_version, metadata; the concurrency
 *		key at key_argno and the fairness key right after it, where the
 *		function has them (key_argno >= 0; a call of an older version's
 *		signature has neither, or no fairness key).
 */
void
DurableEnqueueArgs(FunctionCallInfo fcinfo, int argno, int key_argno,
				   DurableEnqueueRequest *req)
{
	if (!PG_ARGISNULL(argno))
		req->run_at = PG_GETARG_TIMESTAMPTZ(argno);
	if (req->run_at != 0 && TIMESTAMP_NOT_FINITE(req->run_at))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("run_at must be a finite time"));
	DurableRequireArg(fcinfo, argno + 1, "priority");
	req->priority = PG_GETARG_INT32(argno + 1);
	DurableRequireArg(fcinfo, argno + 2, "class");
	req->class = text_to_cstring(PG_GETARG_TEXT_PP(argno + 2));
	(void) DurableParseActivityClass(req->class);
	if (!PG_ARGISNULL(argno + 3))
		req->max_attempts = DurableIntArgAtLeast(fcinfo, argno + 3, "max_attempts", 1);
	if (!PG_ARGISNULL(argno + 4))
		req->deadline = DurablePositiveIntervalArg(fcinfo, argno + 4, "deadline");
	req->workflow_version = DurableTextArg(fcinfo, argno + 5, "workflow_version");
	req->metadata = DurableJsonbArg(fcinfo, argno + 6, "metadata");
	if (key_argno >= 0 && key_argno < PG_NARGS() && !PG_ARGISNULL(key_argno))
	{
		req->concurrency_key = text_to_cstring(PG_GETARG_TEXT_PP(key_argno));
		DurableCheckKey(req->concurrency_key, "concurrency key");
	}
	if (key_argno >= 0 && key_argno + 1 < PG_NARGS() && !PG_ARGISNULL(key_argno + 1))
	{
		req->fairness_key = text_to_cstring(PG_GETARG_TEXT_PP(key_argno + 1));
		DurableCheckKey(req->fairness_key, "fairness key");
	}
}

/*
 * durable_enqueue(queue text, payload jsonb = '{}', idempotency_key text = NULL,
 *		run_at timestamptz = NULL, priority int = 0, class text = 'idempotent',
 *		max_attempts int = NULL, deadline interval = NULL,
 *		workflow_version text = NULL, metadata jsonb = NULL,
 *		concurrency_key text = NULL, fairness_key text = NULL,
 *		rate_limits jsonb = NULL, budgets text[] = NULL,
 *		spend_limit numeric = NULL) RETURNS bigint
 *
 * Returns the new task's id, or the first task's id for a key seen before
 * with the same payload.  Raises 55U03 for a key seen with another payload,
 * 42704 for an unknown queue, rate limit or budget, 22023/22004/54000 for bad
 * arguments.
 */
PG_FUNCTION_INFO_V1(durable_enqueue);
Datum
durable_enqueue(PG_FUNCTION_ARGS)
{
	DurableEnqueueRequest req = {0};
	int64		task_id;

	req.queue = DurableNameArg(fcinfo, 0, "queue name");
	DurableRequireArg(fcinfo, 1, "payload");
	req.payload = DurableJsonbArg(fcinfo, 1, "payload");
	if (!PG_ARGISNULL(2))
		req.idempotency_key = text_to_cstring(PG_GETARG_TEXT_PP(2));
	DurableEnqueueArgs(fcinfo, 3, 10, &req);
	if (PG_NARGS() > 12)
		req.rate_limits = DurableJsonbArg(fcinfo, 12, "rate_limits");
	if (PG_NARGS() > 13 && !PG_ARGISNULL(13))
		req.budgets = PG_GETARG_ARRAYTYPE_P(13);
	req.spend_limit = DurableNumericArg(fcinfo, 14);

	SPI_connect();
	task_id = DurableEnqueueTask(&req);
	SPI_finish();
	PG_RETURN_INT64(task_id);
}

/* the ids of a batch, as the array it returns */
static ArrayType *
id_array(const int64 *result, int n)
{
	Datum	   *ids = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		ids[i] = Int64GetDatum(result[i]);
	return construct_array(ids, n, INT8OID, sizeof(int64),
						   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
}

/*
 * durable_enqueue_batch(queue text, payloads jsonb[], idempotency_keys
 *		text[] = NULL, run_at timestamptz = NULL, priority int = 0,
 *		class text = 'idempotent', max_attempts int = NULL,
 *		deadline interval = NULL, workflow_version text = NULL,
 *		metadata jsonb = NULL, concurrency_keys text[] = NULL,
 *		fairness_keys text[] = NULL)
 *		RETURNS bigint[]
 *
 * Adds a task per payload, in one statement, and returns their ids in
 * order.  Each element follows durable_enqueue's rules for its own key (a
 * NULL element has none): a key seen before with the same payload gives
 * its first task's id (also a key repeated within the batch), with another
 * payload 55U03 for the whole batch.  All or nothing: any error adds none.
 */
PG_FUNCTION_INFO_V1(durable_enqueue_batch);
Datum
durable_enqueue_batch(PG_FUNCTION_ARGS)
{
	DurableEnqueueRequest req = {0};
	Datum	   *elems;
	bool	   *elnulls;
	ArrayType  *keys = NULL;
	ArrayType  *ckeys = NULL;
	ArrayType  *fkeys = NULL;
	int			n;
	int64	   *result;

	req.queue = DurableNameArg(fcinfo, 0, "queue name");
	DurableRequireArg(fcinfo, 1, "payloads");
	n = DurableArrayArg(fcinfo, 1, JSONBOID, "payloads", &elems, &elnulls);
	if (n > DURABLE_MAX_BATCH)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("a batch can enqueue at most %d tasks", DURABLE_MAX_BATCH),
				errdetail("The batch has %d payloads.", n));
	if (!PG_ARGISNULL(2))
	{
		if (DurableArrayArg(fcinfo, 2, TEXTOID, "idempotency_keys", &elems, &elnulls) != n)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("idempotency_keys must have one element per payload"));
		keys = PG_GETARG_ARRAYTYPE_P(2);
	}
	if (!PG_ARGISNULL(10))
	{
		if (DurableArrayArg(fcinfo, 10, TEXTOID, "concurrency_keys", &elems, &elnulls) != n)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("concurrency_keys must have one element per payload"));
		ckeys = PG_GETARG_ARRAYTYPE_P(10);
	}
	if (PG_NARGS() > 11 && !PG_ARGISNULL(11))
	{
		if (DurableArrayArg(fcinfo, 11, TEXTOID, "fairness_keys", &elems, &elnulls) != n)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("fairness_keys must have one element per payload"));
		fkeys = PG_GETARG_ARRAYTYPE_P(11);
	}
	DurableEnqueueArgs(fcinfo, 3, -1, &req);

	/* what outlives SPI_finish is allocated before SPI_connect */
	result = palloc(sizeof(int64) * Max(n, 1));

	SPI_connect();
	DurableEnqueueBatch(&req, PG_GETARG_ARRAYTYPE_P(1), keys, ckeys, fkeys, n, result);
	SPI_finish();
	PG_RETURN_ARRAYTYPE_P(id_array(result, n));
}

/*
 * DurableClaimResult
 *		The body of the SQL claim functions, whose arguments are (queue text,
 *		worker text, lease interval, batch int): the rows of DurableClaim of
 *		that kind, as the function's result set.
 */
Datum
DurableClaimResult(FunctionCallInfo fcinfo, DurableClaimKind kind)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	char	   *worker = DurableNameArg(fcinfo, 1, "worker name");
	Interval   *lease = NULL;
	int32		batch = DurableBatchArg(fcinfo, 3);
	Jsonb	   *runs = NULL;

	if (!PG_ARGISNULL(2))
		lease = DurablePositiveIntervalArg(fcinfo, 2, "lease");
	if (PG_NARGS() > 4 && !PG_ARGISNULL(4))
		runs = DurableJsonbArg(fcinfo, 4, "versions");
	InitMaterializedSRF(fcinfo, 0);

	SPI_connect();
	DurableClaim(kind, queue, worker, lease, batch, runs,
				 ((ReturnSetInfo *) fcinfo->resultinfo)->setResult,
				 ((ReturnSetInfo *) fcinfo->resultinfo)->setDesc);
	SPI_finish();
	return (Datum) 0;
}

/*
 * durable_claim(queue text, worker text, lease interval = NULL, batch int = 1,
 *				 versions jsonb = NULL)
 *		RETURNS TABLE(task_id bigint, fence bigint, lease_until timestamptz,
 *					  attempt int, payload jsonb, checkpoint jsonb,
 *					  versions jsonb)
 *
 * Leases up to batch ready or waiting tasks whose run_at has come, highest
 * priority first, skipping rows locked by other claims; each gets fence + 1
 * and attempt + 1.  With versions (names to a version or a list of them),
 * only tasks pinned to versions the worker runs, and unpinned ones, which
 * it pins (the last version of a list); each row says what its task is
 * pinned to.  Expected contention is not an error: with nothing to claim,
 * no row.
 */
PG_FUNCTION_INFO_V1(durable_claim);
Datum
durable_claim(PG_FUNCTION_ARGS)
{
	return DurableClaimResult(fcinfo, DURABLE_CLAIM_READY);
}

/*
 * durable_heartbeat(task_id bigint, fence bigint, progress text = NULL,
 *					 lease interval = NULL) RETURNS timestamptz
 *
 * Extends the lease to now + lease (the task's current lease when NULL)
 * and records progress; progress_at moves only when progress changes, so
 * a lease renewed without progress can be told from real work.  Returns
 * the new lease end.  Raises 55U01 for a stale fence.
 */
PG_FUNCTION_INFO_V1(durable_heartbeat);
Datum
durable_heartbeat(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	Interval   *lease = NULL;
	text	   *progress = NULL;
	TimestampTz lease_until;

	if (!PG_ARGISNULL(3))
		lease = DurablePositiveIntervalArg(fcinfo, 3, "lease");
	if (!PG_ARGISNULL(2))
	{
		progress = PG_GETARG_TEXT_PP(2);
		if (VARSIZE_ANY_EXHDR(progress) > DURABLE_MAX_PROGRESS_LEN)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("progress must have at most %d bytes",
						   DURABLE_MAX_PROGRESS_LEN),
					errhint("Record a phase or a sequence number; store documents with durable_commit()."));
	}

	SPI_connect();
	lease_until = DurableHeartbeatTask(task_id, fence, progress, lease);
	SPI_finish();
	PG_RETURN_TIMESTAMPTZ(lease_until);
}

/* task_ids and fences: one-dimensional, the same length, no NULLs */
static int
check_id_fence_arrays(FunctionCallInfo fcinfo, const char *verb)
{
	ArrayType  *ids;
	ArrayType  *fences;
	int			n;

	DurableRequireArg(fcinfo, 0, "task_ids");
	DurableRequireArg(fcinfo, 1, "fences");
	ids = PG_GETARG_ARRAYTYPE_P(0);
	fences = PG_GETARG_ARRAYTYPE_P(1);
	n = ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids));
	if (ARR_NDIM(ids) > 1 || ARR_NDIM(fences) > 1 ||
		n != ArrayGetNItems(ARR_NDIM(fences), ARR_DIMS(fences)))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("task_ids and fences must be one-dimensional arrays of the same length"));
	if (array_contains_nulls(ids) || array_contains_nulls(fences))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("task ids and fences must not be null"));
	if (n > DURABLE_MAX_BATCH)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("at most %d tasks can be %s at once", DURABLE_MAX_BATCH, verb));
	return n;
}

/*
 * durable_heartbeat_batch(task_ids bigint[], fences bigint[],
 *						   lease interval = NULL)
 *		RETURNS TABLE(task_id bigint, lease_until timestamptz)
 *
 * Extends the lease of every task of the batch that is still running
 * under its fence, in one statement, and returns one row per task in the
 * order given: the new lease end, or NULL for a task the caller no longer
 * holds (taken over, cancelled, finished, or no such task), which is what
 * durable_heartbeat would refuse with 55U01.  One lost task does not keep
 * the others' leases from being renewed, so a worker's heartbeat timer
 * needs no error handling to learn which tasks it lost.  Progress is not
 * touched: record it with durable_heartbeat(task_id, fence, progress).
 * Raises 42501 (and renews nothing) when a renewed task's queue does not
 * let the caller's role work.
 */
PG_FUNCTION_INFO_V1(durable_heartbeat_batch);
Datum
durable_heartbeat_batch(PG_FUNCTION_ARGS)
{
	int			n = check_id_fence_arrays(fcinfo, "renewed");
	ReturnSetInfo *rsinfo;
	Interval   *lease = NULL;
	int64	   *ids;
	TimestampTz *until;
	bool	   *held;

	if (!PG_ARGISNULL(2))
		lease = DurablePositiveIntervalArg(fcinfo, 2, "lease");
	InitMaterializedSRF(fcinfo, 0);
	rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	if (n == 0)
		return (Datum) 0;

	/* what outlives SPI_finish is allocated before SPI_connect */
	ids = palloc(sizeof(int64) * n);
	until = palloc(sizeof(TimestampTz) * n);
	held = palloc(sizeof(bool) * n);

	SPI_connect();
	DurableHeartbeatBatch(PG_GETARG_ARRAYTYPE_P(0), PG_GETARG_ARRAYTYPE_P(1),
						  lease, n, ids, until, held);
	SPI_finish();

	for (int r = 0; r < n; r++)
	{
		Datum		values[2];
		bool		isnull[2] = {false, !held[r]};

		values[0] = Int64GetDatum(ids[r]);
		values[1] = TimestampTzGetDatum(until[r]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	return (Datum) 0;
}

/*
 * durable_begin(task_id bigint, fence bigint) RETURNS void
 *
 * Says that the worker begins the task it holds under fence: from now on a
 * lease that runs out spends the claim's attempt.  Until then (and until a
 * step or a heartbeat with new progress), a lease that runs
 * out gives the attempt back: a worker that crashes with a batch claimed
 * costs only the tasks it began (core/begin.c).  Raises 55U01 for a stale
 * fence.
 */
PG_FUNCTION_INFO_V1(durable_begin);
Datum
durable_begin(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);

	SPI_connect();
	DurableBeginTask(task_id, fence);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_result(task_id bigint)
 *		RETURNS TABLE(state text, result jsonb, error jsonb,
 *					  finished_at timestamptz, stop_code text)
 *
 * What a producer waits for: the task's state and, once it finished, its
 * result (completed) or its last error (failed), and when.  Needs the
 * enqueue or the work grant of the task's queue where it is restricted.
 */
PG_FUNCTION_INFO_V1(durable_result);
Datum
durable_result(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		task_id = DurableTaskIdArg(fcinfo, 0);

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	DurableTaskOutcome(task_id, rsinfo->setResult, rsinfo->setDesc);
	SPI_finish();
	return (Datum) 0;
}

/*
 * durable_release(task_id bigint, fence bigint, reason text = NULL)
 *		RETURNS void
 *
 * Gives a claimed task back at once, instead of letting its lease run
 * out: READY again with fence + 1 (so the releasing worker's later writes
 * are rejected), the attempt the claim counted given back (nothing ran
 * that could have failed), and an event of kind 'released' with the
 * reason.  Committed and planned steps stay as they are; the next claim
 * resumes the task.  Refused (55U04) while a step is started or unknown:
 * it may have taken effect, and only the recovery table, when the lease
 * runs out, or the step's own evidence may settle it.  Raises 55U01 for a
 * stale fence, 42704 for an unknown task.
 */
PG_FUNCTION_INFO_V1(durable_release);
Datum
durable_release(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	char	   *reason = NULL;

	if (!PG_ARGISNULL(2))
		reason = DurableTextArgCString(fcinfo, 2, "reason");

	SPI_connect();
	DurableReleaseTask(task_id, fence, reason);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_commit(task_id bigint, fence bigint, result jsonb = NULL,
 *				  step text = NULL, expected_version int = NULL,
 *				  spent numeric = NULL) RETURNS void
 *
 * With a step, commits that step by compare-and-swap on expected_version
 * (see step.c), charging what it spent (its reservation when NULL) to its
 * task's budgets.  Without, completes the running task and stores its
 * result, refusing (55U04) while one of its steps is started or unknown.
 * Raises 55U01 for a stale fence, 42704 for an unknown task, 22023 for
 * spent without a step.
 */
PG_FUNCTION_INFO_V1(durable_commit);
Datum
durable_commit(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	Jsonb	   *result = DurableJsonbArg(fcinfo, 2, "result");
	Numeric		spent = DurableNumericArg(fcinfo, 5);

	if (spent != NULL && PG_ARGISNULL(3))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("spent is what a step spent: it needs the step"));
	SPI_connect();
	if (!PG_ARGISNULL(3))
	{
		char	   *step = DurableNameArg(fcinfo, 3, "step name");

		DurableRequireArg(fcinfo, 4, "expected_version");
		DurableCommitStep(task_id, fence, step, PG_GETARG_INT32(4), result, spent);
	}
	else
		DurableCommitTask(task_id, fence, result);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_commit_and_claim(task_id bigint, fence bigint, result jsonb = NULL,
 *							worker text = NULL, lease interval = NULL,
 *							batch int = 1, versions jsonb = NULL)
 *		RETURNS TABLE(task_id bigint, fence bigint, lease_until timestamptz,
 *					  attempt int, payload jsonb, checkpoint jsonb,
 *					  versions jsonb)
 *
 * Completes a task and claims the next ones of its queue in the same
 * transaction, for the same worker unless another is named: one commit per
 * task instead of two.  Raises what durable_commit raises; when the commit
 * is refused nothing is claimed.
 */
PG_FUNCTION_INFO_V1(durable_commit_and_claim);
Datum
durable_commit_and_claim(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	Interval   *lease = NULL;
	int32		batch = DurableBatchArg(fcinfo, 5);
	char	   *worker = NULL;
	int64		fence = DurableFenceArg(fcinfo, 1);
	Jsonb	   *result = DurableJsonbArg(fcinfo, 2, "result");
	Jsonb	   *runs = NULL;

	if (!PG_ARGISNULL(3))
		worker = DurableNameArg(fcinfo, 3, "worker name");
	if (!PG_ARGISNULL(4))
		lease = DurablePositiveIntervalArg(fcinfo, 4, "lease");
	if (PG_NARGS() > 6 && !PG_ARGISNULL(6))
		runs = DurableJsonbArg(fcinfo, 6, "versions");
	InitMaterializedSRF(fcinfo, 0);

	SPI_connect();
	DurableCommitAndClaim(task_id, fence, result, worker, lease, batch, runs,
						  ((ReturnSetInfo *) fcinfo->resultinfo)->setResult,
						  ((ReturnSetInfo *) fcinfo->resultinfo)->setDesc);
	SPI_finish();
	return (Datum) 0;
}

/* every result of a batch, like a single commit's, within max_payload_size */
static void
check_batch_results(ArrayType *results)
{
	Datum	   *elems;
	bool	   *elnulls;
	int			nelems;

	deconstruct_array(results, JSONBOID, -1, false, TYPALIGN_INT,
					  &elems, &elnulls, &nelems);
	for (int i = 0; i < nelems; i++)
	{
		Size		size;

		if (elnulls[i])
			continue;
		size = VARSIZE_ANY(DatumGetPointer(elems[i]));
		if (size > (Size) durable_max_payload_size * 1024)
			DurableCheckPayloadSize(size, psprintf("result %d of the batch", i + 1));
	}
}

/*
 * durable_commit_batch(task_ids bigint[], fences bigint[],
 *						results jsonb[] = NULL) RETURNS int
 *
 * Completes many running tasks, each under its own fence, in one
 * statement; all or none: any task that cannot be committed raises what
 * durable_commit would raise for it, and nothing is committed.
 */
PG_FUNCTION_INFO_V1(durable_commit_batch);
Datum
durable_commit_batch(PG_FUNCTION_ARGS)
{
	ArrayType  *ids;
	ArrayType  *fences;
	ArrayType  *results = NULL;
	int			n;

	DurableRequireArg(fcinfo, 0, "task_ids");
	DurableRequireArg(fcinfo, 1, "fences");
	ids = PG_GETARG_ARRAYTYPE_P(0);
	fences = PG_GETARG_ARRAYTYPE_P(1);
	if (!PG_ARGISNULL(2))
		results = PG_GETARG_ARRAYTYPE_P(2);
	n = ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids));
	if (ARR_NDIM(ids) > 1 || ARR_NDIM(fences) > 1 ||
		n != ArrayGetNItems(ARR_NDIM(fences), ARR_DIMS(fences)) ||
		(results != NULL &&
		 (ARR_NDIM(results) > 1 ||
		  n != ArrayGetNItems(ARR_NDIM(results), ARR_DIMS(results)))))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("task_ids, fences and results must be one-dimensional arrays of the same length"));
	if (array_contains_nulls(ids) || array_contains_nulls(fences))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("task ids and fences must not be null"));
	if (n == 0)
		PG_RETURN_INT32(0);
	if (n > DURABLE_MAX_BATCH)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("at most %d tasks can be committed at once", DURABLE_MAX_BATCH));
	if (results != NULL)
		check_batch_results(results);

	SPI_connect();
	DurableCommitBatch(ids, fences, results, n);
	SPI_finish();
	PG_RETURN_INT32(n);
}

/*
 * durable_fail(task_id bigint, fence bigint, error_class text,
 *				error jsonb = NULL, retry_after interval = NULL,
 *				step text = NULL) RETURNS text
 *
 * With a step, the failed attempt is the step's (see step.c).  Without, it
 * applies and returns the decision of durable_next_action for the failed
 * attempt: schedule_retry parks the task WAITING until the later of its
 * retry delay and retry_after, and takes a retry token (deferring the
 * retry when there is none); fail_permanent, attempts_exhausted and
 * deadline_exceeded end it FAILED with that stop code; manual_review parks
 * it in NEEDS_REVIEW.  Locks the task row, then the queue row when the
 * queue limits retries.  Raises 55U01 for a stale fence, 55U04 while a
 * step is started or unknown.
 */
PG_FUNCTION_INFO_V1(durable_fail);
Datum
durable_fail(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	char	   *error_class;
	Jsonb	   *error;
	int64		retry_after = 0;
	const char *action_name;

	DurableRequireArg(fcinfo, 2, "error_class");
	error_class = text_to_cstring(PG_GETARG_TEXT_PP(2));
	(void) DurableParseErrorClass(error_class);
	error = DurableJsonbArg(fcinfo, 3, "error");
	if (!PG_ARGISNULL(4))
		retry_after = DurableDelayArg(fcinfo, 4, "retry_after");

	SPI_connect();
	if (!PG_ARGISNULL(5))
		action_name = DurableFailStep(task_id, fence,
									  DurableNameArg(fcinfo, 5, "step name"),
									  error_class, error, retry_after);
	else
		action_name = DurableFailTask(task_id, fence, error_class, error,
									  !PG_ARGISNULL(4), retry_after);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(action_name));
}

/*
 * durable_cancel(task_id bigint, reason text) RETURNS void
 *
 * Cancels an unfinished task; a running one loses its lease, so its fence
 * is incremented and its worker's next write is rejected.  Its unfinished
 * children are cancelled with it.  Raises 55U04 for a finished task or one
 * in review (which only durable_resolve leaves).
 */
PG_FUNCTION_INFO_V1(durable_cancel);
Datum
durable_cancel(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	char	   *reason;

	DurableRequireArg(fcinfo, 1, "reason");
	reason = DurableTextArgCString(fcinfo, 1, "reason");

	SPI_connect();
	DurableCheckOperatorTask(task_id);
	DurableCancelTask(task_id, reason);
	SPI_finish();
	PG_RETURN_VOID();
}
