/*-------------------------------------------------------------------------
 *
 * queue.c
 *	  Queues: their settings, their partitions, pause and resume.
 *
 * A queue spreads over "partitions" consecutive partition keys starting at
 * a base taken from a hash of its name.  The count is fixed when the queue
 * is created: the partition of an idempotency key depends on it.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "utils/guc.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "access/xact.h"

/* columns of STMT_QUEUE_GET */
enum
{
	QUEUE_PARTITION_BASE = 1,
	QUEUE_PARTITIONS,
	QUEUE_LEASE,
	QUEUE_MAX_ATTEMPTS,
	QUEUE_DEADLINE,
	QUEUE_NOTIFY,
	QUEUE_PAUSED,
	QUEUE_RESTRICTED,
	QUEUE_CONCURRENCY_LIMIT
};

static void
report_no_queue(const char *queue)
{
	ereport(ERROR,
			errcode(ERRCODE_UNDEFINED_OBJECT),
			errmsg("queue \"%s\" does not exist", queue),
			errhint("Create it with durable_create_queue()."));
}

/* read a queue's settings with one of the STMT_QUEUE_GET statements */
static void
queue_get(DurableStmt stmt, const char *queue, DurableQueue *result)
{
	Datum		arg = CStringGetTextDatum(queue);
	bool		isnull;
	Datum		d;

	if (DurableExecuteStmt(stmt, &arg, NULL, SPI_OK_SELECT, 1) == 0)
		report_no_queue(queue);

	result->partition_base = (int32) DurableResultInt64(0, QUEUE_PARTITION_BASE);
	result->partitions = (int32) DurableResultInt64(0, QUEUE_PARTITIONS);
	result->lease = *DatumGetIntervalP(DurableResultDatum(0, QUEUE_LEASE, &isnull));
	result->max_attempts = (int32) DurableResultInt64(0, QUEUE_MAX_ATTEMPTS);
	d = DurableResultDatum(0, QUEUE_DEADLINE, &isnull);
	result->has_deadline = !isnull;
	if (!isnull)
		result->deadline = *DatumGetIntervalP(d);
	result->notify = DatumGetBool(DurableResultDatum(0, QUEUE_NOTIFY, &isnull));
	result->paused = DatumGetBool(DurableResultDatum(0, QUEUE_PAUSED, &isnull));
	result->restricted = DatumGetBool(DurableResultDatum(0, QUEUE_RESTRICTED, &isnull));
	d = DurableResultDatum(0, QUEUE_CONCURRENCY_LIMIT, &isnull);
	result->concurrency_limit = isnull ? 0 : DatumGetInt32(d);
}

/*
 * DurableQueueGet
 *		Read a queue's settings; 42704 when there is no such queue.  Takes
 *		no lock: for calls that move tasks already in the queue.
 */
void
DurableQueueGet(const char *queue, DurableQueue *result)
{
	queue_get(STMT_QUEUE_GET, queue, result);
}

/*
 * DurableQueueGetShared
 *		The same, locking the queue's row FOR KEY SHARE until the end of the
 *		transaction: for calls that add a task to the queue, or make a
 *		finished one unfinished again.  durable_drop_queue locks the row FOR
 *		UPDATE, so such a call and a drop of its queue never overlap: the
 *		drop waits for the call's transaction, or the call waits for the
 *		drop and then finds no queue (42704).  KEY SHARE does not conflict
 *		with itself nor with the retry bucket's FOR NO KEY UPDATE, so
 *		enqueues do not wait for each other or for failures.  (Claims take
 *		no lock: many lockers of one row would share it through a
 *		multixact on every claim.)
 */
void
DurableQueueGetShared(const char *queue, DurableQueue *result)
{
	/*
	 * On Citus a lock on a row of a reference table is taken on every node,
	 * and makes each call a distributed transaction.  There the foreign key
	 * from durable.live_tasks to durable.queues (durable_enable_citus) takes
	 * the same lock where it matters: on the node of the task's shard, whose
	 * copy of the queue's row a drop also locks.
	 */
	queue_get(DurableDistributed() ? STMT_QUEUE_GET : STMT_QUEUE_GET_SHARE,
			  queue, result);
}

