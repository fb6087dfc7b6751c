/*-------------------------------------------------------------------------
 *
 * versions.c
 *	  Versions as a contract (docs/design.md section 15): what workers run, as
 *	  their claims say, explicit migrations of tasks to other versions, and
 *	  review of the tasks that no worker runs the versions of.
 *
 * A task is pinned to versions (pure/versions.c) at its enqueue or by its
 * first claim that says what its worker runs (claim.c); from then on only
 * a migration changes them, and it is an event naming the operator and
 * the evidence.  A migration ends a running task's lease (fence + 1, as a
 * release: the worker runs the old code) and fences off every task it
 * moves, so that a decision taken on the old versions cannot land.
 *
 * Every claim records its worker's last claim and what it said it runs in
 * durable.workers_seen, at most once a second per backend and worker, so
 * that a busy worker writes one row a second, not one a claim.  A ready
 * task that none of the workers seen in its queue's version_timeout runs
 * goes to review with its versions and the versions alive, for a person to
 * decide: the version it needs can no longer run.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* ---- workers' claims ---- */

/* a backend records a worker's claims in a queue at most this often */
#define WORKER_RECORD_INTERVAL USECS_PER_SEC
/* and forgets what it recorded past this many workers */
#define SEEN_WORKERS_MAX 1024

typedef struct SeenWorker
{
	uint8		key[PG_SHA256_DIGEST_LENGTH];	/* queue, worker, versions */
	TimestampTz recorded_at;
} SeenWorker;

static HTAB *seen_workers;

enum
{
	SEEN_QUEUE,
	SEEN_WORKER,
	SEEN_VERSIONS,
	SEEN_ROLE,
	SEEN_NOW,
	SEEN_NPARAMS
};
static const DurableParam worker_seen_params[SEEN_NPARAMS] = {
	[SEEN_QUEUE] = {"queue", TEXTOID},
	[SEEN_WORKER] = {"worker", TEXTOID},
	[SEEN_VERSIONS] = {"versions", JSONBOID},
	[SEEN_ROLE] = {"role", TEXTOID},
	[SEEN_NOW] = {"now", TIMESTAMPTZOID},
};
static DurableStatement worker_seen = {
	.name = "worker_seen",
	.sql = "INSERT INTO durable.workers_seen AS w (queue_name, worker, versions,"
	" role, first_claim_at, last_claim_at)"
	" VALUES ($queue, $worker, $versions, $role, $now, $now)"
	" ON CONFLICT (queue_name, worker) DO UPDATE SET versions = EXCLUDED.versions,"
	" role = EXCLUDED.role, last_claim_at = EXCLUDED.last_claim_at"
	" WHERE w.last_claim_at < EXCLUDED.last_claim_at"
	" OR w.versions IS DISTINCT FROM EXCLUDED.versions",
	DURABLE_PARAMS(worker_seen_params),
};

/*
 * DurableRecordWorker
 *		Record a claim of worker in queue, saying it runs runs (NULL: it did
 *		not say), unless this backend recorded the same less than
 *		WORKER_RECORD_INTERVAL ago.  On Citus durable.workers_seen is
 *		distributed by queue: a claim records on its queue's node, which
 *		makes it commit in two phases when that is another node (claim.c
 *		records there only what the review of a version_timeout reads).
 */
