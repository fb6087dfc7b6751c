/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  Leases: claims of ready tasks and of steps awaiting a look-up, and
 *	  a claim given back (release); heartbeats are heartbeat.c's.
 *
 * A claim leases ready tasks with FOR UPDATE SKIP LOCKED and increments
 * each one's fence; every later write names that fence and is rejected
 * with 55U01 once the fence is not current or the task is no longer
 * running under it.  A fence that is still current is accepted even after
 * lease_until has passed, as long as nobody took the task over.  Lease
 * times come from the transaction start time (see durable.h).  The SQL
 * functions are api/tasks.c's; commits, failures and cancellations are
 * commit.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "core/claim.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/*
 * A claim in a queue with a concurrency limit takes a task c of a key
 * only while the key's running tasks and its tasks ahead of c in claim
 * order that could be claimed now are fewer than the limit, counted in
 * the partitions where the key's tasks are, in one probe that stops at the
 * limit.  A snapshot sees a task another claim is taking as ready: when
 * it is behind c (c has a higher priority, or was enqueued or became due
 * after that claim read the queue), both would run.  So a key's claims
 * take turns on its row in durable.concurrency_keys: a claim first takes
 * and writes the rows of its candidates' keys (claim_keys), skipping those
 * another claim holds, then takes tasks of those keys only, or of none,
 * counting in a statement of its own.  Under READ COMMITTED its snapshot
 * sees every claim of the key before; under REPEATABLE READ and
 * SERIALIZABLE, a row written by a claim that committed after the snapshot
 * raises 40001 when taken: the claim is refused.
 *
 * A task lives in its concurrency key's partition (enqueue.c), so the
 * key's tasks are in the partition claimed; on one server they are
 * counted in all of the queue's partitions, which also finds those
 * enqueued before 0.8.0 in other partitions, and a key's row is in the
 * queue's first partition whichever partition is claimed.  On
 * Citus the count and the key's row stay on the partition's shard.
 */
/* round-robin start over a queue's partitions */
static uint32 next_claim_partition;

#define CLAIM_LEASE_PARAMS \
	[CLAIM_PARTITION] = {"partition", INT4OID}, \
	[CLAIM_QUEUE] = {"queue", TEXTOID}, \
	[CLAIM_NOW] = {"now", TIMESTAMPTZOID}, \
	[CLAIM_BATCH] = {"batch", INT4OID}, \
	[CLAIM_WORKER] = {"worker", TEXTOID}, \
	[CLAIM_LEASE] = {"lease", INTERVALOID}, \
	[CLAIM_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID}, \
	[CLAIM_ROLE] = {"role", TEXTOID}
#define CLAIM_VERSIONS_PARAMS \
	[CLAIM_RUNS] = {"runs", JSONBOID}, \
	[CLAIM_PINS] = {"pins", JSONBOID}
static const DurableParam claim_params[CLAIM_PARTITIONS] = {
	CLAIM_LEASE_PARAMS,
	CLAIM_VERSIONS_PARAMS,
};
static const DurableParam claim_limited_params[CLAIM_NPARAMS] = {
	CLAIM_LEASE_PARAMS,
	CLAIM_VERSIONS_PARAMS,
	[CLAIM_PARTITIONS] = {"partitions", INT4ARRAYOID},
	[CLAIM_CONCURRENCY_LIMIT] = {"concurrency_limit", INT4OID},
	[CLAIM_HELD] = {"held", TEXTARRAYOID},
};
static const DurableParam reconcile_claim_params[CLAIM_RUNS] = {
	CLAIM_LEASE_PARAMS,
};


static DurableStatement claim = {
	.name = "claim",
	.sql = "WITH u AS (" CLAIM_UPDATE
	"  WHERE t.partition_key = $partition AND t.task_id = ANY (ARRAY("
	READY_TO_CLAIM "))"
	"  RETURNING t.partition_key, t.task_id, t.fence, t.lease_until,"
	"  t.attempt, t.payload, t.checkpoint, t.versions, t.version, t.priority,"
	"  t.fair_pass, t.run_at)"
	" SELECT task_id, fence, lease_until, attempt, payload, checkpoint,"
	" versions, run_at FROM u ORDER BY " DURABLE_CLAIM_ORDER,
	DURABLE_PARAMS(claim_params),
	DURABLE_COLUMNS(DurableClaimedColumns),
};