/* the partition key of a queue's index-th partition */
int32
DurableQueuePartition(const DurableQueue *queue, int index)
{
	return (queue->partition_base + index % queue->partitions) %
		DURABLE_PARTITION_SPACE;
}

/* first partition of a queue: a stable hash of its name */
static int32
queue_partition_base(const char *queue)
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];

	DurableSha256(queue, strlen(queue), digest);
	return (int32) ((((uint32) digest[0] << 8) | digest[1]) %
					DURABLE_PARTITION_SPACE);
}

/* all partition keys of a queue, as an int[] */
ArrayType *
DurableQueuePartitionArray(const DurableQueue *queue)
{
	Datum	   *keys = palloc(sizeof(Datum) * queue->partitions);

	for (int i = 0; i < queue->partitions; i++)
		keys[i] = Int32GetDatum(DurableQueuePartition(queue, i));
	return construct_array(keys, queue->partitions, INT4OID,
						   sizeof(int32), true, TYPALIGN_INT);
}

/*
 * A retry refill rate, in tokens a second, from DURABLE_MIN_REFILL_RATE (one
 * token in about eleven and a half days) to DURABLE_MAX_REFILL_RATE.  Below
 * the floor the time of the next token is so far off that it leaves the
 * timestamp range (or the conversion to microseconds overflows); above the
 * ceiling the bucket limits nothing.  budget.c still checks every time it
 * computes, since a deep deficit of tokens can reach far at any rate.
 */
#define DURABLE_MIN_REFILL_RATE 0.000001
#define DURABLE_MAX_REFILL_RATE 1000000

static double
refill_rate_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	double		rate;

	DurableRequireArg(fcinfo, argno, name);
	rate = PG_GETARG_FLOAT8(argno);
	if (!(rate >= DURABLE_MIN_REFILL_RATE && rate <= DURABLE_MAX_REFILL_RATE))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must be between %s and %s tokens per second", name,
					   CppAsString2(DURABLE_MIN_REFILL_RATE),
					   CppAsString2(DURABLE_MAX_REFILL_RATE)),
				errdetail("The value given was %g.", rate));
	return rate;
}

/*
 * durable_create_queue(queue text, lease interval = '30 seconds',
 *		max_attempts int = 3, retry_base int = 2, retry_cap int = 60,
 *		deadline interval = NULL, retry_capacity int = NULL,
 *		retry_refill_rate float8 = 10, progress_timeout interval = NULL,
 *		partitions int = 1, notify bool = false,
 *		concurrency_limit int = NULL) RETURNS void
 *
 * Raises 42710 when the queue exists, 22023/22004 for bad settings.
 */
