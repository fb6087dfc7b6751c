/*-------------------------------------------------------------------------
 *
 * drop.c
 *	  Dropping a queue with everything of it: its finished tasks, their
 *	  steps and events, its events and their awaits, its concurrency and
 *	  flow keys' rows, its fairness weights, the workers it has seen, and,
 *	  with cascade, its schedules (durable_drop_queue in api/queues.c).
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/guc.h"

/* how often a drop on Citus looks again after a racer came first */
#define DROP_ATTEMPTS 5

/* what of a queue (in its partitions) goes with it, by table */
#define QUEUE_TASKS(table) \
	" USING " table " t WHERE x.partition_key = t.partition_key" \
	" AND x.task_id = t.task_id AND t.partition_key = ANY ($partitions)" \
	" AND t.queue_name = $queue"

/* the statements of a queue by its name alone */
enum
{
	QUEUE_QUEUE,
	QUEUE_NPARAMS
};
static const DurableParam queue_params[QUEUE_NPARAMS] = {
	[QUEUE_QUEUE] = {"queue", TEXTOID},
};

/* the statements of a queue in its partitions */
enum
{
	DROP_QUEUE,
	DROP_PARTITIONS,
	DROP_NPARAMS
};
static const DurableParam drop_params[DROP_NPARAMS] = {
	[DROP_QUEUE] = {"queue", TEXTOID},
	[DROP_PARTITIONS] = {"partitions", INT4ARRAYOID},
};

enum
{
	SCHEDULE_NAME,
	SCHEDULE_NCOLUMNS
};

static const DurableColumn schedule_columns[SCHEDULE_NCOLUMNS] = {
	[SCHEDULE_NAME] = {"schedule_name", TEXTOID},
};

static DurableStatement queue_schedules = {
	.name = "queue_schedules",
	.sql = "SELECT schedule_name FROM durable.schedules WHERE queue_name = $queue"
	" ORDER BY schedule_name",
	DURABLE_PARAMS(queue_params),
	DURABLE_COLUMNS(schedule_columns),
};

/*
 * The schedules in the rows of queue_schedules, one a line, as
 * PostgreSQL's DROP lists dependent objects: the first hundred, then how
 * many more.
 */
#define MAX_REPORTED_SCHEDULES 100

static char *
schedule_list_text(const char *queue, DurableResult res)
{
	uint64		n = res.rows;
	StringInfoData buf;

	initStringInfo(&buf);
	for (uint64 r = 0; r < n && r < MAX_REPORTED_SCHEDULES; r++)
		appendStringInfo(&buf, "%sschedule \"%s\" targets queue \"%s\"",
						 r > 0 ? "\n" : "", DurableGetText(res, r, SCHEDULE_NAME), queue);
	if (n > MAX_REPORTED_SCHEDULES)
		appendStringInfo(&buf, "\nand %llu other schedules",
						 (unsigned long long) (n - MAX_REPORTED_SCHEDULES));
	return buf.data;
}

/*
 * The parts of the tick that are the queue's (tick.c): its retry tokens,
 * its versions and its schedules, named from the rows of queue_schedules, as
 * a text[] datum.
 */
static Datum
queue_tick_parts(const char *queue, DurableResult res)
{
	uint64		n = res.rows;
	Datum	   *names = palloc(sizeof(Datum) * (n + 2));

	names[0] = CStringGetTextDatum(psprintf("retry tokens: %s", queue));
	names[1] = CStringGetTextDatum(psprintf("versions: %s", queue));
	for (uint64 r = 0; r < n; r++)
		names[r + 2] = CStringGetTextDatum(psprintf("schedule: %s",
													DurableGetText(res, r, SCHEDULE_NAME)));
	return PointerGetDatum(construct_array(names, (int) n + 2, TEXTOID, -1,
										   false, TYPALIGN_INT));
}

/* the unfinished tasks of a queue */
enum
{
	UNFINISHED_COUNT,
	UNFINISHED_NCOLUMNS
};

static const DurableColumn unfinished_columns[UNFINISHED_NCOLUMNS] = {
	[UNFINISHED_COUNT] = {"unfinished", INT8OID},
};

static DurableStatement queue_unfinished = {
	.name = "queue_unfinished",
	.sql = "SELECT pg_catalog.count(*) AS unfinished FROM durable.live_tasks"
	" WHERE partition_key = ANY ($partitions)"
	" AND queue_name = $queue"
	" AND state NOT IN ('completed', 'failed', 'cancelled')",
	DURABLE_PARAMS(drop_params),
	DURABLE_COLUMNS(unfinished_columns),
};

