/*-------------------------------------------------------------------------
 *
 * child.c
 *	  Child tasks: durable_spawn and durable_join.
 *
 * A spawn is recorded among the parent's waits under its name (kind
 * 'spawn', with the child's id), so that a replay returns the same child,
 * and the child records its parent (parent_id).  A join waits until the
 * children it names have finished: the last of them to finish wakes the
 * parent (DurableWakeParent in wake.c, which every finish calls from
 * move.c).  A cancelled parent's unfinished children are cancelled with
 * it (move.c).
 *
 * A child's finish marks its spawn in the parent's row (child_finished),
 * and a join reads the marks: both sides take the parent's row, so a join
 * and the last child's finish never miss each other, and whether a join's
 * children have all finished is read from that one row, on the parent's
 * node of a Citus cluster, never from the children's rows on other nodes
 * (whose commit a cluster makes visible one node after the other).
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
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
 * DurableSpawn
 *		Enqueue the child req asks for once per (parent, name), for the
 *		parent held with that fence (req->parent_id); a replay returns the
 *		same id, and keeps the parent's lease.  Raises 55U01 for a stale
 *		fence, 55U03 for a name used with any other argument, 42704 for an
 *		unknown queue, 42501 for a queue the caller may not enqueue into.
 *		SPI connected.
 */
