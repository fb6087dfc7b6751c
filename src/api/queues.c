/*-------------------------------------------------------------------------
 *
 * queues.c
 *	  The SQL functions of queues (README, "The SQL API", Queues): create,
 *	  alter, pause, resume and drop a queue, grant and revoke its use.
 *	  Each checks its arguments, connects to SPI, calls the core (queue.c,
 *	  access.c) and returns.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "catalog/pg_type.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"

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

/* a queue's version_timeout, or NULL */
static Interval *
version_timeout_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return NULL;
	return DurablePositiveIntervalArg(fcinfo, argno, "version_timeout");
}

/*
 * durable_create_queue(queue text, lease interval = '30 seconds',
 *		max_attempts int = 3, retry_base int = 2, retry_cap int = 60,
 *		deadline interval = NULL, retry_capacity int = NULL,
 *		retry_refill_rate float8 = 10, progress_timeout interval = NULL,
 *		partitions int = 1, notify bool = false,
 *		concurrency_limit int = NULL, version_timeout interval = NULL)
 *		RETURNS void
 *
 * Raises 42710 when the queue exists, 22023/22004 for bad settings.
 */
PG_FUNCTION_INFO_V1(durable_create_queue);
Datum
durable_create_queue(PG_FUNCTION_ARGS)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	DurableQueueSettings settings = {0};

	settings.partitions = DurableIntArgAtLeast(fcinfo, 9, "partitions", 1);
	if (settings.partitions > DURABLE_MAX_PARTITIONS)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("partitions must be at most %d", DURABLE_MAX_PARTITIONS));
	settings.lease = DurablePositiveIntervalArg(fcinfo, 1, "lease");
	settings.max_attempts = DurableIntArgAtLeast(fcinfo, 2, "max_attempts", 1);
	settings.retry_base = DurableIntArgAtLeast(fcinfo, 3, "retry_base", 1);
	settings.retry_cap = DurableIntArgAtLeast(fcinfo, 4, "retry_cap", 1);
	if (!PG_ARGISNULL(5))
		settings.deadline = DurablePositiveIntervalArg(fcinfo, 5, "deadline");
	if (!PG_ARGISNULL(6))
		settings.retry_capacity = DurableIntArgAtLeast(fcinfo, 6, "retry_capacity", 1);
	settings.retry_refill_rate = refill_rate_arg(fcinfo, 7, "retry_refill_rate");
	if (!PG_ARGISNULL(8))
		settings.progress_timeout = DurablePositiveIntervalArg(fcinfo, 8, "progress_timeout");
	DurableRequireArg(fcinfo, 10, "notify");
	settings.has_notify = true;
	settings.notify = PG_GETARG_BOOL(10);
	if (PG_NARGS() > 11 && !PG_ARGISNULL(11))
		settings.concurrency_limit = DurableIntArgAtLeast(fcinfo, 11, "concurrency_limit", 1);
	settings.version_timeout = version_timeout_arg(fcinfo, 12);

	SPI_connect();
	DurableCreateQueue(queue, &settings);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_alter_queue(queue text, lease interval = NULL, ...,
 *		clear text[] = NULL, concurrency_limit int = NULL,
 *		version_timeout interval = NULL) RETURNS void
 *
 * NULL keeps a setting; clear names the optional settings to remove
 * ('deadline', 'retry_capacity', 'progress_timeout', 'concurrency_limit',
 * 'version_timeout').
 * The partition count cannot change.
 */