PG_FUNCTION_INFO_V1(durable_create_queue);
Datum
durable_create_queue(PG_FUNCTION_ARGS)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	Datum		args[14];
	char		nulls[14];

	memset(nulls, ' ', sizeof(nulls));
	args[0] = CStringGetTextDatum(queue);
	args[1] = Int32GetDatum(queue_partition_base(queue));
	args[2] = Int32GetDatum(DurableIntArgAtLeast(fcinfo, 9, "partitions", 1));
	if (DatumGetInt32(args[2]) > DURABLE_MAX_PARTITIONS)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("partitions must be at most %d", DURABLE_MAX_PARTITIONS));
	args[3] = PointerGetDatum(DurablePositiveIntervalArg(fcinfo, 1, "lease"));
	args[4] = Int32GetDatum(DurableIntArgAtLeast(fcinfo, 2, "max_attempts", 1));
	args[5] = Int32GetDatum(DurableIntArgAtLeast(fcinfo, 3, "retry_base", 1));
	args[6] = Int32GetDatum(DurableIntArgAtLeast(fcinfo, 4, "retry_cap", 1));
	if (PG_ARGISNULL(5))
		nulls[7] = 'n';
	else
		args[7] = PointerGetDatum(DurablePositiveIntervalArg(fcinfo, 5, "deadline"));
	if (PG_ARGISNULL(6))
		nulls[8] = 'n';
	else
		args[8] = Int32GetDatum(DurableIntArgAtLeast(fcinfo, 6, "retry_capacity", 1));
	args[9] = Float8GetDatum(refill_rate_arg(fcinfo, 7, "retry_refill_rate"));
	args[10] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	if (PG_ARGISNULL(8))
		nulls[11] = 'n';
	else
		args[11] = PointerGetDatum(DurablePositiveIntervalArg(fcinfo, 8, "progress_timeout"));
	DurableRequireArg(fcinfo, 10, "notify");
	args[12] = BoolGetDatum(PG_GETARG_BOOL(10));
	if (PG_NARGS() <= 11 || PG_ARGISNULL(11))
		nulls[13] = 'n';
	else
		args[13] = Int32GetDatum(DurableIntArgAtLeast(fcinfo, 11, "concurrency_limit", 1));

	SPI_connect();
	if (DurableExecuteStmt(STMT_QUEUE_INSERT, args, nulls, SPI_OK_INSERT, 0) == 0)
		ereport(ERROR,
				errcode(ERRCODE_DUPLICATE_OBJECT),
				errmsg("queue \"%s\" already exists", queue),
				errhint("Change its settings with durable_alter_queue()."));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_alter_queue(queue text, lease interval = NULL, ...,
 *		clear text[] = NULL, concurrency_limit int = NULL) RETURNS void
 *
 * NULL keeps a setting; clear names the optional settings to remove
 * ('deadline', 'retry_capacity', 'progress_timeout', 'concurrency_limit').
 * The partition count cannot change.
 */
PG_FUNCTION_INFO_V1(durable_alter_queue);
Datum
durable_alter_queue(PG_FUNCTION_ARGS)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	static const char *const names[] = {
		NULL, "lease", "max_attempts", "retry_base", "retry_cap", "deadline",
		"retry_capacity", "retry_refill_rate", "progress_timeout", "notify"
	};
	static const char *const clearable[] = {"deadline", "retry_capacity",
	"progress_timeout", "concurrency_limit"};
	Datum		args[15];
	char		nulls[15];
	bool		clear[4] = {false, false, false, false};

	memset(nulls, ' ', sizeof(nulls));
	args[0] = CStringGetTextDatum(queue);
	for (int i = 1; i <= 9; i++)
	{
		if (PG_ARGISNULL(i))
		{
			nulls[i] = 'n';
			continue;
		}
		switch (i)
		{
			case 1:
			case 5:
			case 8:
				args[i] = PointerGetDatum(DurablePositiveIntervalArg(fcinfo, i, names[i]));
				break;
			case 7:
				args[i] = Float8GetDatum(refill_rate_arg(fcinfo, i, names[i]));
				break;
			case 9:
				args[i] = PG_GETARG_DATUM(i);
				break;
			default:
				args[i] = Int32GetDatum(DurableIntArgAtLeast(fcinfo, i, names[i], 1));
				break;
		}
	}
	if (!PG_ARGISNULL(10))
	{
		Datum	   *elems;
		bool	   *elnulls;
		int			nelems;

		deconstruct_array(PG_GETARG_ARRAYTYPE_P(10), TEXTOID, -1, false,
						  TYPALIGN_INT, &elems, &elnulls, &nelems);
		for (int i = 0; i < nelems; i++)
		{
			char	   *name = elnulls[i] ? "NULL" : TextDatumGetCString(elems[i]);
			int			j;

			for (j = 0; j < (int) lengthof(clearable); j++)
				if (strcmp(name, clearable[j]) == 0)
					break;
			if (j == (int) lengthof(clearable))
				ereport(ERROR,
						errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("queue setting \"%s\" cannot be cleared", name),
						errhint("Only \"deadline\", \"retry_capacity\", \"progress_timeout\" and \"concurrency_limit\" can be cleared."));
			clear[j] = true;
		}
	}
	args[10] = BoolGetDatum(clear[0]);
	args[11] = BoolGetDatum(clear[1]);
	args[12] = BoolGetDatum(clear[2]);
	if (PG_NARGS() <= 11 || PG_ARGISNULL(11))
		nulls[13] = 'n';
	else
		args[13] = Int32GetDatum(DurableIntArgAtLeast(fcinfo, 11, "concurrency_limit", 1));
	args[14] = BoolGetDatum(clear[3]);

	SPI_connect();
	if (DurableExecuteStmt(STMT_QUEUE_ALTER, args, nulls, SPI_OK_UPDATE, 0) == 0)
		report_no_queue(queue);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * The schedules in the last statement's result (column 1), one a line, as
 * PostgreSQL's DROP lists dependent objects: the first hundred, then how
 * many more.
 */
