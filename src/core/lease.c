/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  Claims, heartbeats, commits, failures and cancellations of tasks.
 *
 * A claim leases ready tasks with FOR UPDATE SKIP LOCKED and increments
 * each one's fence; every later write names that fence and is rejected
 * with 55U01 once the fence is not current or the task is no longer
 * running under it.  A fence that is still current is accepted even after
 * lease_until has passed, as long as nobody took the task over.  Lease
 * times come from the transaction start time (see durable.h).
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

/* progress is a phase or a sequence number, not a document */
#define DURABLE_MAX_PROGRESS_LEN 1024

/* round-robin start over a queue's partitions */
static uint32 next_claim_partition;

static void check_batch_access(uint64 rows);
static int64 *batch_children(uint64 rows, uint64 *count);

/*
 * DurableClaimInto
 *		Lease up to batch tasks of a queue into store, partition by
 *		partition from a rotating start, with STMT_CLAIM (ready work) or
 *		STMT_RECONCILE_CLAIM (steps awaiting a look-up); both take
 *		(partition, queue, now, limit, worker, lease, lease_until, role).
 *		Nothing from a paused queue; 42501 for a role the queue does not
 *		let work.  A partition with too little ready work first
 *		has its expired leases settled, so that they are never handed out
 *		without going through the recovery table.  In a queue with a
 *		concurrency limit, STMT_CLAIM_LIMITED stands in for STMT_CLAIM.
 *		Returns how many.
 */
int
DurableClaimInto(DurableStmt stmt, const char *queue, const char *worker,
				 Interval *lease, int batch, Tuplestorestate *store)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableQueue settings;
	Datum		args[10];
	int			claimed = 0;
	bool		ready_work = stmt == STMT_CLAIM;

	DurableQueueGet(queue, &settings);
	DurableCheckRestrictedQueue(queue, settings.restricted, DURABLE_PRIV_WORK);
	if (settings.paused)
		return 0;

	/* in a queue with a concurrency limit, each key's running tasks count */
	if (ready_work && settings.concurrency_limit > 0)
	{
		DurableRequireSingleServer("a claim in a queue with a concurrency limit");
		stmt = STMT_CLAIM_LIMITED;
		args[8] = PointerGetDatum(DurableQueuePartitionArray(&settings));
		args[9] = Int32GetDatum(settings.concurrency_limit);
	}

	args[1] = CStringGetTextDatum(queue);
	args[2] = TimestampTzGetDatum(now);
	args[4] = CStringGetTextDatum(worker);
	args[5] = IntervalPGetDatum(lease ? lease : &settings.lease);
	args[6] = TimestampTzGetDatum(DurableTimePlus(now, lease ? lease : &settings.lease));
	args[7] = CStringGetTextDatum(DurableCallerName());

	for (int i = 0; i < settings.partitions && claimed < batch; i++)
	{
		int32		partition = DurableQueuePartition(&settings,
													  (int) (next_claim_partition++ % (uint32) settings.partitions));
		int			wanted = batch - claimed;
		uint64		n;

		bool		expired = true;

		args[0] = Int32GetDatum(partition);
		args[3] = Int32GetDatum(wanted);

		/*
		 * On Citus a statement that locks rows makes its node a participant
		 * of the transaction even where it takes none, and two participants
		 * commit in two phases: a partition is first read, and locked only
		 * when it has work.
		 */
		if (ready_work && DurableDistributed())
		{
			bool		isnull;

			DurableExecuteStmt(STMT_CLAIM_PROBE, args, NULL, SPI_OK_SELECT, 0);
			expired = DatumGetBool(DurableResultDatum(0, 2, &isnull));
			if (!DatumGetBool(DurableResultDatum(0, 1, &isnull)))
			{
				if (expired)
					DurableReconcilePartition(partition, now, wanted, NULL, NULL);
				continue;
			}
		}
		n = DurableExecuteStmt(stmt, args, NULL, SPI_OK_SELECT, 0);
		for (uint64 row = 0; row < n; row++)
			tuplestore_puttuple(store, SPI_tuptable->vals[row]);
		claimed += (int) n;

		if (ready_work && (int) n < wanted && expired)
			DurableReconcilePartition(partition, now, wanted, NULL, NULL);
	}
	return claimed;
}