int64
DurableSpawn(int64 fence, const char *name, const DurableEnqueueRequest *req,
			 TimestampTz now)
{
	int64		task_id = req->parent_id;
	DurableQueue settings;
	DurableTask task;
	DurableWait wait;
	DurableDetail detail;
	Jsonb	   *args;
	int64		child_id;

	/* the request, by its hashes: a replay must spawn the same child */
	args = spawn_args(req, false);

	DurableTaskHeld(task_id, fence, &task);
	if (DurableWaitFetch(&task, name, &wait))
	{
		DurableWaitCheck(&task, name, &wait, "spawn",
						 spawn_recorded_with_options(&wait) ? args :
						 spawn_args(req, true));
		child_id = wait.child_id;
	}
	else
	{
		/* a child charges what its parent charges (spend.c) */
		DurableEnqueueRequest child = *req;

		child.inherited_budgets = DurableTaskBudgets(&task);
		DurableQueueGetShared(req->queue, &settings);
		DurableCheckRestrictedQueue(req->queue, settings.restricted,
									DURABLE_PRIV_ENQUEUE);
		child_id = DurableEnqueue(&child, &settings, now);
		DurableWaitRecord(&task, name, "spawn", args, "spawned", 0, NULL,
						  child_id, now);
		DurableDetailInit(&detail);
		DurableDetailText(&detail, "child", name);
		DurableDetailInt(&detail, "task_id", child_id);
		DurableDetailText(&detail, "queue", req->queue);
		DurableAppendEvent(&task, now, "spawned", NULL,
						   DurableDetailFinish(&detail), NULL, 0);
	}
	return child_id;
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
		DurableDetailListStart(&args, "children");
		for (int i = 0; i < n; i++)
		{
			if (elnulls[i])
				ereport(ERROR,
						errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("child names must not be null"));
			DurableDetailListText(&args, TextDatumGetCString(elems[i]));
		}
		DurableDetailListEnd(&args);
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

/* the children a task spawned, in the order it spawned them */
enum
{
	SPAWNED_NAME,
	SPAWNED_TASK_ID,
	SPAWNED_MARKED,
	SPAWNED_NCOLUMNS
};
static const DurableColumn spawned_columns[SPAWNED_NCOLUMNS] = {
	[SPAWNED_NAME] = {"key", TEXTOID},
	[SPAWNED_TASK_ID] = {"task_id", INT8OID},
	[SPAWNED_MARKED] = {"marked", BOOLOID},
};
/* the statements of one task, by its key */
enum
{
	KEY_PARTITION,
	KEY_TASK_ID,
	KEY_NPARAMS
};
static const DurableParam task_key_params[KEY_NPARAMS] = {
	[KEY_PARTITION] = {"partition", INT4OID},
	[KEY_TASK_ID] = {"task_id", INT8OID},
};
static DurableStatement spawned = {
	.name = "spawned",
	.sql = "SELECT w.key, (w.value ->> 'task_id')::int8 AS task_id,"
	" w.value ? 'child_finished' AS marked"
	" FROM durable.live_tasks t, pg_catalog.jsonb_each(t.waits) w"
	" WHERE t.partition_key = $partition AND t.task_id = $task_id"
	" AND w.value ->> 'kind' = 'spawn'"
	" ORDER BY 2",
	DURABLE_PARAMS(task_key_params),
	DURABLE_COLUMNS(spawned_columns),
};

/* the state of tasks wherever they are, live or in history */
enum
{
	CHILD_TASK_ID,
	CHILD_STATE,
	CHILD_RESULT,
	CHILD_ERROR,
	CHILD_NCOLUMNS
};
static const DurableColumn child_columns[CHILD_NCOLUMNS] = {
	[CHILD_TASK_ID] = {"task_id", INT8OID},
	[CHILD_STATE] = {"state", TEXTOID},
	[CHILD_RESULT] = {"result", JSONBOID},
	[CHILD_ERROR] = {"last_error", JSONBOID},
};
/* a live task's row, once no transaction that moves it is under way */
static DurableStatement child_settle = {
	.name = "child_settle",
	.sql = "SELECT FROM durable.live_tasks WHERE partition_key = $partition"
	" AND task_id = $task_id FOR KEY SHARE",
	DURABLE_PARAMS(task_key_params),
};

enum
{
	STATES_TASK_IDS,
	STATES_PARTITIONS,
	STATES_NPARAMS
};
static const DurableParam child_states_params[STATES_NPARAMS] = {
	[STATES_TASK_IDS] = {"task_ids", INT8ARRAYOID},
	[STATES_PARTITIONS] = {"partitions", INT4ARRAYOID},
};

static DurableStatement child_states = {
	.name = "child_states",
	.sql = "SELECT t.task_id, t.state::text, t.result, t.last_error"
	" FROM durable.tasks t"
	" WHERE t.partition_key = ANY ($partitions) AND t.task_id = ANY ($task_ids)",
	DURABLE_PARAMS(child_states_params),
	DURABLE_COLUMNS(child_columns),
};

/* the state of the child of row r of child_states */
static DurableTaskState
child_state(DurableResult res, uint64 r)
{
	return DurableParseTaskState(DurableGetText(res, r, CHILD_STATE));
}

/*
 * settle_marked
 *		Wait for the commit of each marked child that a result of
 *		child_states read as unfinished; true when there was one.
 */
static bool
settle_marked(const int64 *child_ids, const bool *marked, int count,
			  DurableResult res)
{
	int64	   *pending = palloc(sizeof(int64) * Max(count, 1));
	int			npending = 0;

	for (int i = 0; i < count; i++)
	{
		if (!marked[i])
			continue;
		for (uint64 r = 0; r < res.rows; r++)
			if (DurableGetInt64(res, r, CHILD_TASK_ID) == child_ids[i] &&
				!DurableTaskIsTerminal(child_state(res, r)))
				pending[npending++] = child_ids[i];
	}
	for (int i = 0; i < npending; i++)
	{
		Datum		key[KEY_NPARAMS];

		key[KEY_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(pending[i]));
		key[KEY_TASK_ID] = Int64GetDatum(pending[i]);
		DurableRun(&child_settle, key, NULL, SPI_OK_SELECT, 0);
	}
	return npending > 0;
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
	DurableResult res;
	Datum		key[KEY_NPARAMS];
	uint64		n;
	char	  **child_names;
	int64	   *child_ids;
	bool	   *marked;
	int			count = 0;
	Datum	   *ids;
	Datum	   *partitions;
	StringInfoData buf;

	key[KEY_PARTITION] = Int32GetDatum(task->partition);
	key[KEY_TASK_ID] = Int64GetDatum(task->task_id);
	res = DurableRun(&spawned, key, NULL, SPI_OK_SELECT, 0);
	n = res.rows;
	child_names = palloc(sizeof(char *) * Max(n, 1));
	child_ids = palloc(sizeof(int64) * Max(n, 1));
	marked = palloc(sizeof(bool) * Max(n, 1));
	for (uint64 r = 0; r < n; r++)
	{
		char	   *name = DurableGetText(res, r, SPAWNED_NAME);

		if (!joined(args, name))
			continue;
		child_names[count] = name;
		child_ids[count] = DurableGetInt64(res, r, SPAWNED_TASK_ID);
		marked[count] = DurableGetBool(res, r, SPAWNED_MARKED);
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
		Datum		states[STATES_NPARAMS];

		states[STATES_TASK_IDS] = PointerGetDatum(construct_array(ids, count, INT8OID, sizeof(int64),
																  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		states[STATES_PARTITIONS] = PointerGetDatum(construct_array(partitions, count, INT4OID,
																	sizeof(int32), true, TYPALIGN_INT));
		res = DurableRun(&child_states, states, NULL, SPI_OK_SELECT, 0);

		/*
		 * A child whose finish has marked its spawn and that still reads
		 * unfinished is being committed on another node of a cluster, which
		 * has committed on ours: wait for it, and read again.
		 */
		if (settle_marked(child_ids, marked, count, res))
			res = DurableRun(&child_states, states, NULL, SPI_OK_SELECT, 0);
		n = res.rows;
	}

	*all_finished = true;
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int i = 0; i < count; i++)
	{
		uint64		r;
		const char *state = NULL;

		for (r = 0; r < n; r++)
			if (DurableGetInt64(res, r, CHILD_TASK_ID) == child_ids[i])
			{
				state = DurableGetText(res, r, CHILD_STATE);
				break;
			}
		/* a child retention has removed had finished */
		if (state != NULL && !DurableTaskIsTerminal(DurableParseTaskState(state)))
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
		for (int col = CHILD_RESULT; col <= CHILD_ERROR; col++)
		{
			bool		isnull = true;
			Datum		d = r < n ? DurableGetDatum(res, r, col, &isnull) : (Datum) 0;

			appendStringInfoString(&buf, col == CHILD_RESULT ? ", \"result\": " : ", \"error\": ");
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
 * DurableJoin
 *		Join the children of the task held with that fence that names (all,
 *		when NULL, else a one-dimensional array) names: 'done' and their
 *		report once every one has finished; else 'waiting' (the lease ends,
 *		the task waits until the last of them finishes or the timeout, if
 *		any, passes); replayed after the timeout, 'timed_out' for ever.
 *		Sets *report (NULL while waiting).  SPI connected.
 */
const char *
DurableJoin(int64 task_id, int64 fence, const char *name, ArrayType *names,
			const Interval *timeout, TimestampTz now, Jsonb **report_out)
{
	DurableTask task;
	DurableWait wait;
	Jsonb	   *args;
	Jsonb	   *report = NULL;
	const char *status;
	bool		all_finished;
	bool		known;
	TimestampTz until;

	args = join_args(names, timeout);
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
	*report_out = report;
	return status;
}