#define MAX_REPORTED_SCHEDULES 100

static char *
schedule_list_text(const char *queue, uint64 n)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (uint64 r = 0; r < n && r < MAX_REPORTED_SCHEDULES; r++)
		appendStringInfo(&buf, "%sschedule \"%s\" targets queue \"%s\"",
						 r > 0 ? "\n" : "", DurableResultText(r, 1), queue);
	if (n > MAX_REPORTED_SCHEDULES)
		appendStringInfo(&buf, "\nand %llu other schedules",
						 (unsigned long long) (n - MAX_REPORTED_SCHEDULES));
	return buf.data;
}

/*
 * The parts of the tick that are the queue's (tick.c): its retry tokens
 * and its schedules, named from the n rows of STMT_QUEUE_SCHEDULES, as a
 * text[] datum.
 */
static Datum
queue_tick_parts(const char *queue, uint64 n)
{
	Datum	   *names = palloc(sizeof(Datum) * (n + 1));

	names[0] = CStringGetTextDatum(psprintf("retry tokens: %s", queue));
	for (uint64 r = 0; r < n; r++)
		names[r + 1] = CStringGetTextDatum(psprintf("schedule: %s",
													DurableResultText(r, 1)));
	return PointerGetDatum(construct_array(names, (int) n + 1, TEXTOID, -1,
										   false, TYPALIGN_INT));
}

/*
 * durable_drop_queue(queue text, cascade boolean = false) RETURNS void
 *
 * Locks the queue's row FOR UPDATE, which waits for the enqueues and
 * replays under way in the queue and keeps new ones out (they lock the row
 * FOR KEY SHARE), and nothing else: other queues go on, and of two drops of
 * one queue the second waits and then finds no queue.  Then the queue goes
 * with its finished tasks, their steps and events, and the events emitted
 * into it (durable_emit) with the awaits of them.  Raises 55006 while any
 * of its tasks is unfinished.
 *
 * A schedule left behind would fire into any later queue of the same name,
 * perhaps one restricted to other roles: while schedules target the queue
 * the drop is refused (2BP01, naming them), unless cascade is true, which
 * removes them in the same transaction.  durable_schedule locks the queue's
 * row FOR KEY SHARE too, so no schedule comes to target the queue while the
 * drop holds it.  The 0.4.0 definition has no cascade (PG_NARGS() 1).
 */
