/*-------------------------------------------------------------------------
 *
 * reconcile.c
 *	  Settling expired leases through the recovery table.
 *
 * One routine serves durable_reconcile(), the claims that find expired
 * leases in their partition, and the background worker.  It works
 * partition by partition, taking a bounded batch of expired leases with
 * FOR NO KEY UPDATE SKIP LOCKED: two reconcilers, or a reconciler and a
 * late commit, never both win, since the commit's fenced UPDATE re-checks
 * the fence after waiting for the reconciler's row lock, and a reconciler
 * skips a row that a commit holds.
 *
 * Every decision revokes the lease (increments the fence) and appends an
 * event with the action and its evidence.  Nothing is deleted to recover;
 * retention removes finished tasks, with their steps and events, a whole
 * day of history at a time once it is older than durable.retention
 * (durable.maintain_history, which also makes the coming days).
 *
 * A tick (DurableReconcileTick) is what the background worker runs in one
 * transaction and durable_reconcile() exposes: expired leases, stuck
 * alarms, retention, each a bounded batch per pass.
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/xact.h"
#include "commands/async.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

/* columns of STMT_EXPIRED */
enum
{
	EXPIRED_TASK_ID = 1,
	EXPIRED_FENCE,
	EXPIRED_ATTEMPT,
	EXPIRED_MAX_ATTEMPTS,
	EXPIRED_CLASS,
	EXPIRED_OWNER,
	EXPIRED_LEASE_UNTIL,
	EXPIRED_RETRY_BASE,
	EXPIRED_RETRY_CAP,
	EXPIRED_QUEUE,
	EXPIRED_RETRY_LIMITED,
	EXPIRED_STEPS_IN_DOUBT,
	EXPIRED_RUN_AT
};

#define DURABLE_RECONCILER_ACTOR "durable reconciler"

/* copy an expired lease out of the SPI result, which the next statement replaces */
static void
read_expired(uint64 row, DurableTask *task, int32 partition)
{
	bool		isnull;

	task->partition = partition;
	task->task_id = DurableResultInt64(row, EXPIRED_TASK_ID);
	task->state = "running";
	task->fence = DurableResultInt64(row, EXPIRED_FENCE);
	task->attempt = (int32) DurableResultInt64(row, EXPIRED_ATTEMPT);
	task->max_attempts = (int32) DurableResultInt64(row, EXPIRED_MAX_ATTEMPTS);
	task->created_at = 0;
	task->deadline = DURABLE_NO_DEADLINE;
	task->class = DurableResultText(row, EXPIRED_CLASS);
	task->owner = DurableResultText(row, EXPIRED_OWNER);
	task->lease_until = DatumGetTimestampTz(DurableResultDatum(row, EXPIRED_LEASE_UNTIL, &isnull));
	task->retry_base = (int32) DurableResultInt64(row, EXPIRED_RETRY_BASE);
	task->retry_cap = (int32) DurableResultInt64(row, EXPIRED_RETRY_CAP);
	task->queue = DurableResultText(row, EXPIRED_QUEUE);
	task->retry_limited = DatumGetBool(DurableResultDatum(row, EXPIRED_RETRY_LIMITED, &isnull));
	task->steps_in_doubt = (int32) DurableResultInt64(row, EXPIRED_STEPS_IN_DOUBT);
	task->run_at = DatumGetTimestampTz(DurableResultDatum(row, EXPIRED_RUN_AT, &isnull));
	task->version = 0;			/* not needed: events number themselves */
	task->checkpoint_version = 0;
	task->restricted = false;	/* the reconciler acts for every role */
}

/*
 * settle_expired
 *		Decide and apply the recovery of one expired lease, whose row the
 *		caller holds locked: every step in doubt is judged and settled, and
 *		the task takes the most cautious action of them (recovery.c); with
 *		no step in doubt, the task's own class and attempts decide.  Returns
 *		the action taken.
 */
