/*-------------------------------------------------------------------------
 *
 * child.c
 *	  Child tasks: durable_spawn and durable_join.
 *
 * A spawn is recorded among the parent's waits under its name (kind
 * 'spawn', with the child's id), so that a replay returns the same child,
 * and the child records its parent (parent_id).  A join waits until the
 * children it names have finished: the last of them to finish wakes the
 * parent (DurableWakeParent in task.c, where every finish passes).  Both
 * sides take the parent's row before they look at the children, so a
 * join and the last child's finish never miss each other.  A cancelled
 * parent's unfinished children are cancelled with it (task.c too).
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/json.h"

/* a jsonb's SHA-256 in hex, or NULL for none */
static char *
jsonb_sha256_hex(Jsonb *value)
{
	if (value == NULL)
		return NULL;
	return TextDatumGetCString(DirectFunctionCall2(binary_encode,
												   PointerGetDatum(DurableJsonbHash(value)),
												   CStringGetTextDatum("hex")));
}

/*
 * spawn_args
 *		What a spawn asked, as its wait records it: the queue, the payload's
 *		hash and, unless legacy, every option under "options", so that a
 *		replay with any other argument is 55U03 rather than the first child
 *		handed back as if it were the one asked for.  Times are in UTC and
 *		intervals their fields, never a text form that DateStyle, TimeZone
 *		or IntervalStyle could change between two sessions.  The
 *		legacy form (queue and payload only) is what 0.4.0 recorded: a spawn
 *		made then still replays against what it was made with.
 */
static Jsonb *
spawn_args(const DurableEnqueueRequest *req, bool legacy)
{
	DurableDetail detail;
	DurableDetail options;

	DurableDetailInit(&detail);
	DurableDetailText(&detail, "queue", req->queue);
	DurableDetailText(&detail, "payload_sha256", jsonb_sha256_hex(req->payload));
	if (legacy)
		return DurableDetailFinish(&detail);

	DurableDetailInit(&options);
	if (req->run_at == 0)
		DurableDetailText(&options, "run_at", NULL);
	else
	{
		char		buf[MAXDATELEN + 1];
		int			utc = 0;

		DurableDetailText(&options, "run_at",
						  JsonEncodeDateTime(buf, TimestampTzGetDatum(req->run_at),
											 TIMESTAMPTZOID, &utc));
	}
	DurableDetailInt(&options, "priority", req->priority);
	DurableDetailText(&options, "class", req->class);
	if (req->max_attempts == 0)
		DurableDetailText(&options, "max_attempts", NULL);
	else
		DurableDetailInt(&options, "max_attempts", req->max_attempts);
	DurableIntervalDetail(&options, "deadline", req->deadline);
	DurableDetailText(&options, "workflow_version",
					  req->workflow_version ? text_to_cstring(req->workflow_version) : NULL);
	DurableDetailText(&options, "metadata_sha256", jsonb_sha256_hex(req->metadata));
	DurableDetailText(&options, "concurrency_key", req->concurrency_key);
	DurableDetailJsonb(&detail, "options", DurableDetailFinish(&options));
	return DurableDetailFinish(&detail);
}

/* whether a spawn's wait records its options (0.5.0 and later) */
static bool
spawn_recorded_with_options(const DurableWait *wait)
{
	return wait->args != NULL && strcmp(wait->kind, "spawn") == 0 &&
		DatumGetBool(DirectFunctionCall2(jsonb_exists, JsonbPGetDatum(wait->args),
										 CStringGetTextDatum("options")));
}