PG_FUNCTION_INFO_V1(durable_drop_queue);
Datum
durable_drop_queue(PG_FUNCTION_ARGS)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	bool		cascade = false;
	DurableQueue settings;
	Datum		args[2];
	int64		unfinished;
	uint64		schedules;
	char	   *schedule_names = NULL;
	Datum		parts;

	if (PG_NARGS() > 1)
	{
		DurableRequireArg(fcinfo, 1, "cascade");
		cascade = PG_GETARG_BOOL(1);
	}

	/*
	 * Under a transaction snapshot a task enqueued by a transaction that
	 * committed while the drop waited for the queue's row would be
	 * invisible to the check and to the delete, and stay behind.
	 */
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				errmsg("cannot drop queue \"%s\" under the %s isolation level",
					   queue, XactIsoLevel == XACT_SERIALIZABLE ?
					   "SERIALIZABLE" : "REPEATABLE READ"),
				errhint("Drop queues in a READ COMMITTED transaction."));

	SPI_connect();
	/*
	 * On Citus the drop locks the queue's row on every node and then
	 * deletes on every shard, which Citus does in one transaction only over
	 * one connection per node.  An enqueue there takes no lock of the row
	 * on every node (DurableQueueGetShared): one racing the drop fails on
	 * the foreign key from durable.live_tasks instead (23503), on whichever
	 * side comes second, and no task is left without its queue.
	 */
	if (DurableDistributed())
		(void) set_config_option("citus.multi_shard_modify_mode", "sequential",
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
								 true, 0, false);
	queue_get(STMT_QUEUE_GET_FOR_DROP, queue, &settings);
	args[0] = CStringGetTextDatum(queue);
	args[1] = PointerGetDatum(DurableQueuePartitionArray(&settings));
	DurableExecuteStmt(STMT_QUEUE_UNFINISHED, args, NULL, SPI_OK_SELECT, 0);
	unfinished = DurableResultInt64(0, 1);
	if (unfinished > 0)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_IN_USE),
				errmsg("cannot drop queue \"%s\" because it has unfinished tasks",
					   queue),
				errdetail_plural("%lld task is not completed, failed or cancelled.",
								 "%lld tasks are not completed, failed or cancelled.",
								 unfinished, (long long) unfinished),
				errhint("Cancel them with durable_cancel() or let them finish."));
	schedules = DurableExecuteStmt(STMT_QUEUE_SCHEDULES, args, NULL, SPI_OK_SELECT, 0);
	if (schedules > 0)
		schedule_names = schedule_list_text(queue, schedules);
	parts = queue_tick_parts(queue, schedules);
	if (schedules > 0 && !cascade)
		ereport(ERROR,
				errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				errmsg("cannot drop queue \"%s\" because schedules target it",
					   queue),
				errdetail("%s", schedule_names),
				errhint("Use durable_drop_queue(..., cascade => true) to drop the schedules too, or durable_unschedule() them first."));
	DurableExecuteStmt(STMT_QUEUE_DROP, args, NULL, SPI_OK_DELETE, 0);
	/*
	 * Its events go too, and the awaits of them that tasks of other queues
	 * registered: a new queue of that name starts with none, and its
	 * emits wake nobody who awaited the old one's.
	 */
	DurableExecuteStmt(STMT_QUEUE_DROP_EVENTS, args, NULL, SPI_OK_DELETE, 0);
	/* what the tick failed to do for the queue is not shown any more */
	DurableExecuteStmt(STMT_TICK_FAILURES_FORGET, &parts, NULL, SPI_OK_DELETE, 0);
	if (schedules > 0)
	{
		DurableExecuteStmt(STMT_QUEUE_DROP_SCHEDULES, args, NULL, SPI_OK_DELETE, 0);
		ereport(NOTICE,
				errmsg_plural("drop cascades to %llu schedule",
							  "drop cascades to %llu schedules",
							  schedules, (unsigned long long) schedules),
				errdetail("%s", schedule_names));
	}
	SPI_finish();
	PG_RETURN_VOID();
}

static void
set_paused(FunctionCallInfo fcinfo, bool paused)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	Datum		args[2];

	args[0] = CStringGetTextDatum(queue);
	args[1] = BoolGetDatum(paused);
	SPI_connect();
	if (DurableExecuteStmt(STMT_QUEUE_SET_PAUSED, args, NULL, SPI_OK_UPDATE, 0) == 0)
		report_no_queue(queue);
	SPI_finish();
}

/*
 * durable_pause(queue text) RETURNS void
 * durable_resume(queue text) RETURNS void
 *
 * A paused queue hands out no task; enqueues, running tasks, their commits
 * and the reconciler go on, so nothing is lost.
 */
PG_FUNCTION_INFO_V1(durable_pause);
Datum
durable_pause(PG_FUNCTION_ARGS)
{
	set_paused(fcinfo, true);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(durable_resume);
Datum
durable_resume(PG_FUNCTION_ARGS)
{
	set_paused(fcinfo, false);
	PG_RETURN_VOID();
}