void
DurableRecordWorker(const char *queue, const char *worker, Jsonb *runs,
					TimestampTz now)
{
	StringInfoData id;
	SeenWorker *seen;
	bool		found;
	Datum		args[SEEN_NPARAMS];
	char		nulls[SEEN_NPARAMS] = {' ', ' ', ' ', ' ', ' '};
	uint8		key[PG_SHA256_DIGEST_LENGTH];

	if (seen_workers == NULL || hash_get_num_entries(seen_workers) >= SEEN_WORKERS_MAX)
	{
		HASHCTL		ctl = {0};

		if (seen_workers != NULL)
			hash_destroy(seen_workers);
		ctl.keysize = PG_SHA256_DIGEST_LENGTH;
		ctl.entrysize = sizeof(SeenWorker);
		seen_workers = hash_create("durable workers seen", 64, &ctl,
								   HASH_ELEM | HASH_BLOBS);
	}
	initStringInfo(&id);
	appendBinaryStringInfo(&id, queue, strlen(queue) + 1);
	appendBinaryStringInfo(&id, worker, strlen(worker) + 1);
	if (runs != NULL)
		appendBinaryStringInfo(&id, VARDATA(runs), VARSIZE(runs) - VARHDRSZ);
	DurableSha256(id.data, id.len, key);
	pfree(id.data);
	seen = hash_search(seen_workers, key, HASH_ENTER, &found);
	if (found && now >= seen->recorded_at &&
		now - seen->recorded_at < WORKER_RECORD_INTERVAL)
		return;

	args[SEEN_QUEUE] = CStringGetTextDatum(queue);
	args[SEEN_WORKER] = CStringGetTextDatum(worker);
	args[SEEN_VERSIONS] = JsonbPGetDatum(runs);
	nulls[SEEN_VERSIONS] = runs ? ' ' : 'n';
	args[SEEN_ROLE] = CStringGetTextDatum(DurableCallerName());
	args[SEEN_NOW] = TimestampTzGetDatum(now);
	DurableRun(&worker_seen, args, nulls, SPI_OK_INSERT, 0);
	seen->recorded_at = now;
}

/* ---- migrations ---- */

/* a live task's versions, and those a migration would give it */
enum
{
	PINNED_VERSIONS,
	PINNED_MIGRATED,
	PINNED_MATCHES,
	PINNED_STOP_CODE,
	PINNED_NCOLUMNS
};

static const DurableColumn pinned_columns[PINNED_NCOLUMNS] = {
	[PINNED_VERSIONS] = {"versions", JSONBOID},
	[PINNED_MIGRATED] = {"migrated", JSONBOID},
	[PINNED_MATCHES] = {"matches", BOOLOID},
	[PINNED_STOP_CODE] = {"stop_code", TEXTOID},
};

enum
{
	PINNED_PARTITION,
	PINNED_TASK_ID,
	PINNED_FROM,
	PINNED_TO,
	PINNED_NPARAMS
};
static const DurableParam task_pinned_params[PINNED_NPARAMS] = {
	[PINNED_PARTITION] = {"partition", INT4OID},
	[PINNED_TASK_ID] = {"task_id", INT8OID},
	[PINNED_FROM] = {"from", JSONBOID},
	[PINNED_TO] = {"to", JSONBOID},
};

static DurableStatement task_pinned = {
	.name = "task_pinned",
	.sql = "SELECT versions, COALESCE(versions, '{}') || $to AS migrated,"
	" COALESCE(versions, '{}') @> $from AS matches, stop_code"
	" FROM durable.live_tasks"
	" WHERE partition_key = $partition AND task_id = $task_id",
	DURABLE_PARAMS(task_pinned_params),
	DURABLE_COLUMNS(pinned_columns),
};

enum
{
	PIN_PARTITION,
	PIN_TASK_ID,
	PIN_VERSIONS,
	PIN_NPARAMS
};
static const DurableParam task_pin_params[PIN_NPARAMS] = {
	[PIN_PARTITION] = {"partition", INT4OID},
	[PIN_TASK_ID] = {"task_id", INT8OID},
	[PIN_VERSIONS] = {"versions", JSONBOID},
};

static DurableStatement task_pin = {
	.name = "task_pin",
	.sql = "UPDATE durable.live_tasks SET versions = $versions,"
	" workflow_version = $versions ->> 'workflow'"
	" WHERE partition_key = $partition AND task_id = $task_id",
	DURABLE_PARAMS(task_pin_params),
};

/* the unfinished tasks of a queue that a migration would move */
enum
{
	MIGRATABLE_TASK_ID,
	MIGRATABLE_NCOLUMNS
};

