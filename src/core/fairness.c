/*-------------------------------------------------------------------------
 *
 * fairness.c
 *	  Fairness between the keys of a queue: stride scheduling, decided
 *	  when a task is admitted to its queue's claim order.
 *
 * In a fair queue every ready task has a pass, a virtual time, and a
 * claim takes the ready task of the highest priority and the lowest pass
 * (tasks_claimable's order), in one index scan as any claim.  A key's
 * next task gets the pass of the key's last ready task, or when the key
 * has none the lowest pass of the queue's ready tasks (the head, where
 * the claims are), plus 1 / the key's weight.  So the keys with ready
 * work are served in turn, each in proportion to its weight, however many
 * tasks one of them has enqueued before the others; and a key that had
 * no work comes back at the head, with no credit for the time it was idle
 * and so no burst.  The tasks without a key are one key of their own.
 * Passes are per partition and priority: a claim takes from one partition
 * at a time, and a higher priority still goes first.
 *
 * A task is admitted (gets its pass) only once it is due: a pass is the
 * task's place among tasks that can run now, and one that cannot run yet
 * would be skipped by every claim until it can.  A task enqueued due is
 * admitted by its enqueue, which inserts it with its pass (a batch gives
 * its tasks theirs after their inserts); one enqueued for later, or back
 * from running (released, retried, waiting: move.c's UNADMITTED),
 * has the pass Infinity, after every admitted task of its priority, until
 * the reconciler admits it once due (DurableAdmitFairTasks); it can be
 * claimed meanwhile when nothing admitted is ready.  In a queue without
 * fairness the pass is NULL, and the order is the due time's.
 *
 * A queue becomes fair with its first task that has a fairness key, or
 * its first weight (durable_set_fairness): its unfinished tasks then wait
 * for admission as any, so that none is left behind the fair ones.  An
 * enqueue that read the queue just before, and commits just after, keeps
 * no pass (NULL) and is claimed after the queue's other ready tasks; the
 * reconciler does not look for such a task (no index holds them apart
 * from the tasks of queues without fairness).  Concurrent enqueues of one
 * key may give two tasks one pass: ties go in due order, and no lock is
 * taken on a key.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/*
 * A task t admitted with the fairness key k: its pass, when it is due,
 * comes after its key's last admitted ready task, or after the head of
 * its queue's priority when the key has none (0 when there is none), by
 * 1 / the key's weight; when not due, it waits (Infinity).  The admitted
 * tasks are the finite passes, which tasks_fair holds by key and
 * tasks_claimable in order.  One task a statement, found by its primary
 * key: a statement that joined a set of tasks to the table was planned,
 * once per backend and while the table was small, as a scan of the table,
 * and each enqueue then read every task.  The tasks of a batch go one
 * after the other, each seeing the passes of those before it.
 */
#define ADMITTED_READY(alias, queue, priority) \
	alias ".partition_key = $partition AND " alias ".queue_name = " queue \
	" AND " alias ".priority = " priority " AND " alias ".state IN ('ready', 'waiting')" \
	" AND " alias ".fair_pass < 'Infinity'"
#define FAIR_PASS(queue, priority, k) \
	"COALESCE((SELECT a.fair_pass FROM durable.live_tasks a" \
	"  WHERE " ADMITTED_READY("a", queue, priority) \
	"  AND COALESCE(a.fairness_key, '') = COALESCE(" k ", '')" \
	"  ORDER BY a.fair_pass DESC LIMIT 1)," \
	" (SELECT h.fair_pass FROM durable.live_tasks h" \
	"  WHERE " ADMITTED_READY("h", queue, priority) \
	"  ORDER BY h.fair_pass LIMIT 1), 0)" \
	" + 1 / COALESCE((SELECT w.weight FROM durable.fairness_weights w" \
	"  WHERE w.queue_name = " queue " AND w.fairness_key = " k "), 1)"
