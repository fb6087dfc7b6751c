/*-------------------------------------------------------------------------
 *
 * signal.c
 *	  Events that tasks await: durable_emit and durable_await.
 *
 * Events belong to a queue, so that one application's names never meet
 * another's: (queue, event) names one, its rows live in one of the queue's
 * partitions, and an emit into a queue wakes only that queue's awaits of
 * the event.  Emitting needs the queue's enqueue grant where it is
 * restricted, awaiting another queue's event its work grant.
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
#include "api/api.h"

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
	bytea	   *hash;
	DurableQueue settings;
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		first;

	if (PG_NARGS() < 3)
		refuse_queueless_emit();
	queue = DurableNameArg(fcinfo, 0, "queue name");
	event = event_arg(fcinfo, 1);
	payload = DurableJsonbArg(fcinfo, 2, "payload");
	hash = payload ? DurableJsonbHash(payload) : NULL;

	SPI_connect();
	DurableRequireSingleServer("durable_emit()");
	/* as an enqueue: the queue cannot be dropped under the new event */
	DurableQueueGetShared(queue, &settings);
	DurableCheckRestrictedQueue(queue, settings.restricted, DURABLE_PRIV_ENQUEUE);

	args[0] = Int32GetDatum(DurableQueueKeyPartition(&settings, event));
	args[1] = CStringGetTextDatum(queue);
	args[2] = CStringGetTextDatum(event);
	args[3] = JsonbPGetDatum(payload);
	nulls[3] = payload ? ' ' : 'n';
	args[4] = PointerGetDatum(hash);
	nulls[4] = hash ? ' ' : 'n';
	args[5] = TimestampTzGetDatum(now);
	args[6] = CStringGetTextDatum(DurableCallerName());

	first = DurableExecuteStmt(STMT_EVENT_EMIT, args, nulls,
						   SPI_OK_INSERT_RETURNING, 0) == 1;
	if (first)
	{
		Datum		wake[6] = {args[0], args[1], args[2], args[3], args[5], args[6]};
		char		wake_nulls[6] = {' ', ' ', ' ', nulls[3], ' ', ' '};

		/* a statement of its own: its snapshot sees the awaits we waited for */
		DurableAnnounceWoken(DurableExecuteStmt(STMT_EVENT_WAKE, wake, wake_nulls,
											SPI_OK_SELECT, 0));
	}
	else
	{
		bool		isnull;
		Datum		stored;

		if (DurableExecuteStmt(STMT_EVENT_GET, args, NULL, SPI_OK_SELECT, 1) == 0)
			elog(ERROR, "event \"%s\" of queue \"%s\" vanished under its row lock",
				 event, queue);
		stored = DurableResultDatum(0, 1, &isnull);
		if (!DurableHashesEqual(isnull ? NULL : DatumGetByteaPP(stored), hash))
			ereport(ERROR,
					errcode(ERRCODE_DURABLE_IDEMPOTENCY_CONFLICT),
					errmsg("event \"%s\" of queue \"%s\" was already emitted with another payload",
						   event, queue),
					errdetail("Events are facts: the first emit of an event wins."),
					errhint("Emit a new fact under a new event name."));
	}
	SPI_finish();
	PG_RETURN_BOOL(first);
}

/*
 * An await's arguments.  Those recorded before 0.5.0 name no queue: they
 * awaited what is now the task's own queue's event (queue NULL here).
 */
static Jsonb *
await_args(const char *event, const Interval *timeout, const char *queue)
{
	DurableDetail args;

	DurableDetailInit(&args);
	DurableDetailText(&args, "event", event);
	DurableIntervalDetail(&args, "timeout", timeout);
	if (queue != NULL)
		DurableDetailText(&args, "queue", queue);
	return DurableDetailFinish(&args);
}

/*
 * The arguments a replayed await must match: the recorded event wait of a
 * task awaiting its own queue's event may be one from before 0.5.0, which
 * says no queue, and means the same.
 */
static Jsonb *
await_args_to_match(const DurableWait *wait, const DurableTask *task,
					const char *queue, const char *event,
					const Interval *timeout, Jsonb *args)
{
	if (strcmp(wait->kind, "event") == 0 && wait->args != NULL &&
		strcmp(queue, task->queue) == 0 &&
		!DatumGetBool(DirectFunctionCall2(jsonb_exists,
										  JsonbPGetDatum(wait->args),
										  CStringGetTextDatum("queue"))))
		return await_args(event, timeout, NULL);
	return args;
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
	DurableTask task;
	DurableWait wait;
	DurableQueue settings;
	Jsonb	   *args;
	Datum		values[5];
	const char *status;
	Jsonb	   *payload = NULL;

	if (!PG_ARGISNULL(4))
		timeout = DurablePositiveIntervalArg(fcinfo, 4, "timeout");
	if (PG_NARGS() > 5 && !PG_ARGISNULL(5))
		queue = DurableNameArg(fcinfo, 5, "queue name");
	InitMaterializedSRF(fcinfo, 0);

	SPI_connect();
	DurableRequireSingleServer("durable_await()");
	DurableTaskHeld(task_id, fence, &task);
	if (queue == NULL)
		queue = task.queue;
	else if (strcmp(queue, task.queue) != 0)
		DurableCheckQueueAccess(queue, DURABLE_PRIV_WORK);
	args = await_args(event, timeout, queue);
	values[1] = CStringGetTextDatum(queue);
	values[2] = CStringGetTextDatum(event);
	values[3] = Int64GetDatum(task_id);
	values[4] = CStringGetTextDatum(name);

	if (DurableWaitFetch(&task, name, &wait))
	{
		DurableWaitCheck(&task, name, &wait, "event",
						 await_args_to_match(&wait, &task, queue, event,
											 timeout, args));
		if (strcmp(wait.status, "waiting") != 0)
		{
			status = wait.status;
			payload = wait.payload;
		}
		else if (wait.until != 0 && now >= wait.until)
		{
			DurableExecuteStmt(STMT_EVENT_WAIT_DELETE, values + 3, NULL,
						   SPI_OK_DELETE, 0);
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
		Datum		place[4];
		bool		isnull;

		/* as an emit: the queue cannot be dropped under the event's row */
		DurableQueueGetShared(queue, &settings);
		values[0] = Int32GetDatum(DurableQueueKeyPartition(&settings, event));
		place[0] = values[0];
		place[1] = values[1];
		place[2] = values[2];
		place[3] = TimestampTzGetDatum(now);

		/* the event's row exists and is ours to hold before we look */
		DurableExecuteStmt(STMT_EVENT_PLACE, place, NULL, SPI_OK_INSERT, 0);
		if (DurableExecuteStmt(STMT_EVENT_LOCK, values, NULL, SPI_OK_SELECT, 1) == 0)
			elog(ERROR, "event \"%s\" of queue \"%s\" vanished under its row lock",
				 event, queue);
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
			DurableExecuteStmt(STMT_EVENT_WAIT_INSERT, values, NULL, SPI_OK_INSERT, 0);
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
