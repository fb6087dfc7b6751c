/*-------------------------------------------------------------------------
 *
 * event.c
 *	  Events that tasks await: emitting one and awaiting one (durable_emit
 *	  and durable_await in api/waits.c).
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
#include "core/core.h"

#include "catalog/pg_type.h"

#include "access/xact.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "core/sql.h"

enum
{
	EMITTED_ONE,
	EMITTED_NCOLUMNS
};
static const DurableColumn emitted_columns[EMITTED_NCOLUMNS] = {
	[EMITTED_ONE] = {"emitted", INT4OID},
};
static DurableStatement event_emit = {
	.name = "event_emit",
	.sql = "INSERT INTO durable.emitted_events AS e (partition_key, queue_name, event,"
	" payload, payload_hash, emitted_at, role, created_at)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $6)"
	" ON CONFLICT (partition_key, queue_name, event) DO UPDATE SET"
	" payload = EXCLUDED.payload, payload_hash = EXCLUDED.payload_hash,"
	" emitted_at = EXCLUDED.emitted_at, role = EXCLUDED.role"
	" WHERE e.emitted_at IS NULL"
	" RETURNING 1 AS emitted",
	.nargs = 7, .argtypes = {INT4OID, TEXTOID, TEXTOID, JSONBOID, BYTEAOID,
	TIMESTAMPTZOID, TEXTOID},
	DURABLE_COLUMNS(emitted_columns),
};

/* the awaits of this event of this queue, taken: each wakes its task */
enum
{
	AWAIT_TASK_ID,
	AWAIT_NAME,
	AWAIT_NCOLUMNS
};
static const DurableColumn await_columns[AWAIT_NCOLUMNS] = {
	[AWAIT_TASK_ID] = {"task_id", INT8OID},
	[AWAIT_NAME] = {"name", TEXTOID},
};
static DurableStatement event_awaits_take = {
	.name = "event_awaits_take",
	.sql = "DELETE FROM durable.event_waits"
	" WHERE partition_key = $1 AND queue_name = $2 AND event = $3"
	" RETURNING task_id, name",
	.nargs = 3, .argtypes = {INT4OID, TEXTOID, TEXTOID},
	DURABLE_COLUMNS(await_columns),
};

enum
{
	STORED_HASH,
	STORED_PAYLOAD,
	STORED_NCOLUMNS
};
static const DurableColumn stored_columns[STORED_NCOLUMNS] = {
	[STORED_HASH] = {"payload_hash", BYTEAOID},
	[STORED_PAYLOAD] = {"payload", JSONBOID},
};
static DurableStatement event_get = {
	.name = "event_get",
	.sql = "SELECT payload_hash, payload FROM durable.emitted_events"
	" WHERE partition_key = $1 AND queue_name = $2 AND event = $3"
	" AND emitted_at IS NOT NULL",
	.nargs = 3, .argtypes = {INT4OID, TEXTOID, TEXTOID},
	DURABLE_COLUMNS(stored_columns),
};

/*
 * wake_awaits
 *		An event was emitted: take its awaits, in a statement of its own
 *		whose snapshot sees the awaits we waited for, and wake each one's
 *		task on the task's own partition.
 */
static void
wake_awaits(const char *queue, const char *event, Datum *key, Jsonb *payload,
			TimestampTz now)
{
	Jsonb	   *ending = DurableWaitEnding("received", payload, now);
	uint64		n = DurableExecute(&event_awaits_take, key, NULL,
								   SPI_OK_DELETE_RETURNING, 0);
	int64	   *task_ids = palloc(sizeof(int64) * Max(n, 1));
	char	  **names = palloc(sizeof(char *) * Max(n, 1));

	/* the rows first: each wake-up runs a statement of its own */
	for (uint64 r = 0; r < n; r++)
	{
		task_ids[r] = DurableColumnInt64(r, AWAIT_TASK_ID);
		names[r] = DurableColumnText(r, AWAIT_NAME);
	}
	for (uint64 r = 0; r < n; r++)
	{
		DurableDetail detail;

		DurableDetailInit(&detail);
		DurableDetailText(&detail, "wait", names[r]);
		DurableDetailText(&detail, "queue", queue);
		DurableDetailText(&detail, "event", event);
		(void) DurableWakeWait(task_ids[r], names[r], ending,
							   DurableDetailFinish(&detail), now);
	}
}

/*
 * DurableEmit
 *		In the caller's transaction: record the event (payload may be NULL)
 *		in the queue and wake the queue's tasks that await it.  True the
 *		first time, false for the same payload again; 55U03 for another
 *		payload.  A restricted queue needs its enqueue grant (42501),
 *		checked before anything about the event is looked at; 42704 for an
 *		unknown queue.  SPI connected.
 */