PG_FUNCTION_INFO_V1(durable_alter_queue);
Datum
durable_alter_queue(PG_FUNCTION_ARGS)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	static const char *const clearable[] = {"deadline", "retry_capacity",
	"progress_timeout", "concurrency_limit", "version_timeout"};
	DurableQueueSettings settings = {0};
	bool		clear[5] = {false, false, false, false, false};

	if (!PG_ARGISNULL(1))
		settings.lease = DurablePositiveIntervalArg(fcinfo, 1, "lease");
	if (!PG_ARGISNULL(2))
		settings.max_attempts = DurableIntArgAtLeast(fcinfo, 2, "max_attempts", 1);
	if (!PG_ARGISNULL(3))
		settings.retry_base = DurableIntArgAtLeast(fcinfo, 3, "retry_base", 1);
	if (!PG_ARGISNULL(4))
		settings.retry_cap = DurableIntArgAtLeast(fcinfo, 4, "retry_cap", 1);
	if (!PG_ARGISNULL(5))
		settings.deadline = DurablePositiveIntervalArg(fcinfo, 5, "deadline");
	if (!PG_ARGISNULL(6))
		settings.retry_capacity = DurableIntArgAtLeast(fcinfo, 6, "retry_capacity", 1);
	if (!PG_ARGISNULL(7))
		settings.retry_refill_rate = refill_rate_arg(fcinfo, 7, "retry_refill_rate");
	if (!PG_ARGISNULL(8))
		settings.progress_timeout = DurablePositiveIntervalArg(fcinfo, 8, "progress_timeout");
	if (!PG_ARGISNULL(9))
	{
		settings.has_notify = true;
		settings.notify = PG_GETARG_BOOL(9);
	}
	if (!PG_ARGISNULL(10))
	{
		Datum	   *elems;
		bool	   *elnulls;
		int			nelems;

		nelems = DurableArrayArg(fcinfo, 10, TEXTOID, "clear", &elems, &elnulls);
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
						errhint("Only \"deadline\", \"retry_capacity\", \"progress_timeout\", \"concurrency_limit\" and \"version_timeout\" can be cleared."));
			clear[j] = true;
		}
	}
	settings.clear_deadline = clear[0];
	settings.clear_retry_capacity = clear[1];
	settings.clear_progress_timeout = clear[2];
	settings.clear_concurrency_limit = clear[3];
	settings.clear_version_timeout = clear[4];
	if (PG_NARGS() > 11 && !PG_ARGISNULL(11))
		settings.concurrency_limit = DurableIntArgAtLeast(fcinfo, 11, "concurrency_limit", 1);
	settings.version_timeout = version_timeout_arg(fcinfo, 12);

	SPI_connect();
	DurableAlterQueue(queue, &settings);
	/* set again later, the partitions' buckets start full, as the queue's */
	if (settings.clear_retry_capacity)
		DurableForgetRetryBuckets(queue);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_drop_queue(queue text, cascade boolean = false) RETURNS void
 *
 * Drops the queue with its finished tasks, their steps and events, and
 * the events emitted into it; with cascade, the schedules that target it
 * too (see DurableDropQueue).  Raises 55006 while any of its tasks is
 * unfinished, 2BP01 while schedules target it without cascade.  The 0.4.0
 * definition has no cascade (PG_NARGS() 1).
 */
PG_FUNCTION_INFO_V1(durable_drop_queue);
Datum
durable_drop_queue(PG_FUNCTION_ARGS)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	bool		cascade = false;

	if (PG_NARGS() > 1)
	{
		DurableRequireArg(fcinfo, 1, "cascade");
		cascade = PG_GETARG_BOOL(1);
	}

	SPI_connect();
	DurableDropQueue(queue, cascade);
	DurableForgetRetryBuckets(queue);
	SPI_finish();
	PG_RETURN_VOID();
}

static void
set_paused(FunctionCallInfo fcinfo, bool paused)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	int32		partition = -1;

	if (PG_NARGS() > 1 && !PG_ARGISNULL(1))
		partition = DurableIntArgAtLeast(fcinfo, 1, "partition", 0);

	SPI_connect();
	DurableCheckOperatorQueue(queue);
	DurableSetQueuePaused(queue, partition, paused);
	SPI_finish();
}

/*
 * durable_pause(queue text, partition int = NULL) RETURNS void
 * durable_resume(queue text, partition int = NULL) RETURNS void
 *
 * A paused queue hands out no task; enqueues, running tasks, their commits
 * and the reconciler go on, so nothing is lost.  With a partition (one of
 * the queue's partition_key values), only that partition pauses or
 * resumes: the stop-loss runbook's first step, which leaves the queue's
 * other work running.
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

/* a role by name, or InvalidOid for 'public' */
static Oid
grantee_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *name = DurableNameArg(fcinfo, argno, "role");

	if (strcmp(name, "public") == 0)
		return InvalidOid;
	return get_role_oid(name, false);
}