/*
 * The claim of one task, the usual case: the same rows and the same
 * result as claim with a limit of 1, in a statement whose plan is the
 * UPDATE alone (no common table expression to scan and sort), which is
 * cheaper to start on every call.  On Citus it runs so in a shard on the
 * calling node, and elsewhere as its split: the task locked, then taken,
 * by two statements of one table each, planned once per partition
 * (store/plan.c).
 */
#define CLAIMED_RETURNING \
	" RETURNING t.task_id, t.fence, t.lease_until, t.attempt, t.payload," \
	"  t.checkpoint, t.versions, t.run_at"

DurableStatement DurableClaimOneStatement = {
	.name = "claim_one",
	.sql = CLAIM_UPDATE
	"  WHERE t.partition_key = $partition AND t.task_id = ("
	READY_TO_CLAIM ")" CLAIMED_RETURNING,
	DURABLE_PARAMS(claim_params),
	DURABLE_COLUMNS(DurableClaimedColumns),
	.by_partition = true,
	.delegated = true,
	.nsplit = 2,
	.split = {
		{READY_TO_CLAIM, DURABLE_SPLIT_NO_INPUT, true, true},
		{CLAIM_UPDATE "  WHERE t.partition_key = $partition AND t.task_id = $*"
		CLAIMED_RETURNING, 0, true, true},
	},
};

/*
 * The row of k's key in durable.concurrency_keys, by its primary key.  Each
 * key's row is looked up on its own, by a subquery per key that no plan
 * turns into a join: as a join, a generic plan (which cannot know that a
 * claim has a key or two) read every row of the queue's keys, three times
 * a claim, and a queue of many keys made every claim slower.  The table's
 * key collates as live_tasks.concurrency_key does ("C"), so that its index
 * serves the comparison.  The rows locked are updated by their key: by
 * ctid, Citus would refuse the statement.
 */
#define KEY_ROW(alias, rows) \
	alias ".partition_key = " rows " AND " alias ".queue_name = $queue" \
	" AND " alias ".concurrency_key = k.concurrency_key"

/*
 * The rows of the keys of the tasks a claim would take (locked, so that
 * one another claim is taking is left out), taken and written: made when
 * missing (only then waiting, for a claim making the same row), skipped
 * when another claim holds them; returns the keys held.  Its parameters
 * are a claim's that it reads, and (on one server) the partition of the
 * keys' rows.
 */
#define CLAIM_KEYS(where, rows) \
	"WITH k AS (SELECT DISTINCT concurrency_key FROM (SELECT concurrency_key" \
	LIMITED_READY(where, "", "") " FOR UPDATE SKIP LOCKED)" \
	" c WHERE concurrency_key IS NOT NULL)," \
	" i AS (INSERT INTO durable.concurrency_keys" \
	"  (partition_key, queue_name, concurrency_key, claimed_at)" \
	"  SELECT " rows ", $queue, concurrency_key, $now FROM k" \
	"  WHERE (SELECT true FROM durable.concurrency_keys e" \
	"   WHERE " KEY_ROW("e", rows) ") IS NULL" \
	"  ORDER BY concurrency_key" \
	"  ON CONFLICT (partition_key, queue_name, concurrency_key) DO NOTHING" \
	"  RETURNING concurrency_key)," \
	" u AS (UPDATE durable.concurrency_keys h SET claimed_at = $now" \
	"  WHERE h.partition_key = " rows " AND h.queue_name = $queue" \
	"  AND h.concurrency_key = ANY (ARRAY(SELECT l.concurrency_key FROM k," \
	"   LATERAL (SELECT l.concurrency_key FROM durable.concurrency_keys l" \
	"   WHERE " KEY_ROW("l", rows) " FOR UPDATE SKIP LOCKED) l))" \
	"  RETURNING h.concurrency_key)" \
	" SELECT ARRAY(SELECT concurrency_key FROM i" \
	"  UNION ALL SELECT concurrency_key FROM u) AS held"

enum
{
	HELD_KEYS,
	HELD_NCOLUMNS
};

static const DurableColumn held_columns[HELD_NCOLUMNS] = {
	[HELD_KEYS] = {"held", TEXTARRAYOID},
};