/*
 * durable_spawn(task_id bigint, fence bigint, name text, queue text,
 *		payload jsonb = '{}', run_at timestamptz = NULL, priority int = 0,
 *		class text = 'idempotent', max_attempts int = NULL,
 *		deadline interval = NULL, workflow_version text = NULL,
 *		metadata jsonb = NULL, concurrency_key text = NULL) RETURNS bigint
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
	DurableQueue settings;
	DurableTask task;
	DurableWait wait;
	DurableDetail detail;
	Jsonb	   *args;
	int64		child_id;

	req.queue = DurableNameArg(fcinfo, 3, "queue name");
	DurableRequireArg(fcinfo, 4, "payload");
	req.payload = DurableJsonbArg(fcinfo, 4, "payload");
	DurableEnqueueArgs(fcinfo, 5, 12, &req);
	req.parent_id = task_id;

	/* the request, by its hashes: a replay must spawn the same child */
	args = spawn_args(&req, false);

	SPI_connect();
	DurableRequireSingleServer("durable_spawn()");
	DurableTaskHeld(task_id, fence, &task);
	if (DurableWaitFetch(&task, name, &wait))
	{
		DurableWaitCheck(&task, name, &wait, "spawn",
						 spawn_recorded_with_options(&wait) ? args :
						 spawn_args(&req, true));
		child_id = wait.child_id;
	}
	else
	{
		DurableQueueGetShared(req.queue, &settings);
		DurableCheckRestrictedQueue(req.queue, settings.restricted,
									DURABLE_PRIV_ENQUEUE);
		child_id = DurableEnqueue(&req, &settings, now);
		DurableWaitRecord(&task, name, "spawn", args, "spawned", 0, NULL,
						  child_id, now);
		DurableDetailInit(&detail);
		DurableDetailText(&detail, "child", name);
		DurableDetailInt(&detail, "task_id", child_id);
		DurableDetailText(&detail, "queue", req.queue);
		DurableAppendEvent(&task, now, "spawned", NULL,
						   DurableDetailFinish(&detail), NULL, 0);
	}
	SPI_finish();
	PG_RETURN_INT64(child_id);
}

/* a join's arguments */
static Jsonb *
join_args(ArrayType *children, const Interval *timeout)
{
	DurableDetail args;

	DurableDetailInit(&args);
	if (children == NULL)
		DurableDetailText(&args, "children", NULL);
	else
	{
		Datum	   *elems;
		bool	   *elnulls;
		int			n;

		deconstruct_array(children, TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &elnulls, &n);
		appendStringInfoString(&args.buf, "\"children\": [");
		for (int i = 0; i < n; i++)
		{
			if (elnulls[i])
				ereport(ERROR,
						errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("child names must not be null"));
			if (i > 0)
				appendStringInfoString(&args.buf, ", ");
			escape_json(&args.buf, TextDatumGetCString(elems[i]));
		}
		appendStringInfoChar(&args.buf, ']');
	}
	DurableIntervalDetail(&args, "timeout", timeout);
	return DurableDetailFinish(&args);
}

/* is name among the children a join names (all, when none) */
static bool
joined(Jsonb *args, const char *name)
{
	Datum		list;

	list = DirectFunctionCall2(jsonb_object_field, JsonbPGetDatum(args),
							   CStringGetTextDatum("children"));
	if (JB_ROOT_IS_SCALAR(DatumGetJsonbP(list)))
		return true;			/* null: every child */
	return DatumGetBool(DirectFunctionCall2(jsonb_exists, list,
											CStringGetTextDatum(name)));
}

/*
 * children_report
 *		The state of the children a join names, as
 *		[{name, task_id, state, result, error}, ...] in the order they were
 *		spawned (state null for a child that retention has removed).  Sets
 *		*all_finished.  Raises 22023 for a name the task never spawned.
 */