static DurableStatement queue_drop = {
	.name = "queue_drop",
	.sql = "WITH l AS (DELETE FROM durable.live_tasks"
	"  WHERE partition_key = ANY ($partitions)"
	"  AND queue_name = $queue"
	"  RETURNING partition_key, task_id),"
	" h AS (DELETE FROM durable.task_history"
	"  WHERE partition_key = ANY ($partitions)"
	"  AND queue_name = $queue"
	"  RETURNING partition_key, task_id),"
	" t AS (SELECT * FROM l UNION ALL SELECT * FROM h),"
	" e AS (DELETE FROM durable.event_log e USING t"
	"  WHERE e.partition_key = t.partition_key"
	"  AND e.task_id = t.task_id),"
	" s AS (DELETE FROM durable.live_steps s USING l t"
	"  WHERE s.partition_key = t.partition_key"
	"  AND s.task_id = t.task_id),"
	" sh AS (DELETE FROM durable.step_history s USING h t"
	"  WHERE s.partition_key = t.partition_key"
	"  AND s.task_id = t.task_id),"
	" k AS (DELETE FROM durable.task_keys"
	"  WHERE partition_key = ANY ($partitions)"
	"  AND queue_name = $queue)"
	" DELETE FROM durable.queues WHERE queue_name = $queue",
	DURABLE_PARAMS(drop_params),
	.nsplit = 5,
	.split = {
	{"WITH a AS (DELETE FROM durable.event_log x" QUEUE_TASKS("durable.live_tasks") " RETURNING 1),"
		" b AS (DELETE FROM durable.event_log x" QUEUE_TASKS("durable.task_history") " RETURNING 1)"
		" SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)",
	DURABLE_SPLIT_NO_INPUT, false},
	{"WITH a AS (DELETE FROM durable.live_steps x" QUEUE_TASKS("durable.live_tasks") " RETURNING 1),"
		" b AS (DELETE FROM durable.step_history x" QUEUE_TASKS("durable.task_history") " RETURNING 1)"
		" SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)",
	DURABLE_SPLIT_NO_INPUT, false},
	{"WITH a AS (DELETE FROM durable.live_tasks WHERE partition_key = ANY ($partitions)"
		"  AND queue_name = $queue RETURNING 1),"
		" b AS (DELETE FROM durable.task_history WHERE partition_key = ANY ($partitions)"
		"  AND queue_name = $queue RETURNING 1)"
		" SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)",
	DURABLE_SPLIT_NO_INPUT, false},
	{"DELETE FROM durable.task_keys WHERE partition_key = ANY ($partitions) AND queue_name = $queue",
	DURABLE_SPLIT_NO_INPUT, false},
	{"DELETE FROM durable.queues WHERE queue_name = $queue", DURABLE_SPLIT_NO_INPUT, false},
	},
};

static DurableStatement queue_drop_events = {
	.name = "queue_drop_events",
	.sql = "WITH w AS (DELETE FROM durable.event_waits"
	"  WHERE partition_key = ANY ($partitions) AND queue_name = $queue),"
	" c AS (DELETE FROM durable.concurrency_keys"
	"  WHERE partition_key = ANY ($partitions) AND queue_name = $queue),"
	" f AS (DELETE FROM durable.flow_keys"
	"  WHERE partition_key = ANY ($partitions) AND queue_name = $queue)"
	" DELETE FROM durable.emitted_events"
	" WHERE partition_key = ANY ($partitions) AND queue_name = $queue",
	DURABLE_PARAMS(drop_params),
};

/*
 * Its outbox messages, inbox entries, request keys and streams: an outbox
 * message emitted before 0.9.0 kept the partition its id carries, so
 * those are found by queue alone, as streams are (by their queue_name).
 */
static DurableStatement queue_drop_messages = {
	.name = "queue_drop_messages",
	.sql = "WITH o AS (DELETE FROM durable.outbox WHERE queue_name = $queue),"
	" i AS (DELETE FROM durable.inbox"
	"  WHERE partition_key = ANY ($partitions) AND queue_name = $queue),"
	" c AS (DELETE FROM durable.stream_chunks c USING durable.streams s"
	"  WHERE s.queue_name = $queue AND c.partition_key = s.partition_key"
	"  AND c.task_id = s.task_id AND c.stream = s.stream),"
	" st AS (DELETE FROM durable.streams WHERE queue_name = $queue)"
	" DELETE FROM durable.idempotency_keys"
	" WHERE partition_key = ANY ($partitions) AND queue_name = $queue",
	DURABLE_PARAMS(drop_params),
	.nsplit = 5,
	.split = {
		{"DELETE FROM durable.outbox WHERE queue_name = $queue",
		DURABLE_SPLIT_NO_INPUT, false},
		{"DELETE FROM durable.inbox WHERE partition_key = ANY ($partitions) AND queue_name = $queue",
		DURABLE_SPLIT_NO_INPUT, false},
		{"DELETE FROM durable.idempotency_keys WHERE partition_key = ANY ($partitions) AND queue_name = $queue",
		DURABLE_SPLIT_NO_INPUT, false},
		{"DELETE FROM durable.stream_chunks c USING durable.streams s"
			" WHERE s.queue_name = $queue AND c.partition_key = s.partition_key"
			" AND c.task_id = s.task_id AND c.stream = s.stream",
		DURABLE_SPLIT_NO_INPUT, false},
		{"DELETE FROM durable.streams WHERE queue_name = $queue",
		DURABLE_SPLIT_NO_INPUT, false},
	},
};