enum
{
	KEYS_PARTITION,
	KEYS_QUEUE,
	KEYS_NOW,
	KEYS_BATCH,
	KEYS_RUNS,
	KEYS_PARTITIONS,
	KEYS_CONCURRENCY_LIMIT,
	KEYS_ROWS_PARTITION,
	KEYS_NPARAMS
};
#define CLAIM_KEYS_PARAMS \
	[KEYS_PARTITION] = {"partition", INT4OID}, \
	[KEYS_QUEUE] = {"queue", TEXTOID}, \
	[KEYS_NOW] = {"now", TIMESTAMPTZOID}, \
	[KEYS_BATCH] = {"batch", INT4OID}, \
	[KEYS_RUNS] = {"runs", JSONBOID}, \
	[KEYS_PARTITIONS] = {"partitions", INT4ARRAYOID}, \
	[KEYS_CONCURRENCY_LIMIT] = {"concurrency_limit", INT4OID}
static const DurableParam claim_keys_params[KEYS_NPARAMS] = {
	CLAIM_KEYS_PARAMS,
	[KEYS_ROWS_PARTITION] = {"rows_partition", INT4OID},
};
static const DurableParam claim_keys_here_params[KEYS_ROWS_PARTITION] = {
	CLAIM_KEYS_PARAMS,
};

static DurableStatement claim_keys = {
	.name = "claim_keys",
	.sql = CLAIM_KEYS(KEY_IN_QUEUE, "$rows_partition"),
	DURABLE_PARAMS(claim_keys_params),
	DURABLE_COLUMNS(held_columns),
};

/* on Citus: the key counted, and its row, in the claimed partition */
static DurableStatement claim_keys_here = {
	.name = "claim_keys_here",
	.sql = CLAIM_KEYS(KEY_IN_PARTITION, "$partition"),
	DURABLE_PARAMS(claim_keys_here_params),
	DURABLE_COLUMNS(held_columns),
};

/* a claim in a queue with a concurrency limit, of the keys held */
#define CLAIM_LIMITED(where) \
	"WITH u AS (" CLAIM_UPDATE \
	"  WHERE t.partition_key = $partition AND t.task_id = ANY (ARRAY(" \
	"   SELECT task_id" LIMITED_READY(where, \
	"concurrency_key = ANY ($held) AND", NO_RATE_LIMITS) \
	"   FOR UPDATE SKIP LOCKED))" \
	"  RETURNING t.partition_key, t.task_id, t.fence, t.lease_until," \
	"  t.attempt, t.payload, t.checkpoint, t.versions, t.version, t.priority," \
	"  t.fair_pass, t.run_at)" \
	" SELECT task_id, fence, lease_until, attempt, payload, checkpoint," \
	" versions, run_at FROM u ORDER BY " DURABLE_CLAIM_ORDER

static DurableStatement claim_limited = {
	.name = "claim_limited",
	.sql = CLAIM_LIMITED(KEY_IN_QUEUE),
	DURABLE_PARAMS(claim_limited_params),
	DURABLE_COLUMNS(DurableClaimedColumns),
};

/* on Citus: the key counted on the claimed partition's shard */
static DurableStatement claim_limited_here = {
	.name = "claim_limited_here",
	.sql = CLAIM_LIMITED(KEY_IN_PARTITION),
	DURABLE_PARAMS(claim_limited_params),
	DURABLE_COLUMNS(DurableClaimedColumns),
};

/* claim_keys in the claim's partition: the keys held, into args */
static void
hold_keys(Datum *args, const char *nulls, int32 rows_partition)
{
	DurableResult res;
	bool		distributed = DurableDistributed();
	Datum		keys_args[KEYS_NPARAMS];
	char		keys_nulls[KEYS_NPARAMS];
	bool		isnull;

	memset(keys_nulls, ' ', sizeof(keys_nulls));
	keys_args[KEYS_PARTITION] = args[CLAIM_PARTITION];
	keys_args[KEYS_QUEUE] = args[CLAIM_QUEUE];
	keys_args[KEYS_NOW] = args[CLAIM_NOW];
	keys_args[KEYS_BATCH] = args[CLAIM_BATCH];
	keys_args[KEYS_RUNS] = args[CLAIM_RUNS];
	keys_nulls[KEYS_RUNS] = nulls[CLAIM_RUNS];
	keys_args[KEYS_PARTITIONS] = args[CLAIM_PARTITIONS];
	keys_args[KEYS_CONCURRENCY_LIMIT] = args[CLAIM_CONCURRENCY_LIMIT];
	keys_args[KEYS_ROWS_PARTITION] = Int32GetDatum(rows_partition);
	res = DurableRun(distributed ? &claim_keys_here : &claim_keys, keys_args,
					 keys_nulls, SPI_OK_SELECT, 1);
	args[CLAIM_HELD] = PointerGetDatum(DatumGetArrayTypePCopy(DurableGetDatum(res, 0, HELD_KEYS,
																			  &isnull)));
}