static Jsonb *
children_report(DurableTask *task, Jsonb *args, ArrayType *names,
				bool *all_finished)
{
	Datum		key[2];
	uint64		n;
	char	  **child_names;
	int64	   *child_ids;
	int			count = 0;
	Datum	   *ids;
	Datum	   *partitions;
	StringInfoData buf;

	key[0] = Int32GetDatum(task->partition);
	key[1] = Int64GetDatum(task->task_id);
	n = DurableExecuteStmt(STMT_SPAWNED, key, NULL, SPI_OK_SELECT, 0);
	child_names = palloc(sizeof(char *) * Max(n, 1));
	child_ids = palloc(sizeof(int64) * Max(n, 1));
	for (uint64 r = 0; r < n; r++)
	{
		char	   *name = DurableResultText(r, 1);

		if (!joined(args, name))
			continue;
		child_names[count] = name;
		child_ids[count] = DurableResultInt64(r, 2);
		count++;
	}
	if (names != NULL)
	{
		Datum	   *elems;
		bool	   *elnulls;
		int			nelems;

		deconstruct_array(names, TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &elnulls, &nelems);
		for (int i = 0; i < nelems; i++)
		{
			char	   *name = TextDatumGetCString(elems[i]);
			bool		found = false;

			for (int j = 0; j < count && !found; j++)
				found = strcmp(child_names[j], name) == 0;
			if (!found)
				ereport(ERROR,
						errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("task %lld has no child named \"%s\"",
							   (long long) task->task_id, name),
						errhint("Spawn it with durable_spawn() before the join."));
		}
	}

	ids = palloc(sizeof(Datum) * Max(count, 1));
	partitions = palloc(sizeof(Datum) * Max(count, 1));
	for (int i = 0; i < count; i++)
	{
		ids[i] = Int64GetDatum(child_ids[i]);
		partitions[i] = Int32GetDatum(DURABLE_TASK_PARTITION(child_ids[i]));
	}
	{
		Datum		states[2];

		states[0] = PointerGetDatum(construct_array(ids, count, INT8OID, sizeof(int64),
													FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		states[1] = PointerGetDatum(construct_array(partitions, count, INT4OID,
													sizeof(int32), true, TYPALIGN_INT));
		n = DurableExecuteStmt(STMT_CHILDREN_STATES, states, NULL, SPI_OK_SELECT, 0);
	}

	*all_finished = true;
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int i = 0; i < count; i++)
	{
		uint64		r;
		const char *state = NULL;

		for (r = 0; r < n; r++)
			if (DurableResultInt64(r, 1) == child_ids[i])
			{
				state = DurableResultText(r, 2);
				break;
			}
		/* a child retention has removed had finished */
		if (state != NULL && !DurableTaskIsTerminal(state))
			*all_finished = false;
		if (i > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoString(&buf, "{\"name\": ");
		escape_json(&buf, child_names[i]);
		appendStringInfo(&buf, ", \"task_id\": " INT64_FORMAT ", \"state\": ",
						 child_ids[i]);
		if (state == NULL)
			appendStringInfoString(&buf, "null");
		else
			escape_json(&buf, state);
		for (int col = 3; col <= 4; col++)
		{
			bool		isnull = true;
			Datum		d = r < n ? DurableResultDatum(r, col, &isnull) : (Datum) 0;

			appendStringInfoString(&buf, col == 3 ? ", \"result\": " : ", \"error\": ");
			if (isnull)
				appendStringInfoString(&buf, "null");
			else
			{
				Jsonb	   *jb = DatumGetJsonbP(d);

				(void) JsonbToCString(&buf, &jb->root, VARSIZE(jb));
			}
		}
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoChar(&buf, ']');
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
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
	DurableTask task;
	DurableWait wait;
	Jsonb	   *args;
	Jsonb	   *report = NULL;
	const char *status;
	bool		all_finished;
	bool		known;
	TimestampTz until;

	if (names != NULL && ARR_NDIM(names) > 1)
		ereport(ERROR,
				errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				errmsg("children must be a one-dimensional array"));
	if (!PG_ARGISNULL(4))
		timeout = DurablePositiveIntervalArg(fcinfo, 4, "timeout");
	args = join_args(names, timeout);
	InitMaterializedSRF(fcinfo, 0);

	SPI_connect();
	DurableRequireSingleServer("durable_join()");
	DurableTaskHeld(task_id, fence, &task);
	known = DurableWaitFetch(&task, name, &wait);
	if (known)
		DurableWaitCheck(&task, name, &wait, "join", args);
	if (known && strcmp(wait.status, "waiting") != 0)
	{
		status = wait.status;
		report = wait.payload;
	}
	else
	{
		until = known ? wait.until :
			timeout ? DurableTimeAfter(now, timeout, "timeout") : 0;
		report = children_report(&task, args, names, &all_finished);
		if (!known)
			DurableWaitRecord(&task, name, "join", args, "waiting", until,
							  NULL, 0, now);
		if (all_finished || (until != 0 && now >= until))
		{
			status = all_finished ? "done" : "timed_out";
			DurableWaitResolve(&task, name, status, report, now);
		}
		else
		{
			DurableWaitPark(&task, name, "join", until, now);
			status = "waiting";
			report = NULL;
		}
	}
	DurableWaitResult(fcinfo, status, report);
	SPI_finish();
	return (Datum) 0;
}