static const DurableColumn migratable_columns[MIGRATABLE_NCOLUMNS] = {
	[MIGRATABLE_TASK_ID] = {"task_id", INT8OID},
};

enum
{
	MIGRATABLE_PARTITIONS,
	MIGRATABLE_QUEUE,
	MIGRATABLE_FROM,
	MIGRATABLE_TO,
	MIGRATABLE_BATCH,
	MIGRATABLE_NPARAMS
};
static const DurableParam queue_migratable_params[MIGRATABLE_NPARAMS] = {
	[MIGRATABLE_PARTITIONS] = {"partitions", INT4ARRAYOID},
	[MIGRATABLE_QUEUE] = {"queue", TEXTOID},
	[MIGRATABLE_FROM] = {"from", JSONBOID},
	[MIGRATABLE_TO] = {"to", JSONBOID},
	[MIGRATABLE_BATCH] = {"batch", INT4OID},
};

static DurableStatement queue_migratable = {
	.name = "queue_migratable",
	.sql = "SELECT task_id FROM durable.live_tasks"
	" WHERE partition_key = ANY ($partitions) AND queue_name = $queue"
	" AND COALESCE(versions, '{}') @> $from"
	" AND NOT COALESCE(versions, '{}') @> $to"
	" ORDER BY task_id LIMIT $batch",
	DURABLE_PARAMS(queue_migratable_params),
	DURABLE_COLUMNS(migratable_columns),
};

static void
report_migrated(const DurableMigration *m, int64 task_id, const char *state,
				Jsonb *from, Jsonb *to, const char *action)
{
	if (m->report != NULL)
		m->report(task_id, state, from, to, action, m->arg);
}

/*
 * migrate_locked
 *		Migrate one task whose row the caller has locked (DurableTaskFetch),
 *		or say what would happen (m->dry_run).  A task in doubt is refused
 *		with 55U04 when refuse_doubt, else reported as 'in_doubt'.  Returns
 *		whether it was (or would be) migrated.
 */