/*
 * durable_claim(queue text, worker text, lease interval = NULL, batch int = 1)
 *		RETURNS TABLE(task_id bigint, fence bigint, lease_until timestamptz,
 *					  attempt int, payload jsonb, checkpoint jsonb)
 *
 * Leases up to batch ready or waiting tasks whose run_at has come, highest
 * priority first, skipping rows locked by other claims; each gets fence + 1
 * and attempt + 1.  Expected contention is not an error: with nothing to
 * claim, no row.
 */
PG_FUNCTION_INFO_V1(durable_claim);
Datum
durable_claim(PG_FUNCTION_ARGS)
{
	return DurableClaimFunction(fcinfo, STMT_CLAIM);
}

/*
 * DurableClaimFunction
 *		The body of the SQL claim functions, whose arguments are (queue text,
 *		worker text, lease interval, batch int).
 */
Datum
DurableClaimFunction(FunctionCallInfo fcinfo, DurableStmt stmt)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	char	   *worker = DurableNameArg(fcinfo, 1, "worker name");
	Interval   *lease = NULL;
	int32		batch = DurableBatchArg(fcinfo, 3);

	if (!PG_ARGISNULL(2))
		lease = DurablePositiveIntervalArg(fcinfo, 2, "lease");
	InitMaterializedSRF(fcinfo, 0);

	SPI_connect();
	DurableClaimInto(stmt, queue, worker, lease, batch,
					 ((ReturnSetInfo *) fcinfo->resultinfo)->setResult);
	SPI_finish();
	return (Datum) 0;
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
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;
	TimestampTz lease_until = 0;

	args[0] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[1] = Int64GetDatum(task_id);
	args[2] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	if (PG_ARGISNULL(3))
		nulls[3] = 'n';
	else
		args[3] = PointerGetDatum(DurablePositiveIntervalArg(fcinfo, 3, "lease"));
	if (PG_ARGISNULL(2))
		nulls[4] = 'n';
	else
	{
		args[4] = PG_GETARG_DATUM(2);
		if (VARSIZE_ANY_EXHDR(DatumGetTextPP(args[4])) > DURABLE_MAX_PROGRESS_LEN)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("progress must have at most %d bytes",
						   DURABLE_MAX_PROGRESS_LEN),
					errhint("Record a phase or a sequence number; store documents with durable_commit()."));
	}
	args[5] = Int64GetDatum(fence);

	SPI_connect();
	if (DurableExecuteStmt(STMT_HEARTBEAT, args, nulls, SPI_OK_SELECT, 0) == 0)
		DurableReportRefusal(task_id, fence);
	lease_until = DatumGetTimestampTz(DurableResultDatum(0, 1, &isnull));
	DurableCheckRestrictedQueue(DurableResultText(0, 2),
								DatumGetBool(DurableResultDatum(0, 3, &isnull)),
								DURABLE_PRIV_WORK);
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
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	uint64		rows;
	int64	   *ids;
	TimestampTz *until;
	bool	   *held;

	if (PG_ARGISNULL(2))
		nulls[3] = 'n';
	else
		args[3] = PointerGetDatum(DurablePositiveIntervalArg(fcinfo, 2, "lease"));
	InitMaterializedSRF(fcinfo, 0);
	rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	if (n == 0)
		return (Datum) 0;

	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_GETARG_DATUM(1);
	args[2] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());

	/* what outlives SPI_finish is allocated before SPI_connect */
	ids = palloc(sizeof(int64) * n);
	until = palloc(sizeof(TimestampTz) * n);
	held = palloc(sizeof(bool) * n);

	SPI_connect();
	rows = DurableExecuteStmt(STMT_HEARTBEAT_BATCH, args, nulls, SPI_OK_SELECT, 0);
	if (rows != (uint64) n)
		elog(ERROR, "batch heartbeat returned %llu rows for %d tasks",
			 (unsigned long long) rows, n);
	for (uint64 r = 0; r < rows; r++)
	{
		bool		isnull;
		Datum		d = DurableResultDatum(r, 4, &isnull);

		ids[r] = DurableResultInt64(r, 1);
		held[r] = !isnull;
		until[r] = isnull ? 0 : DatumGetTimestampTz(d);
	}
	/* columns 2 and 3 are each renewed task's queue and restriction */
	check_batch_access(rows);
	SPI_finish();

	for (uint64 r = 0; r < rows; r++)
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
	DurableTask task;
	DurableStep step;
	DurableMove move = {0};
	DurableDetail detail;

	if (!PG_ARGISNULL(2))
		reason = DurableTextArgCString(fcinfo, 2, "reason");

	SPI_connect();
	DurableTaskHeld(task_id, fence, &task);
	if (DurableStepInDoubt(&task, &step))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("task %lld cannot be released while step \"%s\" is %s",
					   (long long) task_id, step.name, step.state),
				errdetail("A step that was started and not committed may have taken effect."),
				errhint("Leave the task: when its lease runs out the recovery table judges step \"%s\". Or settle the step first (commit it, record a receipt, or durable_fail(..., step => '%s')).",
						step.name, step.name));

	DurableDetailInit(&detail);
	if (reason)
		DurableDetailText(&detail, "reason", reason);
	DurableDetailInt(&detail, "attempt_given_back", task.attempt);
	move.from_state = "running";
	move.fence = fence;
	move.to_state = "ready";
	move.revoke = true;
	move.give_back_attempt = true;
	move.kind = "released";
	move.detail = DurableDetailFinish(&detail);
	DurableMoveTaskFenced(task_id, &move, GetCurrentTransactionStartTimestamp());
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_commit(task_id bigint, fence bigint, result jsonb = NULL,
 *				  step text = NULL, expected_version int = NULL) RETURNS void
 *
 * With a step, commits that step by compare-and-swap on expected_version
 * (see step.c).  Without, completes the running task and stores its
 * result, refusing (55U04) while one of its steps is started or unknown.
 * Raises 55U01 for a stale fence, 42704 for an unknown task.
 */