#define ADMIT(k, unadmitted) \
	"UPDATE durable.live_tasks t SET fairness_key = " k "," \
	" fair_pass = CASE WHEN t.run_at <= $now" \
	" THEN " FAIR_PASS("t.queue_name", "t.priority", k) \
	" ELSE 'Infinity' END" \
	" WHERE t.partition_key = $partition AND t.task_id = $task_id" \
	" AND t.state IN ('ready', 'waiting') AND " unadmitted

/* the pass of a task about to be enqueued due, with its key (or NULL) */
enum
{
	PASS_PARTITION,
	PASS_QUEUE,
	PASS_PRIORITY,
	PASS_KEY,
	PASS_NPARAMS
};
static const DurableParam fair_pass_params[PASS_NPARAMS] = {
	[PASS_PARTITION] = {"partition", INT4OID},
	[PASS_QUEUE] = {"queue", TEXTOID},
	[PASS_PRIORITY] = {"priority", INT4OID},
	[PASS_KEY] = {"key", TEXTOID},
};
enum
{
	PASS_PASS,
	PASS_NCOLUMNS
};
static const DurableColumn fair_pass_columns[PASS_NCOLUMNS] = {
	[PASS_PASS] = {"pass", FLOAT8OID},
};
static DurableStatement fair_pass_next = {
	.name = "fair_pass_next",
	.sql = "SELECT " FAIR_PASS("$queue", "$priority", "$key") " AS pass",
	DURABLE_PARAMS(fair_pass_params),
	DURABLE_COLUMNS(fair_pass_columns),
};

/*
 * A task just enqueued, with its key (or NULL): one with no pass yet,
 * which a task inserted has, and one enqueued before (an idempotent replay
 * names it) has not.
 */
enum
{
	ADMIT_PARTITION,
	ADMIT_TASK_ID,
	ADMIT_NOW,
	ADMIT_KEY,
	ADMIT_NPARAMS
};
static const DurableParam admit_params[ADMIT_NPARAMS] = {
	[ADMIT_PARTITION] = {"partition", INT4OID},
	[ADMIT_TASK_ID] = {"task_id", INT8OID},
	[ADMIT_NOW] = {"now", TIMESTAMPTZOID},
	[ADMIT_KEY] = {"key", TEXTOID},
};
static DurableStatement admit_enqueued = {
	.name = "admit_enqueued",
	.sql = ADMIT("$key", "t.fair_pass IS NULL"),
	DURABLE_PARAMS(admit_params),
};

/* a task that waited for its pass, with its own key, once due */
static const DurableParam admit_waiting_params[ADMIT_KEY] = {
	[ADMIT_PARTITION] = {"partition", INT4OID},
	[ADMIT_TASK_ID] = {"task_id", INT8OID},
	[ADMIT_NOW] = {"now", TIMESTAMPTZOID},
};
static DurableStatement admit_waiting = {
	.name = "admit_waiting",
	.sql = ADMIT("t.fairness_key", "t.fair_pass = 'Infinity' AND t.run_at <= $now"),
	DURABLE_PARAMS(admit_waiting_params),
};

/* a batch of a partition's tasks due and waiting for their passes */
enum
{
	DUE_PARTITION,
	DUE_NOW,
	DUE_BATCH,
	DUE_NPARAMS
};
static const DurableParam due_unadmitted_params[DUE_NPARAMS] = {
	[DUE_PARTITION] = {"partition", INT4OID},
	[DUE_NOW] = {"now", TIMESTAMPTZOID},
	[DUE_BATCH] = {"batch", INT4OID},
};
enum
{
	DUE_TASK_ID,
	DUE_NCOLUMNS
};
static const DurableColumn due_columns[DUE_NCOLUMNS] = {
	[DUE_TASK_ID] = {"task_id", INT8OID},
};
static DurableStatement due_unadmitted = {
	.name = "due_unadmitted",
	.sql = "SELECT task_id FROM durable.live_tasks"
	" WHERE partition_key = $partition AND state IN ('ready', 'waiting')"
	" AND fair_pass = 'Infinity' AND run_at <= $now"
	" ORDER BY run_at, task_id LIMIT $batch FOR UPDATE SKIP LOCKED",
	DURABLE_PARAMS(due_unadmitted_params),
	DURABLE_COLUMNS(due_columns),
};

