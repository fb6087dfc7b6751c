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
enum
{
	EMIT_PARTITION,
	EMIT_QUEUE,
	EMIT_EVENT,
	EMIT_PAYLOAD,
	EMIT_PAYLOAD_HASH,
	EMIT_NOW,
	EMIT_ROLE,
	EMIT_NPARAMS
};
static const DurableParam event_emit_params[EMIT_NPARAMS] = {
	[EMIT_PARTITION] = {"partition", INT4OID},
	[EMIT_QUEUE] = {"queue", TEXTOID},
	[EMIT_EVENT] = {"event", TEXTOID},
	[EMIT_PAYLOAD] = {"payload", JSONBOID},
	[EMIT_PAYLOAD_HASH] = {"payload_hash", BYTEAOID},
	[EMIT_NOW] = {"now", TIMESTAMPTZOID},
	[EMIT_ROLE] = {"role", TEXTOID},
};
static DurableStatement event_emit = {
	.name = "event_emit",
	.sql = "INSERT INTO durable.emitted_events AS e (partition_key, queue_name, event,"
	" payload, payload_hash, emitted_at, role, created_at)"
	" VALUES ($partition, $queue, $event, $payload, $payload_hash, $now, $role, $now)"
	" ON CONFLICT (partition_key, queue_name, event) DO UPDATE SET"
	" payload = EXCLUDED.payload, payload_hash = EXCLUDED.payload_hash,"
	" emitted_at = EXCLUDED.emitted_at, role = EXCLUDED.role"
	" WHERE e.emitted_at IS NULL"
	" RETURNING 1 AS emitted",
	DURABLE_PARAMS(event_emit_params),
	DURABLE_COLUMNS(emitted_columns),
};