bool
DurableEmit(const char *queue, const char *event, Jsonb *payload,
			TimestampTz now)
{
	bytea	   *hash;
	DurableQueue settings;
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		first;

	hash = payload ? DurableJsonbHash(payload) : NULL;
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

	first = DurableExecuteInQueue(&event_emit, args, nulls,
								  SPI_OK_INSERT_RETURNING, queue) == 1;
	if (first)
	{
		DurableCount(queue, DURABLE_COUNT_EVENTS_EMITTED, 1);
		wake_awaits(queue, event, args, payload, now);
	}
	else
	{
		bool		isnull;
		Datum		stored;

		if (DurableExecute(&event_get, args, NULL, SPI_OK_SELECT, 1) == 0)
			elog(ERROR, "event \"%s\" of queue \"%s\" vanished under its row lock",
				 event, queue);
		stored = DurableColumnDatum(0, STORED_HASH, &isnull);
		if (!DurableHashesEqual(isnull ? NULL : DatumGetByteaPP(stored), hash))
			ereport(ERROR,
					errcode(ERRCODE_DURABLE_IDEMPOTENCY_CONFLICT),
					errmsg("event \"%s\" of queue \"%s\" was already emitted with another payload",
						   event, queue),
					errdetail("Events are facts: the first emit of an event wins."),
					errhint("Emit a new fact under a new event name."));
	}
	return first;
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

static DurableStatement event_place = {
	.name = "event_place",
	.sql = "INSERT INTO durable.emitted_events (partition_key, queue_name, event, created_at)"
	" VALUES ($1, $2, $3, $4)"
	" ON CONFLICT (partition_key, queue_name, event) DO NOTHING",
	.nargs = 4, .argtypes = {INT4OID, TEXTOID, TEXTOID, TIMESTAMPTZOID},
};

enum
{
	LOCKED_EMITTED,
	LOCKED_PAYLOAD,
	LOCKED_NCOLUMNS
};
static const DurableColumn locked_columns[LOCKED_NCOLUMNS] = {
	[LOCKED_EMITTED] = {"emitted", BOOLOID},
	[LOCKED_PAYLOAD] = {"payload", JSONBOID},
};
static DurableStatement event_lock = {
	.name = "event_lock",
	.sql = "SELECT emitted_at IS NOT NULL AS emitted, payload"
	" FROM durable.emitted_events"
	" WHERE partition_key = $1 AND queue_name = $2 AND event = $3"
	" FOR SHARE",
	.nargs = 3, .argtypes = {INT4OID, TEXTOID, TEXTOID},
	DURABLE_COLUMNS(locked_columns),
};

static DurableStatement event_wait_insert = {
	.name = "event_wait_insert",
	.sql = "INSERT INTO durable.event_waits (partition_key, queue_name, event, task_id, name)"
	" VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
	.nargs = 5, .argtypes = {INT4OID, TEXTOID, TEXTOID, INT8OID, TEXTOID},
};

/* by the task's wait: the event's queue may be gone (dropped) */
static DurableStatement event_wait_delete = {
	.name = "event_wait_delete",
	.sql = "DELETE FROM durable.event_waits WHERE task_id = $1 AND name = $2",
	.nargs = 2, .argtypes = {INT8OID, TEXTOID},
};

/*
 * DurableAwait
 *		Await the event of the task's own queue (queue NULL), or of queue,
 *		which then needs its work grant where it is restricted (42501,
 *		before anything about the event is told), for the task held with
 *		that fence: 'received' and its payload when the event has been
 *		emitted, before the await or while it waited; else 'waiting': the
 *		lease ends and the task waits for the event or the timeout (NULL:
 *		none).  Replayed after the timeout, 'timed_out', for ever.  Sets
 *		*payload_out (NULL but for 'received').  SPI connected.
 */
const char *
DurableAwait(int64 task_id, int64 fence, const char *name, const char *event,
			 const Interval *timeout, const char *queue, TimestampTz now,
			 Jsonb **payload_out)
{
	DurableTask task;
	DurableWait wait;
	DurableQueue settings;
	Jsonb	   *args;
	Datum		values[5];
	const char *status;
	Jsonb	   *payload = NULL;

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
			DurableExecute(&event_wait_delete, values + 3, NULL,
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
		DurableExecuteInQueue(&event_place, place, NULL, SPI_OK_INSERT, queue);
		if (DurableExecute(&event_lock, values, NULL, SPI_OK_SELECT, 1) == 0)
			elog(ERROR, "event \"%s\" of queue \"%s\" vanished under its row lock",
				 event, queue);
		if (DurableColumnBool(0, LOCKED_EMITTED))
		{
			Datum		d = DurableColumnDatum(0, LOCKED_PAYLOAD, &isnull);

			payload = isnull ? NULL : DatumGetJsonbPCopy(d);
			DurableWaitRecord(&task, name, "event", args, "waiting", until,
							  NULL, 0, now);
			DurableWaitResolve(&task, name, "received", payload, now);
			status = "received";
		}
		else
		{
			DurableExecute(&event_wait_insert, values, NULL, SPI_OK_INSERT, 0);
			DurableWaitRecord(&task, name, "event", args, "waiting", until,
							  NULL, 0, now);
			DurableWaitPark(&task, name, "event", until, now);
			status = "waiting";
		}
	}
	*payload_out = payload;
	return status;
}