static DurableRecoveryAction
settle_expired(DurableTask *task, TimestampTz now)
{
	DurableVerdict verdict;
	bool		has_step = false;
	const char *class_name = task->class;
	const char *receipt = NULL;
	int32		attempt = task->attempt;
	DurableMove move = {0};
	DurableDetail detail;

	DurableDetailInit(&detail);
	if (task->steps_in_doubt > 0)
		has_step = DurableJudgeSteps(task, NULL, true, DURABLE_RECONCILER_ACTOR,
									 now, &detail, &verdict);
	if (has_step)
	{
		const DurableStep *step = &verdict.deciding;

		class_name = step->class;
		receipt = step->receipt;
		attempt = step->attempt;
		DurableDetailText(&detail, "step", step->name);
		DurableDetailText(&detail, "step_state", step->state);
		DurableDetailText(&detail, "idempotency_key", step->idempotency_key);
	}
	else
	{
		DurableJudgeTask(task, &verdict);
		DurableDetailText(&detail, "step", NULL);
	}
	DurableDetailText(&detail, "action", DurableRecoveryActionName(verdict.action));
	DurableDetailText(&detail, "owner", task->owner);
	DurableDetailTime(&detail, "lease_until", task->lease_until);
	DurableDetailText(&detail, "class", class_name);
	DurableDetailText(&detail, "receipt", receipt);
	DurableDetailInt(&detail, "attempt", attempt);
	DurableDetailInt(&detail, "max_attempts", task->max_attempts);

	move.from_state = "running";
	move.fence = task->fence;
	move.revoke = true;
	move.allow_doubt = true;
	move.kind = "lease_expired";
	move.actor = DURABLE_RECONCILER_ACTOR;
	DurableVerdictMove(task, &verdict, now, &detail, &move);
	move.detail = DurableDetailFinish(&detail);

	DurableMoveLockedTask(task, &move, now);
	return verdict.action;
}

/*
 * DurableReconcilePartition
 *		Settle up to batch expired leases of one partition.  Returns how
 *		many were settled; callback, when given, hears of each.
 */
uint64
DurableReconcilePartition(int32 partition, TimestampTz now, int batch,
						  DurableSettledCallback callback, void *arg)
{
	Datum		args[3];
	uint64		n;
	DurableTask *tasks;

	args[0] = Int32GetDatum(partition);
	args[1] = TimestampTzGetDatum(now);
	args[2] = Int32GetDatum(batch);
	n = DurableExecute(STMT_EXPIRED, args, NULL, SPI_OK_SELECT, 0);
	if (n == 0)
		return 0;

	tasks = palloc(sizeof(DurableTask) * n);
	for (uint64 i = 0; i < n; i++)
		read_expired(i, &tasks[i], partition);

	for (uint64 i = 0; i < n; i++)
	{
		DurableRecoveryAction action = settle_expired(&tasks[i], now);

		if (callback)
			callback(tasks[i].task_id, DurableRecoveryActionName(action), arg);
	}
	pfree(tasks);
	return n;
}

/* the partitions in use, in a palloc'd array */
static int32 *
partitions_in_use(uint64 *count)
{
	int32	   *partitions;

	/*
	 * On Citus, each node's reconciler works on the shards it holds; a call
	 * of durable_reconcile() works on all of them, wherever it runs.
	 */
	*count = DurableExecute(DurableDistributed() && MyBackendType == B_BG_WORKER ?
							STMT_PARTITIONS_LOCAL : STMT_PARTITIONS,
							NULL, NULL, SPI_OK_SELECT, 0);
	partitions = palloc(sizeof(int32) * Max(*count, 1));
	for (uint64 i = 0; i < *count; i++)
		partitions[i] = (int32) DurableResultInt64(i, 1);
	return partitions;
}

/*
 * raise_stuck_alarms
 *		A lease that keeps being renewed while its progress does not move
 *		for longer than the queue's progress_timeout gets one alarm per
 *		episode: an event, NOTIFY durable_stuck '<task_id>', and the mark
 *		that the stuck_tasks view counts.  Nothing else changes: a heartbeat
 *		is not progress, but neither is it a failure.
 */
static uint64
raise_stuck_alarms(int32 partition, TimestampTz now, int batch,
				   DurableSettledCallback callback, void *arg)
{
	Datum		args[3];
	uint64		n;
	int64	   *ids;
	Jsonb	  **details;

	args[0] = Int32GetDatum(partition);
	args[1] = TimestampTzGetDatum(now);
	args[2] = Int32GetDatum(batch);
	n = DurableExecute(STMT_STUCK, args, NULL, SPI_OK_SELECT, 0);
	if (n == 0)
		return 0;

	ids = palloc(sizeof(int64) * n);
	details = palloc(sizeof(Jsonb *) * n);
	for (uint64 i = 0; i < n; i++)
	{
		DurableDetail detail;
		bool		isnull;

		ids[i] = DurableResultInt64(i, 1);
		DurableDetailInit(&detail);
		DurableDetailText(&detail, "progress", DurableResultText(i, 2));
		DurableDetailTime(&detail, "progress_at",
						  DatumGetTimestampTz(DurableResultDatum(i, 3, &isnull)));
		DurableDetailText(&detail, "owner", DurableResultText(i, 4));
		DurableDetailText(&detail, "progress_timeout", DurableResultText(i, 5));
		details[i] = DurableDetailFinish(&detail);
	}

	for (uint64 i = 0; i < n; i++)
	{
		DurableTask task = {0};
		Datum		mark[3];
		char		payload[32];

		task.task_id = ids[i];
		mark[0] = Int32GetDatum(partition);
		mark[1] = Int64GetDatum(ids[i]);
		mark[2] = TimestampTzGetDatum(now);
		DurableExecute(STMT_STUCK_MARK, mark, NULL, SPI_OK_UPDATE, 0);
		DurableAppendEvent(&task, now, "stuck", DURABLE_RECONCILER_ACTOR,
						   details[i], NULL, 0);
		snprintf(payload, sizeof(payload), INT64_FORMAT, ids[i]);
		Async_Notify(DURABLE_STUCK_CHANNEL, payload);
		if (callback)
			callback(ids[i], "stuck_alarm", arg);
	}
	return n;
}