/* the statements of one event of a queue, by its key */
enum
{
	KEY_PARTITION,
	KEY_QUEUE,
	KEY_EVENT,
	KEY_NPARAMS
};
static const DurableParam event_key_params[KEY_NPARAMS] = {
	[KEY_PARTITION] = {"partition", INT4OID},
	[KEY_QUEUE] = {"queue", TEXTOID},
	[KEY_EVENT] = {"event", TEXTOID},
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
	" WHERE partition_key = $partition AND queue_name = $queue AND event = $event"
	" RETURNING task_id, name",
	DURABLE_PARAMS(event_key_params),
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
	" WHERE partition_key = $partition AND queue_name = $queue AND event = $event"
	" AND emitted_at IS NOT NULL",
	DURABLE_PARAMS(event_key_params),
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
	DurableResult res = DurableRun(&event_awaits_take, key, NULL,
								   SPI_OK_DELETE_RETURNING, 0);
	uint64		n = res.rows;
	int64	   *task_ids = palloc(sizeof(int64) * Max(n, 1));
	char	  **names = palloc(sizeof(char *) * Max(n, 1));

	/* the rows first: each wake-up runs a statement of its own */
	for (uint64 r = 0; r < n; r++)
	{
		task_ids[r] = DurableGetInt64(res, r, AWAIT_TASK_ID);
		names[r] = DurableGetText(res, r, AWAIT_NAME);
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
	DurableResult res;
	bytea	   *hash;
	DurableQueue settings;
	Datum		args[EMIT_NPARAMS];
	char		nulls[EMIT_NPARAMS] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Datum		key[KEY_NPARAMS];
	bool		first;

	hash = payload ? DurableJsonbHash(payload) : NULL;
	/* as an enqueue: the queue cannot be dropped under the new event */
	DurableQueueGetShared(queue, &settings);
	DurableCheckRestrictedQueue(queue, settings.restricted, DURABLE_PRIV_ENQUEUE);

	key[KEY_PARTITION] = Int32GetDatum(DurableQueueKeyPartition(&settings, event));
	key[KEY_QUEUE] = CStringGetTextDatum(queue);
	key[KEY_EVENT] = CStringGetTextDatum(event);
	args[EMIT_PARTITION] = key[KEY_PARTITION];
	args[EMIT_QUEUE] = key[KEY_QUEUE];
	args[EMIT_EVENT] = key[KEY_EVENT];
	args[EMIT_PAYLOAD] = JsonbPGetDatum(payload);
	nulls[EMIT_PAYLOAD] = payload ? ' ' : 'n';
	args[EMIT_PAYLOAD_HASH] = PointerGetDatum(hash);
	nulls[EMIT_PAYLOAD_HASH] = hash ? ' ' : 'n';
	args[EMIT_NOW] = TimestampTzGetDatum(now);
	args[EMIT_ROLE] = CStringGetTextDatum(DurableCallerName());

	res = DurableRunInQueue(&event_emit, args, nulls,
							SPI_OK_INSERT_RETURNING, queue);
	first = res.rows == 1;
	if (first)
	{
		DurableCount(queue, DURABLE_COUNT_EVENTS_EMITTED, 1);
		wake_awaits(queue, event, key, payload, now);
	}
	else
	{
		bool		isnull;
		Datum		stored;

		res = DurableRun(&event_get, key, NULL, SPI_OK_SELECT, 1);
		if (res.rows == 0)
			elog(ERROR, "event \"%s\" of queue \"%s\" vanished under its row lock",
				 event, queue);
		stored = DurableGetDatum(res, 0, STORED_HASH, &isnull);
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

enum
{
	PLACE_PARTITION,
	PLACE_QUEUE,
	PLACE_EVENT,
	PLACE_NOW,
	PLACE_NPARAMS
};
static const DurableParam event_place_params[PLACE_NPARAMS] = {
	[PLACE_PARTITION] = {"partition", INT4OID},
	[PLACE_QUEUE] = {"queue", TEXTOID},
	[PLACE_EVENT] = {"event", TEXTOID},
	[PLACE_NOW] = {"now", TIMESTAMPTZOID},
};
static DurableStatement event_place = {
	.name = "event_place",
	.sql = "INSERT INTO durable.emitted_events (partition_key, queue_name, event, created_at)"
	" VALUES ($partition, $queue, $event, $now)"
	" ON CONFLICT (partition_key, queue_name, event) DO NOTHING",
	DURABLE_PARAMS(event_place_params),
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
	" WHERE partition_key = $partition AND queue_name = $queue AND event = $event"
	" FOR SHARE",
	DURABLE_PARAMS(event_key_params),
	DURABLE_COLUMNS(locked_columns),
};

enum
{
	INSERT_PARTITION,
	INSERT_QUEUE,
	INSERT_EVENT,
	INSERT_TASK_ID,
	INSERT_NAME,
	INSERT_NPARAMS
};
static const DurableParam event_wait_insert_params[INSERT_NPARAMS] = {
	[INSERT_PARTITION] = {"partition", INT4OID},
	[INSERT_QUEUE] = {"queue", TEXTOID},
	[INSERT_EVENT] = {"event", TEXTOID},
	[INSERT_TASK_ID] = {"task_id", INT8OID},
	[INSERT_NAME] = {"name", TEXTOID},
};
static DurableStatement event_wait_insert = {
	.name = "event_wait_insert",
	.sql = "INSERT INTO durable.event_waits (partition_key, queue_name, event, task_id, name)"
	" VALUES ($partition, $queue, $event, $task_id, $name) ON CONFLICT DO NOTHING",
	DURABLE_PARAMS(event_wait_insert_params),
};

/* by the task's wait: the event's queue may be gone (dropped) */
enum
{
	DELETE_TASK_ID,
	DELETE_NAME,
	DELETE_NPARAMS
};
static const DurableParam event_wait_delete_params[DELETE_NPARAMS] = {
	[DELETE_TASK_ID] = {"task_id", INT8OID},
	[DELETE_NAME] = {"name", TEXTOID},
};
static DurableStatement event_wait_delete = {
	.name = "event_wait_delete",
	.sql = "DELETE FROM durable.event_waits WHERE task_id = $task_id AND name = $name",
	DURABLE_PARAMS(event_wait_delete_params),
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
	DurableResult res;
	DurableTask task;
	DurableWait wait;
	DurableQueue settings;
	Jsonb	   *args;
	Datum		key[KEY_NPARAMS];
	const char *status;
	Jsonb	   *payload = NULL;

	DurableTaskHeld(task_id, fence, &task);
	if (queue == NULL)
		queue = task.queue;
	else if (strcmp(queue, task.queue) != 0)
		DurableCheckQueueAccess(queue, DURABLE_PRIV_WORK);
	args = await_args(event, timeout, queue);
	key[KEY_QUEUE] = CStringGetTextDatum(queue);
	key[KEY_EVENT] = CStringGetTextDatum(event);

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
			Datum		ended[DELETE_NPARAMS];

			ended[DELETE_TASK_ID] = Int64GetDatum(task_id);
			ended[DELETE_NAME] = CStringGetTextDatum(name);
			res = DurableRun(&event_wait_delete, ended, NULL, SPI_OK_DELETE, 0);
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
		Datum		place[PLACE_NPARAMS];
		bool		isnull;

		/* as an emit: the queue cannot be dropped under the event's row */
		DurableQueueGetShared(queue, &settings);
		key[KEY_PARTITION] = Int32GetDatum(DurableQueueKeyPartition(&settings, event));
		place[PLACE_PARTITION] = key[KEY_PARTITION];
		place[PLACE_QUEUE] = key[KEY_QUEUE];
		place[PLACE_EVENT] = key[KEY_EVENT];
		place[PLACE_NOW] = TimestampTzGetDatum(now);

		/* the event's row exists and is ours to hold before we look */
		DurableRunInQueue(&event_place, place, NULL, SPI_OK_INSERT, queue);
		res = DurableRun(&event_lock, key, NULL, SPI_OK_SELECT, 1);
		if (res.rows == 0)
			elog(ERROR, "event \"%s\" of queue \"%s\" vanished under its row lock",
				 event, queue);
		if (DurableGetBool(res, 0, LOCKED_EMITTED))
		{
			Datum		d = DurableGetDatum(res, 0, LOCKED_PAYLOAD, &isnull);

			payload = isnull ? NULL : DatumGetJsonbPCopy(d);
			DurableWaitRecord(&task, name, "event", args, "waiting", until,
							  NULL, 0, now);
			DurableWaitResolve(&task, name, "received", payload, now);
			status = "received";
		}
		else
		{
			Datum		insert[INSERT_NPARAMS];

			insert[INSERT_PARTITION] = key[KEY_PARTITION];
			insert[INSERT_QUEUE] = key[KEY_QUEUE];
			insert[INSERT_EVENT] = key[KEY_EVENT];
			insert[INSERT_TASK_ID] = Int64GetDatum(task_id);
			insert[INSERT_NAME] = CStringGetTextDatum(name);
			res = DurableRun(&event_wait_insert, insert, NULL, SPI_OK_INSERT, 0);
			DurableWaitRecord(&task, name, "event", args, "waiting", until,
							  NULL, 0, now);
			DurableWaitPark(&task, name, "event", until, now);
			status = "waiting";
		}
	}
	*payload_out = payload;
	return status;
}