/* of the partitions given, those with tasks due and waiting for a pass */
enum
{
	WAITING_PARTITIONS,
	WAITING_NOW,
	WAITING_NPARAMS
};
static const DurableParam unadmitted_params[WAITING_NPARAMS] = {
	[WAITING_PARTITIONS] = {"partitions", INT4ARRAYOID},
	[WAITING_NOW] = {"now", TIMESTAMPTZOID},
};
enum
{
	UNADMITTED_PARTITION,
	UNADMITTED_NCOLUMNS
};
static const DurableColumn unadmitted_columns[UNADMITTED_NCOLUMNS] = {
	[UNADMITTED_PARTITION] = {"partition_key", INT4OID},
};
static DurableStatement partitions_unadmitted = {
	.name = "partitions_unadmitted",
	.sql = "SELECT DISTINCT partition_key FROM durable.live_tasks"
	" WHERE partition_key = ANY ($partitions) AND state IN ('ready', 'waiting')"
	" AND fair_pass = 'Infinity' AND run_at <= $now",
	DURABLE_PARAMS(unadmitted_params),
	DURABLE_COLUMNS(unadmitted_columns),
};

/* a queue made fair, and its unfinished tasks made to wait for a pass */
enum
{
	FAIR_QUEUE,
	FAIR_PARTITIONS,
	FAIR_NPARAMS
};
static const DurableParam queue_fair_params[FAIR_PARTITIONS] = {
	[FAIR_QUEUE] = {"queue", TEXTOID},
};
static const DurableParam queue_tasks_unadmitted_params[FAIR_NPARAMS] = {
	[FAIR_QUEUE] = {"queue", TEXTOID},
	[FAIR_PARTITIONS] = {"partitions", INT4ARRAYOID},
};
static DurableStatement queue_fair = {
	.name = "queue_fair",
	.sql = "UPDATE durable.queues SET fair = true WHERE queue_name = $queue AND NOT fair",
	DURABLE_PARAMS(queue_fair_params),
};
static DurableStatement queue_tasks_unadmitted = {
	.name = "queue_tasks_unadmitted",
	.sql = "UPDATE durable.live_tasks SET fair_pass = 'Infinity'"
	" WHERE partition_key = ANY ($partitions) AND queue_name = $queue"
	" AND fair_pass IS NULL",
	DURABLE_PARAMS(queue_tasks_unadmitted_params),
};

/* a key's weight */
enum
{
	WEIGHT_QUEUE,
	WEIGHT_KEY,
	WEIGHT_WEIGHT,
	WEIGHT_NPARAMS
};
static const DurableParam weight_set_params[WEIGHT_NPARAMS] = {
	[WEIGHT_QUEUE] = {"queue", TEXTOID},
	[WEIGHT_KEY] = {"key", TEXTOID},
	[WEIGHT_WEIGHT] = {"weight", FLOAT8OID},
};
static DurableStatement weight_set = {
	.name = "fairness_weight_set",
	.sql = "INSERT INTO durable.fairness_weights (queue_name, fairness_key, weight)"
	" VALUES ($queue, $key, $weight)"
	" ON CONFLICT (queue_name, fairness_key) DO UPDATE SET weight = excluded.weight",
	DURABLE_PARAMS(weight_set_params),
};

/* the queue's partitions, as an int4[] */
static Datum
queue_partitions(const DurableQueue *settings)
{
	Datum	   *keys = palloc(sizeof(Datum) * settings->partitions);

	for (int k = 0; k < settings->partitions; k++)
		keys[k] = Int32GetDatum(DurableQueuePartition(settings, k));
	return PointerGetDatum(construct_array(keys, settings->partitions, INT4OID,
										   sizeof(int32), true, TYPALIGN_INT));
}