static DurableStatement queue_drop_workers = {
	.name = "queue_drop_workers",
	.sql = "WITH l AS (DELETE FROM durable.queue_log WHERE queue_name = $queue),"
	" s AS (DELETE FROM durable.samples WHERE queue_name = $queue)"
	" DELETE FROM durable.workers_seen WHERE queue_name = $queue",
	DURABLE_PARAMS(queue_params),
	/* on Citus the workers seen are distributed, the log and samples the node's */
	.nsplit = 3,
	.split = {
		{"DELETE FROM durable.queue_log WHERE queue_name = $queue",
		DURABLE_SPLIT_NO_INPUT, false},
		{"DELETE FROM durable.samples WHERE queue_name = $queue",
		DURABLE_SPLIT_NO_INPUT, false},
		{"DELETE FROM durable.workers_seen WHERE queue_name = $queue",
		DURABLE_SPLIT_NO_INPUT, false},
	},
};

enum
{
	FORGET_PARTS,
	FORGET_NPARAMS
};
static const DurableParam tick_failures_forget_params[FORGET_NPARAMS] = {
	[FORGET_PARTS] = {"parts", TEXTARRAYOID},
};
static DurableStatement tick_failures_forget = {
	.name = "tick_failures_forget",
	.sql = "DELETE FROM durable.tick_failures WHERE part = ANY ($parts)",
	DURABLE_PARAMS(tick_failures_forget_params),
};

/* the weights of its fairness keys (on Citus a reference table) */
static DurableStatement queue_drop_weights = {
	.name = "queue_drop_weights",
	.sql = "DELETE FROM durable.fairness_weights WHERE queue_name = $queue",
	DURABLE_PARAMS(queue_params),
};

static DurableStatement queue_drop_schedules = {
	.name = "queue_drop_schedules",
	.sql = "DELETE FROM durable.schedules WHERE queue_name = $queue",
	DURABLE_PARAMS(queue_params),
};

/*
 * DurableRunInQueue
 *		DurableRun for a statement that adds a row of queue (a task, an
 *		event).  On Citus such a row locks its queue's row only through its
 *		foreign key to durable.queues, on its own node
 *		(DurableQueueGetShared): one that comes while a drop of the queue
 *		is under way waits for the drop there, and fails with 23503 once
 *		the drop has committed.  That is reported as one server reports it:
 *		no such queue (42704).  The error ends the transaction.
 */
DurableResult
DurableRunInQueue(DurableStatement *stmt, Datum *values, const char *nulls,
				  int expected, const char *queue)
{
	MemoryContext context = CurrentMemoryContext;
	volatile DurableResult res = {0};

	if (!DurableDistributed())
		return DurableRun(stmt, values, nulls, expected, 0);
	PG_TRY();
	{
		res = DurableRun(stmt, values, nulls, expected, 0);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(context);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_FOREIGN_KEY_VIOLATION)
			PG_RE_THROW();
		FlushErrorState();
		DurableReportNoQueue(queue);
	}
	PG_END_TRY();
	return res;
}

/* 55006 while the queue of args (drop_params) has unfinished tasks */
static void
check_unfinished(const char *queue, Datum *args)
{
	DurableResult res;
	int64		unfinished;

	res = DurableRun(&queue_unfinished, args, NULL, SPI_OK_SELECT, 0);
	unfinished = DurableGetInt64(res, 0, UNFINISHED_COUNT);
	if (unfinished > 0)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_IN_USE),
				errmsg("cannot drop queue \"%s\" because it has unfinished tasks",
					   queue),
				errdetail_plural("%lld task is not completed, failed or cancelled.",
								 "%lld tasks are not completed, failed or cancelled.",
								 unfinished, (long long) unfinished),
				errhint("Cancel them with durable_cancel() or let them finish."));
}

/* what a drop removes of its queue, the queue's row last */
typedef struct DropWork
{
	const char *queue;
	Datum	   *args;			/* drop_params */
	bool		again;			/* after a racer came first: look again */
} DropWork;