static void
change_grant(FunctionCallInfo fcinfo, bool grant)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	Oid			grantee = grantee_arg(fcinfo, 1);
	char	   *name;
	bool		enqueue;
	bool		work;

	/* 'enqueue', 'work' or 'all' */
	DurableRequireArg(fcinfo, 2, "privilege");
	name = text_to_cstring(PG_GETARG_TEXT_PP(2));
	enqueue = strcmp(name, "enqueue") == 0 || strcmp(name, "all") == 0;
	work = strcmp(name, "work") == 0 || strcmp(name, "all") == 0;
	if (!enqueue && !work)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("unknown queue privilege \"%s\"", name),
				errhint("The privilege must be \"enqueue\", \"work\" or \"all\"."));

	SPI_connect();
	DurableChangeQueueGrant(queue, grantee, enqueue, work, grant);
	SPI_finish();
}

/*
 * durable_grant_queue(queue text, role text, privilege text) RETURNS void
 *
 * Lets role ('public' for everyone holding the API roles) enqueue into the
 * queue ('enqueue'), work on its tasks ('work': claim, heartbeat, steps,
 * commit, fail, reconcile), or both ('all'); the queue is restricted to its
 * grants from the first one on.  Granting twice changes nothing.
 */
PG_FUNCTION_INFO_V1(durable_grant_queue);
Datum
durable_grant_queue(PG_FUNCTION_ARGS)
{
	change_grant(fcinfo, true);
	PG_RETURN_VOID();
}

/*
 * durable_revoke_queue(queue text, role text, privilege text) RETURNS void
 *
 * Takes a grant back; the queue stays restricted, also with no grant left
 * (then only superusers may use it).
 */
PG_FUNCTION_INFO_V1(durable_revoke_queue);
Datum
durable_revoke_queue(PG_FUNCTION_ARGS)
{
	change_grant(fcinfo, false);
	PG_RETURN_VOID();
}

/*
 * durable.queues_in_scope() RETURNS text[]
 * durable.queue_in_scope(queue text) RETURNS boolean
 * durable.task_in_scope(task_id bigint) RETURNS boolean
 *
 * What durable's views show the calling role: every queue's rows (NULL,
 * true), or, for a queue operator (a member of durable_queue_operator and
 * not of durable_operator), those of the open queues and of the restricted
 * ones it holds a grant of.  The views that show a queue's rows ask
 * queue_in_scope of each, those of a task's rows task_in_scope: the scope
 * is read once a transaction, and a role that sees every queue is answered
 * without a statement.
 */
PG_FUNCTION_INFO_V1(durable_queues_in_scope);
Datum
durable_queues_in_scope(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	ArrayType  *queues;

	SPI_connect();
	queues = DurableQueuesInScope(caller);
	SPI_finish();
	if (queues == NULL)
		PG_RETURN_NULL();
	PG_RETURN_ARRAYTYPE_P(queues);
}

PG_FUNCTION_INFO_V1(durable_queue_in_scope);
Datum
durable_queue_in_scope(PG_FUNCTION_ARGS)
{
	text	   *queue = PG_GETARG_TEXT_PP(0);
	bool		connect = !DurableScopeLoaded();
	bool		in_scope;

	/* a test per row: the row's text as it is, no copy */
	if (connect)
		SPI_connect();
	in_scope = DurableQueueInScope(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue));
	if (connect)
		SPI_finish();
	PG_RETURN_BOOL(in_scope);
}

PG_FUNCTION_INFO_V1(durable_task_in_scope);
Datum
durable_task_in_scope(PG_FUNCTION_ARGS)
{
	int64		task_id = PG_GETARG_INT64(0);
	bool		in_scope;

	if (DurableScopeLoaded() && DurableCallerSeesEveryQueue())
		PG_RETURN_BOOL(true);
	SPI_connect();
	in_scope = DurableTaskInScope(task_id);
	SPI_finish();
	PG_RETURN_BOOL(in_scope);
}
