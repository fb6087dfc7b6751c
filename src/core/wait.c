/*-------------------------------------------------------------------------
 *
 * wait.c
 *	  Named waits, what they have in common, and durable timers.
 *
 * A task's code runs again from the top after every claim.  A wait is
 * named, like a step, so that the replayed call finds it: each task keeps
 * its waits in its row (durable.live_tasks.waits, an object from a wait's
 * name to {kind, args, status, at, until, payload, ...}), and they move to
 * history and back with it.  The same name with other arguments is 55U03.
 *
 * Starting a wait ends the worker's lease, as a release does: fence + 1,
 * the task WAITING until the wait's deadline (or for ever, until an event
 * or a child wakes it), and the claim's attempt given back, since a wait
 * is not a failure.  Waking up is an ordinary claim; the replayed call then
 * returns how the wait ended.
 *
 * The entry points that wait (durable_sleep, durable_await, durable_spawn,
 * durable_join) are in api/waits.c; the waits themselves here, in
 * event.c and in child.c.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/fmgrprotos.h"
#include "utils/json.h"
#include "utils/timestamp.h"

#include "core/sql.h"

enum
{
	WAIT_COL_KIND,
	WAIT_COL_ARGS,
	WAIT_COL_STATUS,
	WAIT_COL_UNTIL,
	WAIT_COL_PAYLOAD,
	WAIT_COL_CHILD,
	WAIT_NCOLUMNS
};
static const DurableColumn wait_columns[WAIT_NCOLUMNS] = {
	[WAIT_COL_KIND] = {"kind", TEXTOID},
	[WAIT_COL_ARGS] = {"args", JSONBOID},
	[WAIT_COL_STATUS] = {"status", TEXTOID},
	[WAIT_COL_UNTIL] = {"until", TIMESTAMPTZOID},
	[WAIT_COL_PAYLOAD] = {"payload", JSONBOID},
	[WAIT_COL_CHILD] = {"task_id", INT8OID},
};
enum
{
	GET_PARTITION,
	GET_TASK_ID,
	GET_NAME,
	GET_NPARAMS
};
static const DurableParam wait_get_params[GET_NPARAMS] = {
	[GET_PARTITION] = {"partition", INT4OID},
	[GET_TASK_ID] = {"task_id", INT8OID},
	[GET_NAME] = {"name", TEXTOID},
};
static DurableStatement wait_get = {
	.name = "wait_get",
	.sql = "SELECT w ->> 'kind' AS kind, w -> 'args' AS args,"
	" w ->> 'status' AS status, " WAIT_UNTIL("w") " AS until,"
	" w -> 'payload' AS payload, (w ->> 'task_id')::int8 AS task_id"
	" FROM (SELECT waits -> $name AS w FROM durable.live_tasks"
	"  WHERE partition_key = $partition AND task_id = $task_id) t"
	" WHERE w IS NOT NULL",
	DURABLE_PARAMS(wait_get_params),
	DURABLE_COLUMNS(wait_columns),
};

/*
 * DurableWaitFetch
 *		Read the wait of that name of a task the caller holds; false when
 *		there is none.  Strings and documents point into SPI memory.
 */
bool
DurableWaitFetch(const DurableTask *task, const char *name, DurableWait *wait)
{
	DurableResult res;
	Datum		args[GET_NPARAMS];
	bool		isnull;
	Datum		d;

	args[GET_PARTITION] = Int32GetDatum(task->partition);
	args[GET_TASK_ID] = Int64GetDatum(task->task_id);
	args[GET_NAME] = CStringGetTextDatum(name);
	res = DurableRun(&wait_get, args, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 0)
		return false;
	wait->kind = DurableGetText(res, 0, WAIT_COL_KIND);
	d = DurableGetDatum(res, 0, WAIT_COL_ARGS, &isnull);
	wait->args = isnull ? NULL : DatumGetJsonbPCopy(d);
	wait->status = DurableGetText(res, 0, WAIT_COL_STATUS);
	d = DurableGetDatum(res, 0, WAIT_COL_UNTIL, &isnull);
	wait->until = isnull ? 0 : DatumGetTimestampTz(d);
	d = DurableGetDatum(res, 0, WAIT_COL_PAYLOAD, &isnull);
	wait->payload = isnull ? NULL : DatumGetJsonbPCopy(d);
	d = DurableGetDatum(res, 0, WAIT_COL_CHILD, &isnull);
	wait->child_id = isnull ? 0 : DatumGetInt64(d);
	return true;
}

/* the call that starts a wait of a kind */
static const char *
call_of(const char *kind)
{
	if (strcmp(kind, "sleep") == 0)
		return "durable_sleep";
	if (strcmp(kind, "event") == 0)
		return "durable_await";
	if (strcmp(kind, "spawn") == 0)
		return "durable_spawn";
	return "durable_join";
}

/*
 * DurableWaitCheck
 *		A replayed call must ask what the first one asked: 55U03 otherwise.
 */