/* subtract seconds from a time, for retention cutoffs */
static TimestampTz
seconds_before(TimestampTz t, int seconds)
{
	return t - (TimestampTz) seconds * USECS_PER_SEC;
}

/*
 * apply_retention
 *		Make the coming days of history and remove what is older than
 *		durable.retention (durable.maintain_history): whole days of finished
 *		tasks, and up to batch tasks kept outside them; then up to batch
 *		each of events emitted (or only awaited) before that, of inbox
 *		entries and published outbox messages older than
 *		durable.inbox_retention and of expired idempotency keys.  Returns
 *		the largest of those counts.
 */
static uint64
apply_retention(TimestampTz now, int batch, DurableSettledCallback callback,
				void *arg)
{
	uint64		removed;
	uint64		others = 0;
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};

	/*
	 * On Citus, the coordinator removes expired inbox entries, outbox
	 * messages and request keys by statements on every shard.  History is
	 * not maintained there yet: its days are made by DDL, which only the
	 * coordinator may run, and its retention locks rows in statements on
	 * many shards, which Citus refuses.  Finished tasks stay in the default
	 * partitions.
	 */
	if (DurableCitusWorker())
		return 0;
	if (DurableDistributed())
	{
		args[0] = TimestampTzGetDatum(durable_inbox_retention >= 0 ?
									  seconds_before(now, durable_inbox_retention) :
									  DT_NOBEGIN);
		args[1] = TimestampTzGetDatum(now);
		DurableExecute(STMT_RETAIN_OTHERS_ALL, args, NULL, SPI_OK_SELECT, 1);
		for (int col = 1; col <= 3; col++)
			others = Max(others, (uint64) DurableResultInt64(0, col));
		return others;
	}

	args[0] = TimestampTzGetDatum(now);
	args[1] = Int32GetDatum(durable_retention);
	nulls[1] = durable_retention >= 0 ? ' ' : 'n';
	args[2] = Int32GetDatum(batch);
	removed = DurableExecute(STMT_MAINTAIN_HISTORY, args, nulls, SPI_OK_SELECT, 0);
	for (uint64 row = 0; row < removed && callback; row++)
	{
		bool		isnull;
		Datum		id = DurableResultDatum(row, 1, &isnull);

		callback(isnull ? 0 : DatumGetInt64(id), DurableResultText(row, 2), arg);
	}

	/* the events awaited or emitted before retention's horizon */
	if (durable_retention >= 0)
	{
		Datum		events[2];

		events[0] = TimestampTzGetDatum(seconds_before(now, durable_retention));
		events[1] = Int32GetDatum(batch);
		others = DurableExecute(STMT_RETAIN_EVENTS, events, NULL, SPI_OK_DELETE, 0);
	}

	args[0] = TimestampTzGetDatum(durable_inbox_retention >= 0 ?
								  seconds_before(now, durable_inbox_retention) :
								  DT_NOBEGIN);
	args[1] = TimestampTzGetDatum(now);
	args[2] = Int32GetDatum(batch);
	DurableExecute(STMT_RETAIN_OTHERS, args, NULL, SPI_OK_SELECT, 1);
	for (int col = 1; col <= 3; col++)
		others = Max(others, (uint64) DurableResultInt64(0, col));
	return Max(removed, others);
}

/*
 * What a tick does on Citus in a subtransaction of its own (on_citus).
 */
typedef struct CitusWork
{
	int32		partition;		/* or one of these: */
#define CITUS_WORK_RETENTION (-1)
#define CITUS_WORK_SCHEDULES (-2)
	TimestampTz now;
	int			batch;
	DurableSettledCallback callback;
	void	   *arg;
} CitusWork;

static uint64
do_citus_work(const CitusWork *work)
{
	if (work->partition == CITUS_WORK_RETENTION)
		return apply_retention(work->now, work->batch, work->callback, work->arg);
	if (work->partition == CITUS_WORK_SCHEDULES)
		return DurableRunSchedules(work->now, work->batch, work->callback, work->arg);
	return DurableReconcilePartition(work->partition, work->now, work->batch,
									 work->callback, work->arg);
}