/* what a claim of steps awaiting a look-up returns */
enum
{
	RECONCILE_TASK_ID,
	RECONCILE_FENCE,
	RECONCILE_LEASE_UNTIL,
	RECONCILE_STEP,
	RECONCILE_IDEMPOTENCY_KEY,
	RECONCILE_REQUEST,
	RECONCILE_NCOLUMNS
};

static const DurableColumn reconcile_columns[RECONCILE_NCOLUMNS] = {
	[RECONCILE_TASK_ID] = {"task_id", INT8OID},
	[RECONCILE_FENCE] = {"fence", INT8OID},
	[RECONCILE_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID},
	[RECONCILE_STEP] = {"step", TEXTOID},
	[RECONCILE_IDEMPOTENCY_KEY] = {"idempotency_key", TEXTOID},
	[RECONCILE_REQUEST] = {"request", JSONBOID},
};

static DurableStatement reconcile_claim = {
	.name = "reconcile_claim",
	.sql = "WITH u AS (UPDATE durable.live_tasks t SET state = 'running', owner = $worker,"
	"  lease = $lease, lease_until = $lease_until, heartbeat_at = $now, progress = NULL,"
	"  progress_at = $now, fence = t.fence + 1, version = t.version + 1,"
	"  claimed_at = $now, claim_seq = t.version + 1,"
	"  claim_kind = 'reconcile_claimed', claim_role = $role"
	"  WHERE t.partition_key = $partition AND t.task_id = ANY (ARRAY("
	"   SELECT task_id FROM durable.live_tasks"
	"   WHERE partition_key = $partition AND queue_name = $queue"
	"   AND state = 'waiting' AND run_at = 'infinity' AND steps_in_doubt > 0"
	"   ORDER BY task_id LIMIT $batch FOR UPDATE SKIP LOCKED))"
	"  RETURNING t.partition_key, t.task_id, t.fence, t.lease_until, t.version)"
	" SELECT u.task_id, u.fence, u.lease_until, s.step, s.idempotency_key,"
	" s.request"
	" FROM u JOIN durable.live_steps s ON s.partition_key = u.partition_key"
	" AND s.task_id = u.task_id AND s.state = 'unknown'"
	" ORDER BY u.task_id",
	DURABLE_PARAMS(reconcile_claim_params),
	DURABLE_COLUMNS(reconcile_columns),
};

/*
 * DurableClaim
 *		Lease up to batch tasks of a queue into store (rows of desc),
 *		partition by
 *		partition from a rotating start: ready work (DURABLE_CLAIM_READY,
 *		rows as claimed_columns) or steps awaiting a look-up
 *		(DURABLE_CLAIM_RECONCILE, rows as reconcile_columns); both
 *		statements take a claim's parameters (the look-up its first eight).
 *		runs, when not NULL, is what the worker says it runs (checked by
 *		DurableVersionsRuns): only tasks pinned to versions it runs are
 *		handed out, and those not pinned yet are pinned.  Every claim is
 *		recorded in durable.workers_seen, also one from a paused queue.
 *		Nothing from a paused queue or partition; 42501 for a role the
 *		queue does not let work.  A partition with too little ready work
 *		first has its expired leases settled, so that they are never handed
 *		out without going through the recovery table.  In a queue with a
 *		concurrency limit, claim_limited stands in for claim, after
 *		hold_keys.  On Citus the partitions of this node go first, a node
 *		that cannot be reached is skipped (sharded.c).
 *		Returns how many.
 */