static bool
migrate_locked(DurableTask *task, const DurableMigration *m, bool refuse_doubt,
			   TimestampTz now)
{
	DurableResult res;
	Datum		args[PINNED_NPARAMS];
	Datum		pin[PIN_NPARAMS];
	Jsonb	   *old;
	Jsonb	   *migrated;
	const char *stop_code;
	bool		isnull;
	DurableDetail detail;
	DurableMove move = {0};
	bool		stays = false;

	args[PINNED_PARTITION] = Int32GetDatum(task->partition);
	args[PINNED_TASK_ID] = Int64GetDatum(task->task_id);
	args[PINNED_FROM] = JsonbPGetDatum(m->from);
	args[PINNED_TO] = JsonbPGetDatum(m->to);
	/* the caller locked a live task: it cannot have left the live table */
	res = DurableRun(&task_pinned, args, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 0)
		elog(ERROR, "task %lld left durable.live_tasks under its row lock",
			 (long long) task->task_id);
	old = DurableGetIsNull(res, 0, PINNED_VERSIONS) ? NULL :
		DatumGetJsonbPCopy(DurableGetDatum(res, 0, PINNED_VERSIONS, &isnull));
	migrated = DatumGetJsonbPCopy(DurableGetDatum(res, 0, PINNED_MIGRATED, &isnull));
	stop_code = DurableGetText(res, 0, PINNED_STOP_CODE);
	if (!DurableGetBool(res, 0, PINNED_MATCHES))
	{
		DurableCountNow(task->queue, DURABLE_COUNT_VERSION_CONFLICTS);
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_VERSION_MISMATCH),
				errmsg("task %lld does not run under the versions to migrate from",
					   (long long) task->task_id),
				errdetail("It is pinned to %s; the migration is from %s.",
						  old ? JsonbToCString(NULL, &old->root, VARSIZE(old)) : "no versions",
						  JsonbToCString(NULL, &m->from->root, VARSIZE(m->from))),
				errhint("Name versions the task is pinned to (durable.tasks.versions), or '{}' for any."));
	}
	if (task->steps_in_doubt > 0)
	{
		DurableStep step;

		if (!refuse_doubt)
		{
			report_migrated(m, task->task_id, DurableTaskStateName(task->state),
							old, migrated, "in_doubt");
			return false;
		}
		DurableStepInDoubt(task, &step);
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("task %lld cannot be migrated while step \"%s\" is %s",
					   (long long) task->task_id, step.name, DurableStepStateName(step.state)),
				errdetail("Whether the step took effect is not known; new code would decide it on other evidence."),
				errhint("Settle the step first (a receipt, or durable_resolve() in review), then migrate."));
	}
	if (m->dry_run)
	{
		report_migrated(m, task->task_id, DurableTaskStateName(task->state),
						old, migrated, "would_migrate");
		return true;
	}

	DurableDetailInit(&detail);
	DurableDetailText(&detail, "operator", m->operator_name);
	DurableDetailJsonb(&detail, "from", old);
	DurableDetailJsonb(&detail, "to", migrated);
	DurableDetailJsonb(&detail, "evidence", m->evidence);
	DurableDetailText(&detail, "previous_state", DurableTaskStateName(task->state));
	move.kind = "migrated";
	move.actor = m->operator_name;
	move.from_state = task->state;
	move.fence = task->fence;
	move.revoke = true;
	if (task->state == DURABLE_TASK_RUNNING)
	{
		/* the worker runs the old code: the task goes back, as a release */
		move.to_state = DURABLE_TASK_READY;
		move.run_at = now;
		move.give_back_attempt = true;
	}
	else if (task->state == DURABLE_TASK_NEEDS_REVIEW &&
			 stop_code != NULL && strcmp(stop_code, "version_unavailable") == 0)
	{
		/* the decision review waited for */
		move.to_state = DURABLE_TASK_READY;
		move.run_at = now;
	}
	else if (task->state == DURABLE_TASK_NEEDS_REVIEW)
		stays = true;			/* in review for its own reason */
	else
		move.to_state = task->state;

	if (stays)
		task->version = DurableAppendEvent(task, now, "migrated", m->operator_name,
										   DurableDetailFinish(&detail), NULL, 0);
	else
	{
		move.stop_code = move.to_state == task->state ? stop_code : NULL;
		move.detail = DurableDetailFinish(&detail);
		DurableMoveLockedTask(task, &move, now);
	}
	pin[PIN_PARTITION] = Int32GetDatum(task->partition);
	pin[PIN_TASK_ID] = Int64GetDatum(task->task_id);
	pin[PIN_VERSIONS] = JsonbPGetDatum(migrated);
	DurableRun(&task_pin, pin, NULL, SPI_OK_UPDATE, 1);
	DurableCount(task->queue, DURABLE_COUNT_MIGRATED, 1);
	report_migrated(m, task->task_id,
					DurableTaskStateName(stays ? task->state : move.to_state),
					old, migrated, "migrated");
	return true;
}

/*
 * DurableMigrateTask
 *		Migrate one task (durable_migrate(task_id, ...)): 42704 for no such
 *		task, 55U04 for a finished one or one with a step in doubt, 55U02
 *		when it is not pinned to m->from.
 */
void
DurableMigrateTask(int64 task_id, const DurableMigration *m)
{
	DurableTask task;

	DurableTaskFetchOrError(task_id, true, &task);
	if (DurableTaskIsTerminal(task.state))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("task %lld is %s and cannot be migrated",
					   (long long) task_id, DurableTaskStateName(task.state)),
				errhint("Only an unfinished task runs under versions; replay a failed one with durable_replay_dead_letters() and migrate it then."));
	migrate_locked(&task, m, true, GetCurrentTransactionStartTimestamp());
}

/*
 * DurableMigrateQueue
 *		Migrate up to batch unfinished tasks of a queue pinned to m->from
 *		(and not yet to m->to), lowest id first; a task with a step in doubt
 *		is reported, not moved.  Returns how many were (or would be)
 *		migrated.
 */