/*
 * DurableNodeUnreachable
 *		Whether an error says that a Citus node could not be reached: SQLSTATE
 *		class 08, or one of Citus's failures on its connections, which carry
 *		no SQLSTATE of their own.
 */
bool
DurableNodeUnreachable(const ErrorData *edata)
{
	return ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_CONNECTION_EXCEPTION ||
		strncmp(edata->message, "failure on connection", 21) == 0 ||
		strncmp(edata->message, "connection to the remote node", 29) == 0;
}

/*
 * on_citus
 *		A part of the tick in a subtransaction, so that a part that fails
 *		does not stop the others: a partition whose shard's node is down,
 *		retention or the schedules while any node is.  The part is tried
 *		again at the next tick.  A node that cannot be reached is waited for
 *		quietly, at DEBUG1; anything else is a WARNING.
 *
 *		Only on Citus: on one server a part fails only with the whole
 *		database, and the tick's retries owe their tokens to its end in its
 *		own (sub)transaction (budget.c), which on Citus they take at once
 *		instead.
 */
static uint64
on_citus(const CitusWork *work)
{
	MemoryContext context = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile uint64 done = 0;

	if (!DurableDistributed())
		return do_citus_work(work);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(context);
	PG_TRY();
	{
		done = do_citus_work(work);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(context);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
		ereport(DurableNodeUnreachable(edata) ? DEBUG1 : WARNING,
				errcode(edata->sqlerrcode),
				work->partition >= 0 ?
				errmsg("could not reconcile partition %d: %s", work->partition,
					   edata->message) :
				work->partition == CITUS_WORK_RETENTION ?
				errmsg("could not apply retention: %s", edata->message) :
				errmsg("could not run the schedules: %s", edata->message));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return done;
}

/*
 * DurableReconcileTick
 *		One tick of reconciliation: expired leases, stuck alarms, retention,
 *		the schedules that are due, each at most batch rows.  Returns the largest count, so that a caller
 *		can go again at once when a batch was full.
 */
uint64
DurableReconcileTick(int batch, DurableSettledCallback callback, void *arg)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	uint64		npartitions;
	int32	   *partitions = partitions_in_use(&npartitions);
	uint64		settled = 0;
	uint64		alarms = 0;
	uint64		removed;
	uint64		scheduled;

	/*
	 * Retries owe their tokens until the end of the tick, so that the
	 * queues' buckets are locked from then to the commit only (budget.c).
	 */
	DurableBeginRetryTokens();
	for (uint64 i = 0; i < npartitions && settled < (uint64) batch; i++)
	{
		CitusWork	work = {partitions[i], now, batch - (int) settled, callback, arg};

		settled += on_citus(&work);
	}
	for (uint64 i = 0; i < npartitions && alarms < (uint64) batch; i++)
		alarms += raise_stuck_alarms(partitions[i], now, batch - (int) alarms,
									 callback, arg);
	{
		CitusWork	work = {CITUS_WORK_RETENTION, now, batch, callback, arg};

		removed = on_citus(&work);
	}
	/* on Citus, the coordinator enqueues what the schedules owe */
	if (DurableCitusWorker())
		scheduled = 0;
	else
	{
		CitusWork	work = {CITUS_WORK_SCHEDULES, now, batch, callback, arg};

		scheduled = on_citus(&work);
	}
	DurableTakeOwedTokens(now);
	pfree(partitions);
	return Max(Max(settled, alarms), Max(removed, scheduled));
}

static void
report_settled(int64 task_id, const char *action, void *arg)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	/* a day of history dropped whole names no task */
	values[0] = Int64GetDatum(task_id);
	nulls[0] = task_id == 0;
	values[1] = CStringGetTextDatum(action);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * durable_reconcile(batch int = 1000) RETURNS TABLE(task_id bigint, action text)
 *
 * One tick of reconciliation, as the background worker runs it: settles up
 * to batch expired leases, raises up to batch stuck alarms, and removes up
 * to batch finished tasks past retention, and enqueues the occurrences of
 * up to batch schedules that are due; returns each task with what was done
 * ('removed', 'stuck_alarm' and 'scheduled' besides the recovery actions).
 */
PG_FUNCTION_INFO_V1(durable_reconcile);
Datum
durable_reconcile(PG_FUNCTION_ARGS)
{
	int32		batch = DurableBatchArg(fcinfo, 0);

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	DurableReconcileTick(batch, report_settled, fcinfo->resultinfo);
	SPI_finish();
	return (Datum) 0;
}