int
DurableClaim(DurableClaimKind kind, const char *queue, const char *worker,
			 Interval *lease, int batch, Jsonb *runs, Tuplestorestate *store,
			 TupleDesc desc)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableQueue settings;
	Datum		args[CLAIM_NPARAMS];
	char		nulls[CLAIM_NPARAMS];
	int			claimed = 0;
	bool		ready_work = kind == DURABLE_CLAIM_READY;
	DurableStatement *stmt = ready_work ? &claim : &reconcile_claim;
	Jsonb	   *pin = runs ? DurableVersionsRuns(runs) : NULL;
	int32	   *order = NULL;
	DurableNodeWalk walk;
	bool		asked_a_node = false;
	bool		rate_limited;

	DurableQueueGet(queue, &settings);
	DurableCheckRestrictedQueue(queue, settings.restricted, DURABLE_PRIV_WORK);
	/* in a queue whose tasks name rate limits, the claim chooses */
	rate_limited = ready_work && settings.rate_limited;
	/*
	 * On Citus the record is on the node of the queue's workers, most often
	 * another than the claim's: it is kept where the review of a
	 * version_timeout needs it, or the worker says what it runs.
	 */
	if (ready_work && (!DurableDistributed() || runs != NULL ||
					   settings.has_version_timeout))
		DurableRecordWorker(queue, worker, runs, now);
	if (settings.paused)
		return 0;

	memset(nulls, ' ', sizeof(nulls));
	/* in a queue with a concurrency limit, each key's running tasks count */
	if (ready_work && settings.concurrency_limit > 0)
	{
		stmt = DurableDistributed() ? &claim_limited_here : &claim_limited;
		args[CLAIM_PARTITIONS] = PointerGetDatum(DurableQueuePartitionArray(&settings));
		args[CLAIM_CONCURRENCY_LIMIT] = Int32GetDatum(settings.concurrency_limit);
	}

	args[CLAIM_QUEUE] = CStringGetTextDatum(queue);
	args[CLAIM_NOW] = TimestampTzGetDatum(now);
	args[CLAIM_WORKER] = CStringGetTextDatum(worker);
	args[CLAIM_LEASE] = IntervalPGetDatum(lease ? lease : &settings.lease);
	args[CLAIM_LEASE_UNTIL] = TimestampTzGetDatum(DurableTimePlus(now, lease ? lease : &settings.lease));
	args[CLAIM_ROLE] = CStringGetTextDatum(DurableCallerName());
	args[CLAIM_RUNS] = JsonbPGetDatum(runs);
	nulls[CLAIM_RUNS] = runs ? ' ' : 'n';
	args[CLAIM_PINS] = JsonbPGetDatum(pin);
	nulls[CLAIM_PINS] = nulls[CLAIM_RUNS];

	/* on Citus, this node's partitions first, then node by node */
	if (ready_work && DurableDistributed())
		order = DurableClaimOrder(&settings, next_claim_partition++ + (uint32) MyProcPid,
								  &walk);

	for (int i = 0; i < settings.partitions && claimed < batch; i++)
	{
		int32		partition = order ? order[i] :
			DurableQueuePartition(&settings,
								  (int) (next_claim_partition++ % (uint32) settings.partitions));
		int			wanted = batch - claimed;
		DurableResult res;
		uint64		n;
		bool		expired = true;
		bool		one_directly = stmt == &claim && wanted == 1 && runs == NULL &&
			!rate_limited;

		/*
		 * The first other node's partitions, in one call there
		 * (claim_node.c).  The call makes the node a writer of the
		 * transaction, so the nodes after it are read first, as below.
		 */
		if (order && one_directly && !asked_a_node &&
			!DurableClaimWalkHere(&walk, i) && DurableClaimInNodeReady())
		{
			DurableNodeClaim found;

			i = DurableClaimInNode(&settings, &walk, i, args, store, desc, &found);
			asked_a_node = found.asked;
			claimed += found.claimed;
			for (int k = 0; k < found.nby_statement && claimed < batch; k++)
			{
				args[CLAIM_PARTITION] = Int32GetDatum(found.by_statement[k]);
				args[CLAIM_BATCH] = Int32GetDatum(1);
				res = DurableRun(&DurableClaimOneStatement, args, nulls,
								 SPI_OK_UPDATE_RETURNING, 0);
				DurableClaimPut(res, queue, now, store, desc);
				claimed += (int) res.rows;
			}
			for (int k = 0; k < found.nexpired; k++)
				DurableReconcilePartition(found.expired[k], NULL, now, wanted, NULL, NULL);
			continue;
		}
		if (DurablePartitionPaused(&settings, partition))
			continue;
		args[CLAIM_PARTITION] = Int32GetDatum(partition);
		args[CLAIM_BATCH] = Int32GetDatum(wanted);

		/*
		 * On Citus a statement that locks rows makes its node a participant
		 * of the transaction even where it takes none, and two participants
		 * commit in two phases: a partition is first read, and locked only
		 * when it has work.  A node that is down is left out: the first
		 * read there is the one that finds out.  Here, the claim of one
		 * task looks for it itself.
		 */
		if (order && !(one_directly && DurableClaimWalkHere(&walk, i)))
		{
			bool		ready;

			if (!DurableClaimProbe(&walk, i, args[CLAIM_PARTITION], args[CLAIM_QUEUE],
								   args[CLAIM_NOW], &ready, &expired))
				continue;
			if (!ready)
			{
				if (expired)
					DurableReconcilePartition(partition, NULL, now, wanted, NULL, NULL);
				continue;
			}
		}
		if (stmt != &claim && stmt != &reconcile_claim)
			hold_keys(args, nulls, DurableQueuePartition(&settings, 0));
		if (rate_limited)
		{
			int			n = DurableClaimRateLimited(stmt != &claim, args, nulls, wanted,
													queue, worker, now, store, desc);

			claimed += n;
			if (n < wanted && expired)
				DurableReconcilePartition(partition, NULL, now, wanted, NULL, NULL);
			continue;
		}
		if (one_directly)
		{
			Datum		values[DURABLE_CLAIMED_NCOLUMNS];
			bool		isnull[DURABLE_CLAIMED_NCOLUMNS];

			switch (DurableClaimOneDirectly(partition, args[CLAIM_QUEUE], now,
											args[CLAIM_WORKER], args[CLAIM_LEASE],
											args[CLAIM_LEASE_UNTIL], args[CLAIM_ROLE],
											values, isnull))
			{
				case DURABLE_DIRECT_DONE:
					DurableObserve(queue, DURABLE_HIST_QUEUE_LATENCY,
								   now - DatumGetTimestampTz(values[DURABLE_CLAIMED_RUN_AT]));
					tuplestore_putvalues(store, desc, values, isnull);
					claimed++;
					continue;
				case DURABLE_DIRECT_NONE:
					if (order && DurableClaimWalkHere(&walk, i))
						expired = DurableExpiredHere(args[CLAIM_PARTITION], args[CLAIM_NOW]);
					if (expired)
						DurableReconcilePartition(partition, NULL, now, wanted, NULL, NULL);
					continue;
				case DURABLE_DIRECT_BY_STATEMENT:
					break;
			}
		}
		if (stmt == &claim && wanted == 1)
			res = DurableRun(&DurableClaimOneStatement, args, nulls,
							 SPI_OK_UPDATE_RETURNING, 0);
		else
			res = DurableRun(stmt, args, nulls, SPI_OK_SELECT, 0);
		n = res.rows;
		if (ready_work)
			DurableClaimPut(res, queue, now, store, desc);
		else
			for (uint64 row = 0; row < n; row++)
				tuplestore_puttuple(store, DurableGetRow(res, row));
		claimed += (int) n;

		if (ready_work && (int) n < wanted && expired)
			DurableReconcilePartition(partition, NULL, now, wanted, NULL, NULL);
	}
	if (ready_work)
		DurableCount(queue, DURABLE_COUNT_CLAIMED, claimed);
	return claimed;
}