void
DurableWaitCheck(const DurableTask *task, const char *name,
				 const DurableWait *wait, const char *kind, Jsonb *args)
{
	if (strcmp(wait->kind, kind) != 0 || wait->args == NULL ||
		!DatumGetBool(DirectFunctionCall2(jsonb_eq, JsonbPGetDatum(wait->args),
										  JsonbPGetDatum(args))))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_IDEMPOTENCY_CONFLICT),
				errmsg("wait \"%s\" of task %lld was started with other arguments",
					   name, (long long) task->task_id),
				errdetail("Its first call was %s with arguments %s; this one is %s with arguments %s.",
						  call_of(wait->kind),
						  wait->args ? JsonbToCString(NULL, &wait->args->root, VARSIZE(wait->args)) : "null",
						  call_of(kind), JsonbToCString(NULL, &args->root, VARSIZE(args))),
				errhint("A replay must make the same calls; give a new wait a new name."));
}

enum
{
	SET_PARTITION,
	SET_TASK_ID,
	SET_NAME,
	SET_ENTRY,
	SET_NPARAMS
};
static const DurableParam wait_set_params[SET_NPARAMS] = {
	[SET_PARTITION] = {"partition", INT4OID},
	[SET_TASK_ID] = {"task_id", INT8OID},
	[SET_NAME] = {"name", TEXTOID},
	[SET_ENTRY] = {"entry", JSONBOID},
};
static DurableStatement wait_set = {
	.name = "wait_set",
	.sql = "UPDATE durable.live_tasks SET waits ="
	" COALESCE(waits, '{}'::pg_catalog.jsonb)"
	"  || pg_catalog.jsonb_build_object($name::text, $entry::pg_catalog.jsonb)"
	" WHERE partition_key = $partition AND task_id = $task_id",
	DURABLE_PARAMS(wait_set_params),
};

/*
 * DurableWaitRecord
 *		Record a new wait (or spawn) of a task the caller holds.
 */
void
DurableWaitRecord(const DurableTask *task, const char *name, const char *kind,
				  Jsonb *args, const char *status, TimestampTz until,
				  Jsonb *payload, int64 child_id, TimestampTz now)
{
	DurableDetail entry;
	Datum		values[SET_NPARAMS];

	DurableDetailInit(&entry);
	DurableDetailText(&entry, "kind", kind);
	DurableDetailJsonb(&entry, "args", args);
	DurableDetailText(&entry, "status", status);
	DurableDetailTime(&entry, "at", now);
	if (until != 0)
		DurableDetailTime(&entry, "until", until);
	if (payload != NULL)
		DurableDetailJsonb(&entry, "payload", payload);
	if (child_id != 0)
		DurableDetailInt(&entry, "task_id", child_id);
	values[SET_PARTITION] = Int32GetDatum(task->partition);
	values[SET_TASK_ID] = Int64GetDatum(task->task_id);
	values[SET_NAME] = CStringGetTextDatum(name);
	values[SET_ENTRY] = JsonbPGetDatum(DurableDetailFinish(&entry));
	if (DurableRun(&wait_set, values, NULL, SPI_OK_UPDATE, 0).rows != 1)
		elog(ERROR, "task %lld vanished under its row lock",
			 (long long) task->task_id);
}

/* $ending: the entry's new keys, DurableWaitEnding's */
enum
{
	RESOLVE_PARTITION,
	RESOLVE_TASK_ID,
	RESOLVE_NAME,
	RESOLVE_ENDING,
	RESOLVE_NPARAMS
};
static const DurableParam wait_resolve_params[RESOLVE_NPARAMS] = {
	[RESOLVE_PARTITION] = {"partition", INT4OID},
	[RESOLVE_TASK_ID] = {"task_id", INT8OID},
	[RESOLVE_NAME] = {"name", TEXTOID},
	[RESOLVE_ENDING] = {"ending", JSONBOID},
};
static DurableStatement wait_resolve = {
	.name = "wait_resolve",
	.sql = "UPDATE durable.live_tasks SET waits = pg_catalog.jsonb_set(waits,"
	" ARRAY[$name::text], (waits -> $name::text) || $ending::pg_catalog.jsonb)"
	" WHERE partition_key = $partition AND task_id = $task_id",
	DURABLE_PARAMS(wait_resolve_params),
};

/*
 * DurableWaitEnding
 *		What a wait's entry gains when it ends: its status, when, and what
 *		it ended with -- no key for none, so that an SQL NULL stays one and
 *		a JSON null stays that.  Built here rather than in the statements
 *		that apply it, whose SET then calls no function: Citus refuses a
 *		non-immutable one there beside a CASE.
 */
Jsonb *
DurableWaitEnding(const char *status, Jsonb *payload, TimestampTz now)
{
	DurableDetail ending;

	DurableDetailInit(&ending);
	DurableDetailText(&ending, "status", status);
	DurableDetailTime(&ending, "resolved_at", now);
	if (payload != NULL)
		DurableDetailJsonb(&ending, "payload", payload);
	return DurableDetailFinish(&ending);
}

/*
 * DurableWaitResolve
 *		A wait has ended (elapsed, received, timed_out, done): record how,
 *		with an event, so that every replay from now on says the same.
 */