uint64
DurableMigrateQueue(const char *queue, int32 batch, const DurableMigration *m)
{
	DurableResult res;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableQueue settings;
	Datum		args[MIGRATABLE_NPARAMS];
	uint64		n;
	uint64		migrated = 0;
	int64	   *ids;

	DurableQueueGet(queue, &settings);
	args[MIGRATABLE_PARTITIONS] = PointerGetDatum(DurableQueuePartitionArray(&settings));
	args[MIGRATABLE_QUEUE] = CStringGetTextDatum(queue);
	args[MIGRATABLE_FROM] = JsonbPGetDatum(m->from);
	args[MIGRATABLE_TO] = JsonbPGetDatum(m->to);
	args[MIGRATABLE_BATCH] = Int32GetDatum(batch);
	res = DurableRun(&queue_migratable, args, NULL, SPI_OK_SELECT, 0);
	n = res.rows;
	ids = palloc(sizeof(int64) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
		ids[i] = DurableGetInt64(res, i, MIGRATABLE_TASK_ID);
	for (uint64 i = 0; i < n; i++)
	{
		DurableTask task;

		/* one that finished meanwhile is no longer the migration's */
		if (!DurableTaskFetch(ids[i], true, &task) ||
			DurableTaskIsTerminal(task.state))
			continue;
		if (migrate_locked(&task, m, false, now))
			migrated++;
	}
	return migrated;
}

/* ---- tasks no worker runs ---- */

/* the queues with a version_timeout, not paused */
enum
{
	VQUEUE_NAME,
	VQUEUE_NCOLUMNS
};

static const DurableColumn vqueue_columns[VQUEUE_NCOLUMNS] = {
	[VQUEUE_NAME] = {"queue_name", TEXTOID},
};

static DurableStatement versioned_queues = {
	.name = "versioned_queues",
	.sql = "SELECT queue_name FROM durable.queues"
	" WHERE version_timeout IS NOT NULL AND NOT paused ORDER BY queue_name",
	.nargs = 0,
	DURABLE_COLUMNS(vqueue_columns),
};

/* what the workers alive in a queue run: those seen since $since */
enum
{
	ALIVE_RUNS,
	ALIVE_LIST,
	ALIVE_ANY,
	ALIVE_NCOLUMNS
};

static const DurableColumn alive_columns[ALIVE_NCOLUMNS] = {
	[ALIVE_RUNS] = {"runs", JSONBARRAYOID},
	[ALIVE_LIST] = {"list", JSONBOID},
	[ALIVE_ANY] = {"any", BOOLOID},
};

enum
{
	ALIVE_QUEUE,
	ALIVE_SINCE,
	ALIVE_NPARAMS
};
static const DurableParam workers_alive_params[ALIVE_NPARAMS] = {
	[ALIVE_QUEUE] = {"queue", TEXTOID},
	[ALIVE_SINCE] = {"since", TIMESTAMPTZOID},
};

static DurableStatement workers_alive = {
	.name = "workers_alive",
	.sql = "SELECT COALESCE(pg_catalog.array_agg(DISTINCT versions)"
	"  FILTER (WHERE versions IS NOT NULL), '{}') AS runs,"
	" COALESCE(pg_catalog.jsonb_agg(DISTINCT versions)"
	"  FILTER (WHERE versions IS NOT NULL), '[]') AS list,"
	" pg_catalog.bool_or(versions IS NULL) IS TRUE AS any"
	" FROM durable.workers_seen"
	" WHERE queue_name = $queue AND last_claim_at > $since",
	DURABLE_PARAMS(workers_alive_params),
	DURABLE_COLUMNS(alive_columns),
};

/*
 * The ready tasks at the front of a partition's claim order ($batch of
 * them: those that no worker takes stay there) due since $since or before,
 * pinned to versions that none of the runs of $runs runs.
 */
enum
{
	UNRUNNABLE_TASK_ID,
	UNRUNNABLE_VERSIONS,
	UNRUNNABLE_NCOLUMNS
};

static const DurableColumn unrunnable_columns[UNRUNNABLE_NCOLUMNS] = {
	[UNRUNNABLE_TASK_ID] = {"task_id", INT8OID},
	[UNRUNNABLE_VERSIONS] = {"versions", JSONBOID},
};

enum
{
	UNRUNNABLE_PARTITION,
	UNRUNNABLE_QUEUE,
	UNRUNNABLE_NOW,
	UNRUNNABLE_SINCE,
	UNRUNNABLE_BATCH,
	UNRUNNABLE_RUNS,
	UNRUNNABLE_NPARAMS
};
static const DurableParam unrunnable_params[UNRUNNABLE_NPARAMS] = {
	[UNRUNNABLE_PARTITION] = {"partition", INT4OID},
	[UNRUNNABLE_QUEUE] = {"queue", TEXTOID},
	[UNRUNNABLE_NOW] = {"now", TIMESTAMPTZOID},
	[UNRUNNABLE_SINCE] = {"since", TIMESTAMPTZOID},
	[UNRUNNABLE_BATCH] = {"batch", INT4OID},
	[UNRUNNABLE_RUNS] = {"runs", JSONBARRAYOID},
};

static DurableStatement unrunnable = {
	.name = "unrunnable",
	.sql = "SELECT c.task_id, c.versions FROM (SELECT task_id, versions, run_at"
	"  FROM durable.live_tasks"
	"  WHERE partition_key = $partition AND queue_name = $queue"
	"  AND state IN ('ready', 'waiting') AND run_at <= $now"
	"  ORDER BY " DURABLE_CLAIM_ORDER " LIMIT $batch) c"
	" WHERE c.run_at <= $since AND c.versions IS NOT NULL"
	" AND NOT EXISTS (SELECT FROM"
	" pg_catalog.unnest($runs::pg_catalog.jsonb[]) a(runs)"
	"  WHERE durable.versions_run(c.versions, a.runs))",
	DURABLE_PARAMS(unrunnable_params),
	DURABLE_COLUMNS(unrunnable_columns),
};

typedef struct VersionsWork
{
	const char *queue;
	TimestampTz now;
	int			batch;
	DurableSettledCallback callback;
	void	   *arg;
} VersionsWork;

/*
 * review_unrunnable
 *		The part of the tick for one queue: its ready tasks that no worker
 *		seen in its version_timeout runs go to review.
 */
static uint64
review_unrunnable(void *arg)
{
	DurableResult res;
	VersionsWork *work = (VersionsWork *) arg;
	DurableQueue settings;
	TimestampTz since;
	Datum		alive_args[ALIVE_NPARAMS];
	Datum		args[UNRUNNABLE_NPARAMS];
	bool		isnull;
	Datum		runs;
	Jsonb	   *alive;
	Interval	back;
	uint64		moved = 0;

	DurableQueueGet(work->queue, &settings);
	if (!settings.has_version_timeout || settings.paused)
		return 0;
	/*
	 * A worker's claims are recorded a second apart at most: one seen
	 * within a second more than the timeout may have claimed since, so it
	 * still counts.  A task goes to review up to a second late, never early.
	 */
	back.month = -settings.version_timeout.month;
	back.day = -settings.version_timeout.day;
	back.time = -settings.version_timeout.time;
	since = DurableTimePlus(work->now, &back) - WORKER_RECORD_INTERVAL;
	alive_args[ALIVE_QUEUE] = CStringGetTextDatum(work->queue);
	alive_args[ALIVE_SINCE] = TimestampTzGetDatum(since);
	res = DurableRun(&workers_alive, alive_args, NULL, SPI_OK_SELECT, 1);
	/* a worker that did not say what it runs takes any task */
	if (DurableGetBool(res, 0, ALIVE_ANY))
		return 0;
	runs = PointerGetDatum(PG_DETOAST_DATUM_COPY(DurableGetDatum(res, 0, ALIVE_RUNS, &isnull)));
	alive = DatumGetJsonbPCopy(DurableGetDatum(res, 0, ALIVE_LIST, &isnull));

	args[UNRUNNABLE_QUEUE] = alive_args[ALIVE_QUEUE];
	args[UNRUNNABLE_NOW] = TimestampTzGetDatum(work->now);
	args[UNRUNNABLE_SINCE] = alive_args[ALIVE_SINCE];
	args[UNRUNNABLE_BATCH] = Int32GetDatum(work->batch);
	args[UNRUNNABLE_RUNS] = runs;
	for (int p = 0; p < settings.partitions && moved < (uint64) work->batch; p++)
	{
		int32		partition = DurableQueuePartition(&settings, p);
		uint64		n;
		int64	   *ids;
		Jsonb	  **pinned;

		if (DurablePartitionPaused(&settings, partition))
			continue;
		args[UNRUNNABLE_PARTITION] = Int32GetDatum(partition);
		res = DurableRun(&unrunnable, args, NULL, SPI_OK_SELECT, 0);
		n = res.rows;
		ids = palloc(sizeof(int64) * Max(n, 1));
		pinned = palloc(sizeof(Jsonb *) * Max(n, 1));
		for (uint64 i = 0; i < n; i++)
		{
			ids[i] = DurableGetInt64(res, i, UNRUNNABLE_TASK_ID);
			pinned[i] = DatumGetJsonbPCopy(DurableGetDatum(res, i, UNRUNNABLE_VERSIONS, &isnull));
		}
		for (uint64 i = 0; i < n && moved < (uint64) work->batch; i++)
		{
			DurableTask task;
			DurableMove move = {0};
			DurableDetail detail;

			/* a claim or a migration that came first wins: the move's CAS */
			if (!DurableTaskFetch(ids[i], false, &task) ||
				(task.state != DURABLE_TASK_READY && task.state != DURABLE_TASK_WAITING))
				continue;
			DurableDetailInit(&detail);
			DurableDetailJsonb(&detail, "versions", pinned[i]);
			DurableDetailJsonb(&detail, "alive", alive);
			DurableIntervalDetail(&detail, "version_timeout", &settings.version_timeout);
			move.from_state = task.state;
			move.fence = task.fence;
			move.to_state = DURABLE_TASK_NEEDS_REVIEW;
			move.stop_code = "version_unavailable";
			move.kind = "version_unavailable";
			move.actor = DURABLE_RECONCILER_ACTOR;
			move.detail = DurableDetailFinish(&detail);
			if (!DurableMoveTask(&task, &move, work->now, NULL))
				continue;
			moved++;
			if (work->callback)
				work->callback(task.task_id, "version_unavailable", work->arg);
		}
	}
	return moved;
}

/*
 * DurableReviewUnrunnable
 *		The tick's review of the tasks no worker runs: each queue with a
 *		version_timeout a part of its own ("versions: <queue>"), at most
 *		batch tasks in all.  On Citus, the coordinator's: each statement
 *		runs on the node of the queue's workers or of one partition.
 */
uint64
DurableReviewUnrunnable(TimestampTz now, int batch,
						DurableSettledCallback callback, void *arg)
{
	DurableResult res;
	uint64		nqueues;
	char	  **queues;
	uint64		moved = 0;

	if (DurableCitusWorker())
		return 0;
	res = DurableRun(&versioned_queues, NULL, NULL, SPI_OK_SELECT, 0);
	nqueues = res.rows;
	queues = palloc(sizeof(char *) * Max(nqueues, 1));
	for (uint64 i = 0; i < nqueues; i++)
		queues[i] = DurableGetText(res, i, VQUEUE_NAME);
	for (uint64 i = 0; i < nqueues && moved < (uint64) batch; i++)
	{
		VersionsWork work = {queues[i], now, batch - (int) moved, callback, arg};
		char	   *part = psprintf("versions: %s", queues[i]);
		uint64		n;

		if (DurableRunPart(part, review_unrunnable, &work, &n))
			moved += n;
		pfree(part);
	}
	return moved;
}