/*
 * DurableMakeQueueFair
 *		Make the queue read into settings fair, unless it was: its
 *		unfinished tasks wait for their passes from now on.
 */
void
DurableMakeQueueFair(const char *queue, const DurableQueue *settings)
{
	Datum		args[FAIR_NPARAMS];

	if (settings->fair)
		return;
	args[FAIR_QUEUE] = CStringGetTextDatum(queue);
	args[FAIR_PARTITIONS] = queue_partitions(settings);
	/* none changed: a concurrent call made it fair, and we waited for it */
	if (DurableRun(&queue_fair, args, NULL, SPI_OK_UPDATE, 0).rows == 1)
		(void) DurableRun(&queue_tasks_unadmitted, args, NULL, SPI_OK_UPDATE, 0);
}

/*
 * DurableFairPass
 *		The pass of a task due now that is about to be enqueued into
 *		partition of a fair queue, with its key (or NULL) and priority: the
 *		enqueue inserts it with the task, in one write.
 */
double
DurableFairPass(int32 partition, const char *queue, int32 priority, const char *key)
{
	Datum		args[PASS_NPARAMS];
	char		nulls[PASS_NPARAMS] = {' ', ' ', ' ', ' '};
	DurableResult res;
	bool		isnull;

	args[PASS_PARTITION] = Int32GetDatum(partition);
	args[PASS_QUEUE] = CStringGetTextDatum(queue);
	args[PASS_PRIORITY] = Int32GetDatum(priority);
	args[PASS_KEY] = key ? CStringGetTextDatum(key) : (Datum) 0;
	nulls[PASS_KEY] = key ? ' ' : 'n';
	res = DurableRun(&fair_pass_next, args, nulls, SPI_OK_SELECT, 1);
	return DatumGetFloat8(DurableGetDatum(res, 0, PASS_PASS, &isnull));
}

/*
 * DurableAdmitEnqueued
 *		Give the n tasks a batch just enqueued into a fair queue their
 *		fairness keys (keys, NULL elements for none, or NULL for none at
 *		all) and, those due at now, their passes, in the order given (one
 *		enqueue inserts its task with its pass: DurableFairPass).  An id
 *		with no row, or of a task that has a pass (an idempotent replay),
 *		is left alone.
 */
void
DurableAdmitEnqueued(const int64 *task_ids, const char *const *keys, int n,
					 TimestampTz now)
{
	Datum		args[ADMIT_NPARAMS];
	char		nulls[ADMIT_NPARAMS] = {' ', ' ', ' ', ' '};

	args[ADMIT_NOW] = TimestampTzGetDatum(now);
	for (int i = 0; i < n; i++)
	{
		const char *key = keys ? keys[i] : NULL;

		args[ADMIT_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_ids[i]));
		args[ADMIT_TASK_ID] = Int64GetDatum(task_ids[i]);
		args[ADMIT_KEY] = key ? CStringGetTextDatum(key) : (Datum) 0;
		nulls[ADMIT_KEY] = key ? ' ' : 'n';
		(void) DurableRun(&admit_enqueued, args, nulls, SPI_OK_UPDATE, 0);
	}
}

/*
 * DurableSetFairness
 *		Set the weight of key in queue (42704 unknown queue), which makes
 *		the queue fair.  A task admitted before keeps its pass.
 */
void
DurableSetFairness(const char *queue, const char *key, double weight)
{
	DurableQueue settings;
	Datum		args[WEIGHT_NPARAMS];

	DurableQueueGetShared(queue, &settings);
	args[WEIGHT_QUEUE] = CStringGetTextDatum(queue);
	args[WEIGHT_KEY] = CStringGetTextDatum(key);
	args[WEIGHT_WEIGHT] = Float8GetDatum(weight);
	(void) DurableRun(&weight_set, args, NULL, SPI_OK_INSERT, 0);
	DurableMakeQueueFair(queue, &settings);
}