void
DurableWaitResolve(DurableTask *task, const char *name, const char *status,
				   Jsonb *payload, TimestampTz now)
{
	Datum		values[RESOLVE_NPARAMS];
	DurableDetail detail;

	values[RESOLVE_PARTITION] = Int32GetDatum(task->partition);
	values[RESOLVE_TASK_ID] = Int64GetDatum(task->task_id);
	values[RESOLVE_NAME] = CStringGetTextDatum(name);
	values[RESOLVE_ENDING] = JsonbPGetDatum(DurableWaitEnding(status, payload, now));
	if (DurableRun(&wait_resolve, values, NULL, SPI_OK_UPDATE, 0).rows != 1)
		elog(ERROR, "task %lld vanished under its row lock",
			 (long long) task->task_id);
	DurableDetailInit(&detail);
	DurableDetailText(&detail, "wait", name);
	DurableDetailText(&detail, "status", status);
	task->version = DurableAppendEvent(task, now, "wait_ended", NULL,
									   DurableDetailFinish(&detail), NULL, 0);
}

/*
 * DurableWaitPark
 *		End the lease of a task the caller holds and park it WAITING until
 *		until (0: until something wakes it), giving the claim's attempt
 *		back.  A task with a step in doubt cannot wait: the step's outcome
 *		must be known first (55U04).
 */
void
DurableWaitPark(DurableTask *task, const char *name, const char *kind,
				TimestampTz until, TimestampTz now)
{
	DurableStep step;
	DurableMove move = {0};
	DurableDetail detail;

	if (DurableStepInDoubt(task, &step))
		ereport(ERROR,
				errcode(ERRCODE_DURABLE_INVALID_TRANSITION),
				errmsg("task %lld cannot wait while step \"%s\" is %s",
					   (long long) task->task_id, step.name, DurableStepStateName(step.state)),
				errdetail("A step that was started and not committed may have taken effect."),
				errhint("Commit the step, record a receipt for it, or report it with durable_fail(..., step => '%s') before the wait.",
						step.name));
	DurableDetailInit(&detail);
	DurableDetailText(&detail, "wait", name);
	DurableDetailText(&detail, "kind", kind);
	if (until != 0)
		DurableDetailTime(&detail, "until", until);
	move.from_state = DURABLE_TASK_RUNNING;
	move.fence = task->fence;
	move.to_state = DURABLE_TASK_WAITING;
	move.revoke = true;
	move.give_back_attempt = true;
	move.run_at = until != 0 ? until : DT_NOEND;
	move.kind = "waiting";
	move.detail = DurableDetailFinish(&detail);
	DurableMoveLockedTask(task, &move, now);
}

/* a sleep's arguments: when it ends, or for how long */
static Jsonb *
sleep_args(TimestampTz until, const Interval *duration)
{
	DurableDetail args;

	DurableDetailInit(&args);
	if (duration != NULL)
		DurableIntervalDetail(&args, "duration", duration);
	else
	{
		char		buf[MAXDATELEN + 1];
		int			utc = 0;

		/* in UTC, so that it reads the same whatever the session's zone */
		DurableDetailText(&args, "until",
						  JsonEncodeDateTime(buf, TimestampTzGetDatum(until),
											 TIMESTAMPTZOID, &utc));
	}
	return DurableDetailFinish(&args);
}

/*
 * DurableSleep
 *		A durable timer for the task held with that fence: 'sleeping' the
 *		first time (the task waits until the time), 'elapsed' once the
 *		time has come.  until is the time, or duration (not NULL) the time
 *		counted from the first call.  A sleep until a time already past has
 *		elapsed at once and keeps the lease.  A task woken before its time
 *		(an operator's claim, say) sleeps again until then.  SPI connected.
 */
const char *
DurableSleep(int64 task_id, int64 fence, const char *name, TimestampTz until,
			 const Interval *duration, TimestampTz now)
{
	DurableTask task;
	DurableWait wait;
	Jsonb	   *args = sleep_args(until, duration);
	const char *status;

	DurableTaskHeld(task_id, fence, &task);
	if (DurableWaitFetch(&task, name, &wait))
	{
		DurableWaitCheck(&task, name, &wait, "sleep", args);
		if (strcmp(wait.status, "elapsed") == 0)
			status = "elapsed";
		else if (now >= wait.until)
		{
			DurableWaitResolve(&task, name, "elapsed", NULL, now);
			status = "elapsed";
		}
		else
		{
			DurableWaitPark(&task, name, "sleep", wait.until, now);
			status = "sleeping";
		}
	}
	else
	{
		if (duration != NULL)
			until = DurableTimeAfter(now, duration, "duration");
		if (until <= now)
		{
			DurableWaitRecord(&task, name, "sleep", args, "elapsed", until,
							  NULL, 0, now);
			status = "elapsed";
		}
		else
		{
			DurableWaitRecord(&task, name, "sleep", args, "sleeping", until,
							  NULL, 0, now);
			DurableWaitPark(&task, name, "sleep", until, now);
			status = "sleeping";
		}
	}
	return status;
}
