/*-------------------------------------------------------------------------
 *
 * waits.c
 *	  The README's "Workflows that wait": durable_sleep, durable_spawn,
 *	  durable_join, durable_emit and durable_await.
 *
 * Each checks its arguments, connects to SPI and calls the core's wait
 * (core/wait.c, core/child.c, core/event.c); the ones that return a row
 * (status, document) return it through DurableWaitResult.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "access/xact.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

/*
 * DurableWaitResult
 *		The one row (status, document) of durable_await and durable_join,
 *		into the materialized result of fcinfo.
 */
void
DurableWaitResult(FunctionCallInfo fcinfo, const char *status, Jsonb *payload)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[2];
	bool		nulls[2] = {false, payload == NULL};

	values[0] = CStringGetTextDatum(status);
	values[1] = JsonbPGetDatum(payload);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* what durable_sleep_until and durable_sleep_for share */
static const char *
sleep_common(FunctionCallInfo fcinfo, TimestampTz until, const Interval *duration)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	char	   *name = DurableNameArg(fcinfo, 2, "wait name");
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	const char *status;

	SPI_connect();
	status = DurableSleep(task_id, fence, name, until, duration, now);
	SPI_finish();
	return status;
}

/*
 * durable_sleep(task_id bigint, fence bigint, name text, until timestamptz)
 *		RETURNS text
 * durable_sleep(task_id bigint, fence bigint, name text, duration interval)
 *		RETURNS text
 *
 * A durable timer in database time: 'sleeping' the first time (the lease
 * ends; the task waits until the time), 'elapsed' when replayed after it.
 * The duration is counted from the first call.  Raises 55U01 for a stale
 * fence, 55U03 for a name used with other arguments, 55U04 while a step is
 * in doubt.
 */
PG_FUNCTION_INFO_V1(durable_sleep_until);
Datum
durable_sleep_until(PG_FUNCTION_ARGS)
{
	TimestampTz until;

	DurableRequireArg(fcinfo, 3, "until");
	until = PG_GETARG_TIMESTAMPTZ(3);
	if (TIMESTAMP_NOT_FINITE(until))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("until must be a finite time"));
	PG_RETURN_TEXT_P(cstring_to_text(sleep_common(fcinfo, until, NULL)));
}

PG_FUNCTION_INFO_V1(durable_sleep_for);
Datum
durable_sleep_for(PG_FUNCTION_ARGS)
{
	Interval   *duration = DurablePositiveIntervalArg(fcinfo, 3, "duration");

	PG_RETURN_TEXT_P(cstring_to_text(sleep_common(fcinfo, 0, duration)));
}

/*
 * durable_spawn(task_id bigint, fence bigint, name text, queue text,
 *		payload jsonb = '{}', run_at timestamptz = NULL, priority int = 0,
 *		class text = 'idempotent', max_attempts int = NULL,
 *		deadline interval = NULL, workflow_version text = NULL,
 *		metadata jsonb = NULL, concurrency_key text = NULL,
 *		fairness_key text = NULL) RETURNS bigint
 *
 * Enqueues a child task once per (parent, name); a replay returns the same
 * id, and keeps the parent's lease.  Raises 55U01 for a stale fence, 55U03
 * for a name used with any other argument, 42704 for an unknown queue,
 * 42501 for a queue the caller may not enqueue into.
 */
PG_FUNCTION_INFO_V1(durable_spawn);
Datum
durable_spawn(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	char	   *name = DurableNameArg(fcinfo, 2, "child name");
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableEnqueueRequest req = {0};
	int64		child_id;

	req.queue = DurableNameArg(fcinfo, 3, "queue name");
	DurableRequireArg(fcinfo, 4, "payload");
	req.payload = DurableJsonbArg(fcinfo, 4, "payload");
	DurableEnqueueArgs(fcinfo, 5, 12, &req);
	req.parent_id = task_id;

	SPI_connect();
	child_id = DurableSpawn(fence, name, &req, now);
	SPI_finish();
	PG_RETURN_INT64(child_id);
}

/*
 * durable_join(task_id bigint, fence bigint, name text,
 *				children text[] = NULL, timeout interval = NULL)
 *		RETURNS TABLE(status text, children jsonb)
 *
 * ('done', [{name, task_id, state, result, error}, ...]) once every child
 * named (all, when NULL) has finished: completed, failed or cancelled.
 * Else ('waiting', NULL): the lease ends and the task waits until the last
 * of them finishes or the timeout passes; replayed after the timeout,
 * ('timed_out', the children as they were then), for ever.  Raises 22023
 * for a child never spawned, and what durable_await raises.
 */