PG_FUNCTION_INFO_V1(durable_commit);
Datum
durable_commit(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	DurableMove move = {0};

	move.fence = DurableFenceArg(fcinfo, 1);
	move.result = DurableJsonbArg(fcinfo, 2, "result");

	SPI_connect();
	if (!PG_ARGISNULL(3))
	{
		char	   *step = DurableNameArg(fcinfo, 3, "step name");

		DurableRequireArg(fcinfo, 4, "expected_version");
		DurableCommitStep(task_id, move.fence, step, PG_GETARG_INT32(4),
						  move.result);
	}
	else
	{
		move.from_state = "running";
		move.to_state = "completed";
		move.kind = "completed";
		DurableMoveTaskFenced(task_id, &move, GetCurrentTransactionStartTimestamp());
	}
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_commit_and_claim(task_id bigint, fence bigint, result jsonb = NULL,
 *							worker text = NULL, lease interval = NULL,
 *							batch int = 1)
 *		RETURNS TABLE(task_id bigint, fence bigint, lease_until timestamptz,
 *					  attempt int, payload jsonb, checkpoint jsonb)
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
	char	   *queue;
	DurableTask task;
	DurableMove move = {0};
	DurableMoved moved;

	move.fence = DurableFenceArg(fcinfo, 1);
	move.result = DurableJsonbArg(fcinfo, 2, "result");
	if (!PG_ARGISNULL(3))
		worker = DurableNameArg(fcinfo, 3, "worker name");
	if (!PG_ARGISNULL(4))
		lease = DurablePositiveIntervalArg(fcinfo, 4, "lease");
	move.from_state = "running";
	move.to_state = "completed";
	move.kind = "completed";
	InitMaterializedSRF(fcinfo, 0);

	SPI_connect();
	task.task_id = task_id;
	if (!DurableMoveTask(&task, &move, GetCurrentTransactionStartTimestamp(),
						 &moved))
		DurableReportRefusal(task_id, move.fence);
	queue = (char *) moved.queue;
	if (worker == NULL)
		worker = (char *) moved.owner;
	DurableClaimInto(STMT_CLAIM, queue, worker, lease, batch,
					 ((ReturnSetInfo *) fcinfo->resultinfo)->setResult);
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
 * check_batch_access
 *		42501 unless the caller may work on the queue of every task of a
 *		batch just committed (the rows of STMT_COMMIT_BATCH: task id, queue,
 *		restricted); the error rolls the batch back.
 */
static void
check_batch_access(uint64 rows)
{
	char	  **queues = palloc(sizeof(char *) * Max(rows, 1));
	uint64		n = 0;

	/* the check runs statements of its own: collect the queues first */
	for (uint64 r = 0; r < rows; r++)
	{
		bool		isnull;
		char	   *queue;
		bool		seen = false;

		if (!DatumGetBool(DurableResultDatum(r, 3, &isnull)))
			continue;
		queue = DurableResultText(r, 2);
		for (uint64 i = 0; i < n && !seen; i++)
			seen = strcmp(queues[i], queue) == 0;
		if (!seen)
			queues[n++] = queue;
	}
	for (uint64 i = 0; i < n; i++)
		DurableCheckQueueAccess(queues[i], DURABLE_PRIV_WORK);
	pfree(queues);
}

/*
 * batch_children
 *		The children among a batch just committed (the rows of
 *		STMT_COMMIT_BATCH: task id, queue, restricted, parent id), as pairs
 *		of task id and parent id, whose parents may wake.
 */
static int64 *
batch_children(uint64 rows, uint64 *count)
{
	int64	   *pairs = palloc(sizeof(int64) * 2 * Max(rows, 1));
	uint64		n = 0;

	for (uint64 r = 0; r < rows; r++)
	{
		bool		isnull;
		Datum		parent = DurableResultDatum(r, 4, &isnull);

		if (isnull)
			continue;
		pairs[2 * n] = DurableResultInt64(r, 1);
		pairs[2 * n + 1] = DatumGetInt64(parent);
		n++;
	}
	*count = n;
	return pairs;
}

static int
compare_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/*
 * commit_each
 *		durable_commit_batch on Citus: each task as durable_commit commits
 *		it, so that each runs on its own shard (one statement on many would
 *		run on every shard); a refusal rolls back the whole batch as there.
 */
static void
commit_each(ArrayType *ids, ArrayType *fences, ArrayType *results)
{
	Datum	   *id_values;
	Datum	   *fence_values;
	Datum	   *result_values = NULL;
	bool	   *result_nulls = NULL;
	int64	   *sorted;
	int			n;
	TimestampTz now = GetCurrentTransactionStartTimestamp();

	deconstruct_array(ids, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
					  &id_values, NULL, &n);
	deconstruct_array(fences, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
					  &fence_values, NULL, &n);
	if (results != NULL)
		deconstruct_array(results, JSONBOID, -1, false, TYPALIGN_INT,
						  &result_values, &result_nulls, &n);
	sorted = palloc(sizeof(int64) * n);
	for (int i = 0; i < n; i++)
		sorted[i] = DatumGetInt64(id_values[i]);
	qsort(sorted, n, sizeof(int64), compare_int64);
	for (int i = 1; i < n; i++)
		if (sorted[i] == sorted[i - 1])
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("a task appears more than once in task_ids"));

	for (int i = 0; i < n; i++)
	{
		DurableMove move = {0};

		move.fence = DatumGetInt64(fence_values[i]);
		move.result = result_values && !result_nulls[i] ?
			DatumGetJsonbP(result_values[i]) : NULL;
		move.from_state = "running";
		move.to_state = "completed";
		move.kind = "completed";
		DurableMoveTaskFenced(DatumGetInt64(id_values[i]), &move, now);
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
	int			n;
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	uint64		done;

	DurableRequireArg(fcinfo, 0, "task_ids");
	DurableRequireArg(fcinfo, 1, "fences");
	ids = PG_GETARG_ARRAYTYPE_P(0);
	fences = PG_GETARG_ARRAYTYPE_P(1);
	n = ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids));
	if (ARR_NDIM(ids) > 1 || ARR_NDIM(fences) > 1 ||
		n != ArrayGetNItems(ARR_NDIM(fences), ARR_DIMS(fences)) ||
		(!PG_ARGISNULL(2) &&
		 n != ArrayGetNItems(ARR_NDIM(PG_GETARG_ARRAYTYPE_P(2)),
							 ARR_DIMS(PG_GETARG_ARRAYTYPE_P(2)))))
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
	if (!PG_ARGISNULL(2))
		check_batch_results(PG_GETARG_ARRAYTYPE_P(2));

	args[0] = PointerGetDatum(ids);
	args[1] = PointerGetDatum(fences);
	args[2] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[2] = PG_ARGISNULL(2) ? 'n' : ' ';
	args[3] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args[4] = CStringGetTextDatum(DurableCallerName());

	SPI_connect();
	if (DurableDistributed())
	{
		commit_each(ids, fences, PG_ARGISNULL(2) ? NULL : PG_GETARG_ARRAYTYPE_P(2));
		SPI_finish();
		PG_RETURN_INT32(n);
	}
	done = DurableExecuteStmt(STMT_COMMIT_BATCH, args, nulls, SPI_OK_SELECT, 0);
	if (done != (uint64) n)
	{
		Datum	   *id_values;
		Datum	   *fence_values;
		int			nvalues;
		bool	   *committed = palloc0(sizeof(bool) * n);
		uint64		returned = done;
		int64	   *returned_ids = palloc(sizeof(int64) * Max(returned, 1));

		/* name the first task that could not be committed */
		deconstruct_array(ids, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
						  &id_values, NULL, &nvalues);
		deconstruct_array(fences, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
						  &fence_values, NULL, &nvalues);
		for (uint64 r = 0; r < returned; r++)
			returned_ids[r] = DurableResultInt64(r, 1);
		for (int i = 0; i < n; i++)
			for (uint64 r = 0; r < returned; r++)
				if (returned_ids[r] == DatumGetInt64(id_values[i]))
					committed[i] = true;
		for (int i = 0; i < n; i++)
			if (!committed[i])
				DurableReportRefusal(DatumGetInt64(id_values[i]),
								   DatumGetInt64(fence_values[i]));
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("a task appears more than once in task_ids"));
	}
	{
		/* read which tasks have parents before the checks run statements */
		uint64		nchildren;
		int64	   *children = batch_children(done, &nchildren);

		check_batch_access(done);
		for (uint64 i = 0; i < nchildren; i++)
			DurableWakeParent(children[2 * i + 1], children[2 * i],
							  GetCurrentTransactionStartTimestamp());
	}
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
	DurableErrorClass error_class;
	int64		retry_after = 0;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	DurableMove move = {0};
	DurableDetail detail;
	DurableNextAction action;
	int64		wait;
	const char *action_name;

	DurableRequireArg(fcinfo, 2, "error_class");
	error_class = DurableParseErrorClass(text_to_cstring(PG_GETARG_TEXT_PP(2)));
	move.error = DurableJsonbArg(fcinfo, 3, "error");
	if (!PG_ARGISNULL(4))
	{
		retry_after = DurableIntervalMicroseconds(PG_GETARG_INTERVAL_P(4),
												  "retry_after");
		if (retry_after < 0)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("retry_after must not be negative"));
	}

	SPI_connect();
	if (!PG_ARGISNULL(5))
	{
		action_name = DurableFailStep(task_id, fence,
									  DurableNameArg(fcinfo, 5, "step name"),
									  text_to_cstring(PG_GETARG_TEXT_PP(2)),
									  move.error, retry_after);
		SPI_finish();
		PG_RETURN_TEXT_P(cstring_to_text(action_name));
	}

	DurableTaskHeld(task_id, fence, &task);
	if (task.steps_in_doubt > 0)
		DurableReportRefusal(task_id, fence);

	wait = DurableRetryWait(&task, retry_after);
	action = DurableDecideNext(task.attempt, task.max_attempts,
							   Max(now - task.created_at, 0), task.deadline,
							   error_class, wait);
	action_name = DurableNextActionName(action);

	DurableDetailInit(&detail);
	DurableDetailText(&detail, "action", action_name);
	DurableDetailText(&detail, "error_class", text_to_cstring(PG_GETARG_TEXT_PP(2)));
	DurableDetailInt(&detail, "attempt", task.attempt);
	DurableDetailInt(&detail, "max_attempts", task.max_attempts);
	DurableDetailInt(&detail, "elapsed_ms", Max(now - task.created_at, 0) / 1000);
	if (!PG_ARGISNULL(4))
		DurableDetailInt(&detail, "retry_after_ms", retry_after / 1000);

	move.from_state = "running";
	move.fence = fence;
	DurableNextActionMove(&task, action, now, wait, &detail, &move);
	move.detail = DurableDetailFinish(&detail);
	DurableMoveTaskFenced(task_id, &move, now);
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
	DurableTask task;
	char	   *reason;

	DurableRequireArg(fcinfo, 1, "reason");
	reason = DurableTextArgCString(fcinfo, 1, "reason");

	SPI_connect();
	DurableTaskFetchOrError(task_id, true, &task);
	if (DurableTaskIsTerminal(task.state) ||
		strcmp(task.state, "needs_review") == 0)
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("cannot cancel task %lld in state %s",
					   (long long) task_id, task.state),
				strcmp(task.state, "needs_review") == 0 ?
				errhint("A task in review is settled with durable_resolve().") : 0);

	DurableCancelLockedTask(&task, reason, 0, GetCurrentTransactionStartTimestamp());
	SPI_finish();
	PG_RETURN_VOID();
}
