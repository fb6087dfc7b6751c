/*-------------------------------------------------------------------------
 *
 * signal.c
 *	  Events that tasks await: durable_emit and durable_await.
 *
 * Events are facts: the first emit wins, the same payload again is no
 * news, another payload is 55U03.  An event's row in durable.emitted_events
 * exists once it is emitted or once a task awaits it, and both calls take
 * its row lock: an await holds it FOR SHARE from before it looks for the
 * event until its transaction ends, and an emit updates it.  So an emit
 * that commits while an await is being registered either is seen by the
 * await, or waits for it and then, in a statement with a later snapshot,
 * finds the await in durable.event_waits and wakes its task: no wake-up is
 * lost.  A wait that timed out stays timed out even if the event comes
 * later (same evidence, same decision): the emit only wakes awaits whose
 * deadline has not passed.
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/xact.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

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

/* events spread over the partitions by a hash of their name */
static int32
event_partition(const char *event)
{
	return DurableKeyPartition("event", event);
}

/*
 * durable_emit(event text, payload jsonb = NULL) RETURNS boolean
 *
 * In the caller's transaction: records the event and wakes the tasks that
 * await it.  True the first time, false for the same payload again; 55U03
 * for another payload.
 */
PG_FUNCTION_INFO_V1(durable_emit);
Datum
durable_emit(PG_FUNCTION_ARGS)
{
	char	   *event = event_arg(fcinfo, 0);
	Jsonb	   *payload = DurableJsonbArg(fcinfo, 1, "payload");
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	bytea	   *hash = payload ? DurableJsonbHash(payload) : NULL;
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	bool		first;

	args[0] = Int32GetDatum(event_partition(event));
	args[1] = CStringGetTextDatum(event);
	args[2] = JsonbPGetDatum(payload);
	nulls[2] = payload ? ' ' : 'n';
	args[3] = PointerGetDatum(hash);
	nulls[3] = hash ? ' ' : 'n';
	args[4] = TimestampTzGetDatum(now);
	args[5] = CStringGetTextDatum(DurableCallerName());

	SPI_connect();
	DurableRequireSingleServer("durable_emit()");
	first = DurableExecute(STMT_EVENT_EMIT, args, nulls,
						   SPI_OK_INSERT_RETURNING, 0) == 1;
	if (first)
	{
		Datum		wake[5] = {args[0], args[1], args[2], args[4], args[5]};
		char		wake_nulls[5] = {' ', ' ', nulls[2], ' ', ' '};

		/* a statement of its own: its snapshot sees the awaits we waited for */
		DurableAnnounceWoken(DurableExecute(STMT_EVENT_WAKE, wake, wake_nulls,
											SPI_OK_SELECT, 0));
	}
	else
	{
		bool		isnull;
		Datum		stored;

		if (DurableExecute(STMT_EVENT_GET, args, NULL, SPI_OK_SELECT, 1) == 0)
			elog(ERROR, "event \"%s\" vanished under its row lock", event);
		stored = DurableResultDatum(0, 1, &isnull);
		if (!DurableHashesEqual(isnull ? NULL : DatumGetByteaPP(stored), hash))
			ereport(ERROR,
					errcode(ERRCODE_DURABLE_IDEMPOTENCY_CONFLICT),
					errmsg("event \"%s\" was already emitted with another payload",
						   event),
					errdetail("Events are facts: the first emit of an event wins."),
					errhint("Emit a new fact under a new event name."));
	}
	SPI_finish();
	PG_RETURN_BOOL(first);
}

/* an await's arguments */
static Jsonb *
await_args(const char *event, const Interval *timeout)
{
	DurableDetail args;

	DurableDetailInit(&args);
	DurableDetailText(&args, "event", event);
	DurableIntervalDetail(&args, "timeout", timeout);
	return DurableDetailFinish(&args);
}

/*
 * durable_await(task_id bigint, fence bigint, name text, event text,
 *				 timeout interval = NULL)
 *		RETURNS TABLE(status text, payload jsonb)
 *
 * ('received', payload) when the event has been emitted, before the await
 * or while it waited; else ('waiting', NULL): the lease ends and the task
 * waits for the event or the timeout.  Replayed after the timeout,
 * ('timed_out', NULL), for ever.  Raises 55U01 for a stale fence, 55U03 for
 * a name used with other arguments, 55U04 while a step is in doubt.
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
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	DurableTask task;
	DurableWait wait;
	Jsonb	   *args;
	Datum		values[4];
	const char *status;
	Jsonb	   *payload = NULL;

	if (!PG_ARGISNULL(4))
		timeout = DurablePositiveIntervalArg(fcinfo, 4, "timeout");
	args = await_args(event, timeout);
	InitMaterializedSRF(fcinfo, 0);

	SPI_connect();
	DurableRequireSingleServer("durable_await()");
	DurableTaskHeld(task_id, fence, &task);
	values[0] = Int32GetDatum(event_partition(event));
	values[1] = CStringGetTextDatum(event);
	values[2] = Int64GetDatum(task_id);
	values[3] = CStringGetTextDatum(name);

	if (DurableWaitFetch(&task, name, &wait))
	{
		DurableWaitCheck(&task, name, &wait, "event", args);
		if (strcmp(wait.status, "waiting") != 0)
		{
			status = wait.status;
			payload = wait.payload;
		}
		else if (wait.until != 0 && now >= wait.until)
		{
			DurableExecute(STMT_EVENT_WAIT_DELETE, values, NULL, SPI_OK_DELETE, 0);
			DurableWaitResolve(&task, name, "timed_out", NULL, now);
			status = "timed_out";
		}
		else
		{
			/* woken before its time by something else: wait on */
			DurableWaitPark(&task, name, "event", wait.until, now);
			status = "waiting";
		}
	}
	else
	{
		TimestampTz until = timeout ? DurableTimeAfter(now, timeout, "timeout") : 0;
		Datum		place[3] = {values[0], values[1], TimestampTzGetDatum(now)};
		bool		isnull;

		/* the event's row exists and is ours to hold before we look */
		DurableExecute(STMT_EVENT_PLACE, place, NULL, SPI_OK_INSERT, 0);
		if (DurableExecute(STMT_EVENT_LOCK, values, NULL, SPI_OK_SELECT, 1) == 0)
			elog(ERROR, "event \"%s\" vanished under its row lock", event);
		if (DatumGetBool(DurableResultDatum(0, 1, &isnull)))
		{
			Datum		d = DurableResultDatum(0, 2, &isnull);

			payload = isnull ? NULL : DatumGetJsonbPCopy(d);
			DurableWaitRecord(&task, name, "event", args, "waiting", until,
							  NULL, 0, now);
			DurableWaitResolve(&task, name, "received", payload, now);
			status = "received";
		}
		else
		{
			DurableExecute(STMT_EVENT_WAIT_INSERT, values, NULL, SPI_OK_INSERT, 0);
			DurableWaitRecord(&task, name, "event", args, "waiting", until,
							  NULL, 0, now);
			DurableWaitPark(&task, name, "event", until, now);
			status = "waiting";
		}
	}
	DurableWaitResult(fcinfo, status, payload);
	SPI_finish();
	return (Datum) 0;
}