PG_FUNCTION_INFO_V1(durable_join);
Datum
durable_join(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	char	   *name = DurableNameArg(fcinfo, 2, "wait name");
	ArrayType  *names = PG_ARGISNULL(3) ? NULL : PG_GETARG_ARRAYTYPE_P(3);
	Interval   *timeout = NULL;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	const char *status;
	Jsonb	   *report;

	if (names != NULL && ARR_NDIM(names) > 1)
		ereport(ERROR,
				errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				errmsg("children must be a one-dimensional array"));
	if (!PG_ARGISNULL(4))
		timeout = DurablePositiveIntervalArg(fcinfo, 4, "timeout");
	InitMaterializedSRF(fcinfo, 0);

	SPI_connect();
	status = DurableJoin(task_id, fence, name, names, timeout, now, &report);
	DurableWaitResult(fcinfo, status, report);
	SPI_finish();
	return (Datum) 0;
}

/* event names are names, not documents */
#define DURABLE_MAX_EVENT_LEN 255

static char *
event_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *event;

	DurableRequireArg(fcinfo, argno, "event");
	event = DurableTextArgCString(fcinfo, argno, "event");
	if (event[0] == '\0' || strlen(event) > DURABLE_MAX_EVENT_LEN)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("event name must have between 1 and %d bytes",
					   DURABLE_MAX_EVENT_LEN));
	return event;
}

/*
 * The 0.3.0 declaration durable_emit(event, payload) reaches this library
 * until ALTER EXTENSION durable UPDATE drops it.  It is refused rather than
 * served: an event belongs to a queue now, and no queue it could go to is
 * right (every queue would be the global namespace again; any one of them
 * would hide the event from the awaits of the others).
 */
static void
refuse_queueless_emit(void)
{
	ereport(ERROR,
			errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			errmsg("durable_emit(event, payload) without a queue is no longer supported"),
			errdetail("Events belong to a queue since durable 0.5.0; the installed SQL declaration of durable is older than its library."),
			errhint("Run ALTER EXTENSION durable UPDATE, then emit with durable_emit(queue, event, payload)."));
}

/*
 * durable_emit(queue text, event text, payload jsonb = NULL) RETURNS boolean
 *
 * In the caller's transaction: records the event in the queue and wakes
 * the queue's tasks that await it.  True the first time, false for the
 * same payload again; 55U03 for another payload.  A restricted queue needs
 * its enqueue grant (42501), checked before anything about the event is
 * looked at; 42704 for an unknown queue.
 */
PG_FUNCTION_INFO_V1(durable_emit);
Datum
durable_emit(PG_FUNCTION_ARGS)
{
	char	   *queue;
	char	   *event;
	Jsonb	   *payload;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	bool		first;

	if (PG_NARGS() < 3)
		refuse_queueless_emit();
	queue = DurableNameArg(fcinfo, 0, "queue name");
	event = event_arg(fcinfo, 1);
	payload = DurableJsonbArg(fcinfo, 2, "payload");

	SPI_connect();
	first = DurableEmit(queue, event, payload, now);
	SPI_finish();
	PG_RETURN_BOOL(first);
}

/*
 * durable_await(task_id bigint, fence bigint, name text, event text,
 *				 timeout interval = NULL, queue text = NULL)
 *		RETURNS TABLE(status text, payload jsonb)
 *
 * Awaits the event of the task's own queue, or of queue, which then needs
 * its work grant where it is restricted (42501, before anything about the
 * event is told).  ('received', payload) when the event has been emitted,
 * before the await or while it waited; else ('waiting', NULL): the lease
 * ends and the task waits for the event or the timeout.  Replayed after
 * the timeout, ('timed_out', NULL), for ever.  Raises 55U01 for a stale
 * fence, 55U03 for a name used with other arguments (the queue is one),
 * 55U04 while a step is in doubt, 42704 for an unknown queue.  The 0.3.0
 * declaration, without queue, awaits in the task's own queue.
 */
PG_FUNCTION_INFO_V1(durable_await);
Datum
durable_await(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	char	   *name = DurableNameArg(fcinfo, 2, "wait name");
	char	   *event = event_arg(fcinfo, 3);
	Interval   *timeout = NULL;
	const char *queue = NULL;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	const char *status;
	Jsonb	   *payload;

	if (!PG_ARGISNULL(4))
		timeout = DurablePositiveIntervalArg(fcinfo, 4, "timeout");
	if (PG_NARGS() > 5 && !PG_ARGISNULL(5))
		queue = DurableNameArg(fcinfo, 5, "queue name");
	InitMaterializedSRF(fcinfo, 0);

	SPI_connect();
	status = DurableAwait(task_id, fence, name, event, timeout, queue, now,
						  &payload);
	DurableWaitResult(fcinfo, status, payload);
	SPI_finish();
	return (Datum) 0;
}