static uint64
drop_rows(void *arg)
{
	DropWork   *work = (DropWork *) arg;

	if (work->again)
		check_unfinished(work->queue, work->args);

	/*
	 * Its events go too, and the awaits of them that tasks of other queues
	 * registered: a new queue of that name starts with none, and its emits
	 * wake nobody who awaited the old one's.  Before the queue's row, which
	 * on Citus they reference.
	 */
	DurableRun(&queue_drop_events, work->args, NULL, SPI_OK_DELETE, 0);
	/* so do its messages and keys: a new queue of that name starts afresh */
	DurableRun(&queue_drop_messages, work->args, NULL, SPI_OK_DELETE, 0);
	DurableRun(&queue_drop, work->args, NULL, SPI_OK_DELETE, 0);
	return 0;
}

/*
 * DurableDropQueue
 *		Drop a queue, with its schedules when cascade (durable_drop_queue).
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
 * drop holds it.
 */
void
DurableDropQueue(const char *queue, bool cascade)
{
	DurableQueue settings;
	Datum		args[DROP_NPARAMS];
	Datum		queue_args[QUEUE_NPARAMS];
	Datum		forget[FORGET_NPARAMS];
	DropWork	work;
	DurableResult schedules;
	char	   *schedule_names = NULL;

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

	/*
	 * On Citus the drop deletes on every shard, which Citus does in one
	 * transaction only over one connection per node.  Its lock of the
	 * queue's row does not reach the nodes where an enqueue or an emit
	 * holds the row through its foreign key (DurableQueueGetShared): the
	 * two meet at the drop's delete of the row, or at the other's foreign
	 * key, whichever comes second (below, and DurableRunInQueue), and
	 * no task or event is left without its queue.
	 */
	if (DurableDistributed())
		(void) set_config_option("citus.multi_shard_modify_mode", "sequential",
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
								 true, 0, false);
	DurableQueueGetForDrop(queue, &settings);
	args[DROP_QUEUE] = CStringGetTextDatum(queue);
	args[DROP_PARTITIONS] = PointerGetDatum(DurableQueuePartitionArray(&settings));
	queue_args[QUEUE_QUEUE] = args[DROP_QUEUE];
	check_unfinished(queue, args);
	schedules = DurableRun(&queue_schedules, queue_args, NULL, SPI_OK_SELECT, 0);
	if (schedules.rows > 0)
		schedule_names = schedule_list_text(queue, schedules);
	forget[FORGET_PARTS] = queue_tick_parts(queue, schedules);
	if (schedules.rows > 0 && !cascade)
		ereport(ERROR,
				errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				errmsg("cannot drop queue \"%s\" because schedules target it",
					   queue),
				errdetail("%s", schedule_names),
				errhint("Use durable_drop_queue(..., cascade => true) to drop the schedules too, or durable_unschedule() them first."));
	/* its grants go with it: a new queue of that name starts open */
	DurableDropQueueGrants(queue);
	work.queue = queue;
	work.args = args;
	work.again = false;
	if (!DurableDistributed())
		(void) drop_rows(&work);
	else
	{
		/*
		 * An enqueue or an emit that came before the drop locked the queue's
		 * row on its own node only, through its foreign key: the drop's
		 * delete of the row waits for it there, and fails with 23503 once
		 * it has committed.  Then its task or event is visible, and the
		 * drop looks again, as one server's drop does after waiting for the
		 * row: a task refuses the drop, an event goes with it.
		 */
		for (int attempt = 1;; attempt++)
		{
			ErrorData  *error = NULL;

			if (DurableTry(drop_rows, &work, NULL, &error))
				break;
			if (error->sqlerrcode != ERRCODE_FOREIGN_KEY_VIOLATION ||
				attempt == DROP_ATTEMPTS)
				ReThrowError(error);
			work.again = true;
		}
	}
	DurableRun(&queue_drop_workers, queue_args, NULL, SPI_OK_DELETE, 0);
	DurableRun(&queue_drop_weights, queue_args, NULL, SPI_OK_DELETE, 0);
	/* what the tick failed to do for the queue is not shown any more */
	DurableRun(&tick_failures_forget, forget, NULL, SPI_OK_DELETE, 0);
	if (schedules.rows > 0)
	{
		DurableRun(&queue_drop_schedules, queue_args, NULL, SPI_OK_DELETE, 0);
		ereport(NOTICE,
				errmsg_plural("drop cascades to %llu schedule",
							  "drop cascades to %llu schedules",
							  schedules.rows, (unsigned long long) schedules.rows),
				errdetail("%s", schedule_names));
	}
}