/* what admitting a partition's due tasks works on */
typedef struct AdmitWork
{
	int32	   *partitions;
	uint64		npartitions;
	int32		partition;
	TimestampTz now;
	int			batch;
} AdmitWork;

static uint64
find_unadmitted(void *arg)
{
	AdmitWork  *work = arg;
	Datum		args[WAITING_NPARAMS];
	Datum	   *keys = palloc(sizeof(Datum) * Max(work->npartitions, 1));
	DurableResult res;

	for (uint64 i = 0; i < work->npartitions; i++)
		keys[i] = Int32GetDatum(work->partitions[i]);
	args[WAITING_PARTITIONS] = PointerGetDatum(construct_array(keys, (int) work->npartitions,
															   INT4OID, sizeof(int32), true,
															   TYPALIGN_INT));
	args[WAITING_NOW] = TimestampTzGetDatum(work->now);
	res = DurableRun(&partitions_unadmitted, args, NULL, SPI_OK_SELECT, 0);
	for (uint64 i = 0; i < res.rows; i++)
		work->partitions[i] = DurableGetInt32(res, i, UNADMITTED_PARTITION);
	work->npartitions = res.rows;
	return res.rows;
}

static uint64
admit_partition(void *arg)
{
	AdmitWork  *work = arg;
	Datum		args[DUE_NPARAMS];
	Datum		admit[ADMIT_KEY];
	DurableResult res;
	uint64		ntasks;
	int64	   *task_ids;
	uint64		admitted = 0;

	args[DUE_PARTITION] = Int32GetDatum(work->partition);
	args[DUE_NOW] = TimestampTzGetDatum(work->now);
	args[DUE_BATCH] = Int32GetDatum(work->batch);
	res = DurableRun(&due_unadmitted, args, NULL, SPI_OK_SELECT, 0);
	/* the next statements replace the result: take the ids first */
	ntasks = res.rows;
	task_ids = palloc(sizeof(int64) * Max(ntasks, 1));
	for (uint64 i = 0; i < ntasks; i++)
		task_ids[i] = DurableGetInt64(res, i, DUE_TASK_ID);
	admit[ADMIT_PARTITION] = Int32GetDatum(work->partition);
	admit[ADMIT_NOW] = TimestampTzGetDatum(work->now);
	for (uint64 i = 0; i < ntasks; i++)
	{
		admit[ADMIT_TASK_ID] = Int64GetDatum(task_ids[i]);
		admitted += DurableRun(&admit_waiting, admit, NULL, SPI_OK_UPDATE, 0).rows;
	}
	pfree(task_ids);
	return admitted;
}

/*
 * DurableAdmitFairTasks
 *		Admit up to batch tasks of fair queues that are due and wait for
 *		their passes, in the partitions given (on Citus a node's reconciler
 *		passes its own), each partition a part of the tick.  Returns how
 *		many were admitted.
 */
uint64
DurableAdmitFairTasks(const int32 *partitions, uint64 npartitions, TimestampTz now,
					  int batch)
{
	AdmitWork	work = {0};
	uint64		nfound;
	uint64		admitted = 0;

	if (npartitions == 0)
		return 0;
	work.partitions = palloc(sizeof(int32) * npartitions);
	memcpy(work.partitions, partitions, sizeof(int32) * npartitions);
	work.npartitions = npartitions;
	work.now = now;
	if (!DurableRunPart("fairness", find_unadmitted, &work, &nfound))
		return 0;
	DurablePartitionPartsDone("fairness", partitions, npartitions,
							  work.partitions, work.npartitions);
	for (uint64 i = 0; i < work.npartitions && admitted < (uint64) batch; i++)
	{
		char		part[64];
		uint64		n;

		work.partition = work.partitions[i];
		work.batch = batch - (int) admitted;
		snprintf(part, sizeof(part), "partition %d: fairness", work.partition);
		if (DurableRunPart(part, admit_partition, &work, &n))
			admitted += n;
	}
	pfree(work.partitions);
	return admitted;
}