/*
 * DurableReleaseTask
 *		Give a claimed task back: READY again with fence + 1, the claim's
 *		attempt given back, an event 'released' with the reason (or NULL).
 *		Refused (55U04) while a step is started or unknown; 55U01 for a
 *		stale fence, 42704 for an unknown task.
 */
void
DurableReleaseTask(int64 task_id, int64 fence, const char *reason)
{
	DurableTask task;
	DurableStep step;
	DurableMove move = {0};
	DurableDetail detail;

	DurableTaskHeld(task_id, fence, &task);
	if (DurableStepInDoubt(&task, &step))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("task %lld cannot be released while step \"%s\" is %s",
					   (long long) task_id, step.name, DurableStepStateName(step.state)),
				errdetail("A step that was started and not committed may have taken effect."),
				errhint("Leave the task: when its lease runs out the recovery table judges step \"%s\". Or settle the step first (commit it, record a receipt, or durable_fail(..., step => '%s')).",
						step.name, step.name));

	DurableDetailInit(&detail);
	if (reason)
		DurableDetailText(&detail, "reason", reason);
	DurableDetailInt(&detail, "attempt_given_back", task.attempt);
	move.from_state = DURABLE_TASK_RUNNING;
	move.fence = fence;
	move.to_state = DURABLE_TASK_READY;
	move.revoke = true;
	move.give_back_attempt = true;
	move.kind = "released";
	move.detail = DurableDetailFinish(&detail);
	DurableMoveTaskFenced(task_id, &move, GetCurrentTransactionStartTimestamp());
}
