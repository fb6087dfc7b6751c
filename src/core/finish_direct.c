/*-------------------------------------------------------------------------
 *
 * finish_direct.c
 *	  A task's finish without a statement, on one server or in its shards
 *	  here on Citus: its live row moved to history through the table and
 *	  index access methods (store/relocate.c).
 *
 * It takes the row finish.c's finish_task statement would take (MOVE_WHERE:
 * the task's key, fence, state and steps in doubt, tested again under the
 * row's lock) and writes the row in history that statement would write:
 * the finish column of each column in core/row.h.  The two must change
 * together: sql/direct_finish.sql checks every column of the row in
 * history against those expressions, evaluated on the live row.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_enum.h"
#include "core/row.h"
#include "utils/builtins.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

/* a task's columns, as core/row.h lists them, in both of its tables */
#define TASK_COLUMN_ENUM(name, ...) TASK_##name,
#define TASK_COLUMN_NAME(name, ...) [TASK_##name] = {#name, InvalidOid},
enum
{
	DURABLE_TASK_ROW(TASK_COLUMN_ENUM, TASK_COLUMN_ENUM)
	TASK_NCOLUMNS
};

static const DurableColumn task_columns[TASK_NCOLUMNS] = {
	DURABLE_TASK_ROW(TASK_COLUMN_NAME, TASK_COLUMN_NAME)
};

StaticAssertDecl(TASK_NCOLUMNS <= DURABLE_MAX_DIRECT_COLUMNS, "a task's columns");

static DurableRelocation finish_relocation = {
	.from = {.schema = "durable", .name = "live_tasks", DURABLE_COLUMNS(task_columns)},
	.to = {.schema = "durable", .name = "task_history", DURABLE_COLUMNS(task_columns)},
	.keys = {.nkeys = 2},		/* partition_key, task_id */
};

/* a finish's values, as the parameters of finish_task hold them */
typedef struct FinishValues
{
	const DurableRelocation *relocation;	/* finish_relocation, or its copy */
	const DurableMove *move;
	TimestampTz now;
	Datum		from_state;
	Datum		to_state;
	Datum		kind;
	Datum		actor;
	Datum		role;
	Datum		stop_code;
	int32		max_in_doubt;
} FinishValues;

/*
 * DurableTaskStateValue
 *		A task state as a value of typid, the state column's enum, looked
 *		up once per backend and type.
 */
Datum
DurableTaskStateValue(Oid typid, DurableTaskState state)
{
	static Oid	cached_type = InvalidOid;
	static Datum values[DURABLE_TASK_NSTATES];

	if (typid != cached_type)
	{
		cached_type = InvalidOid;
		for (int s = 0; s < DURABLE_TASK_NSTATES; s++)
		{
			const char *label = DurableTaskStateName((DurableTaskState) s);
			Oid			oid = GetSysCacheOid2(ENUMTYPOIDNAME, Anum_pg_enum_oid,
											  ObjectIdGetDatum(typid),
											  CStringGetDatum(label));

			if (!OidIsValid(oid))
				ereport(ERROR,
						errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("type %s has no label \"%s\"", format_type_be(typid), label));
			values[s] = ObjectIdGetDatum(oid);
		}
		cached_type = typid;
	}
	return values[state];
}

/* the move's states as values of the state column, once it is resolved */
static void
finish_states(FinishValues *finish)
{
	Oid			typid = finish->relocation->from.atttypids[TASK_state];

	finish->from_state = DurableTaskStateValue(typid, finish->move->from_state);
	finish->to_state = DurableTaskStateValue(typid, finish->move->to_state);
}

/* MOVE_WHERE, beyond the task's key */
static bool
finishable(const Datum *values, const bool *isnull, void *arg)
{
	FinishValues *finish = arg;

	if (finish->from_state == (Datum) 0)
		finish_states(finish);
	return DatumGetInt64(values[TASK_fence]) == finish->move->fence &&
		values[TASK_state] == finish->from_state &&
		DatumGetInt32(values[TASK_steps_in_doubt]) <= finish->max_in_doubt;
}

/* a column set to a value, or to NULL */
#define SET(column, value) (values[TASK_##column] = (value), isnull[TASK_##column] = false)
#define SET_NULL(column) (isnull[TASK_##column] = true)

/* the finish column of core/row.h, with the move's values */
static void
finish_row(Datum *values, bool *isnull, void *arg)
{
	FinishValues *finish = arg;
	const DurableMove *move = finish->move;
	bool		ends_lease = move->from_state == DURABLE_TASK_RUNNING;
	int32		attempt = DatumGetInt32(values[TASK_attempt]);

	if (move->result)
		SET(result, JsonbPGetDatum(move->result));
	if (move->error)
		SET(last_error, JsonbPGetDatum(move->error));
	if (move->stop_code)
		SET(stop_code, finish->stop_code);
	else
		SET_NULL(stop_code);
	SET(finished_at, TimestampTzGetDatum(finish->now));
	/* ENDS_LEASE: the lease's own columns stay only when one ends here */
	if (ends_lease)
		SET(claim_fence, values[TASK_fence]);
	else
	{
		SET_NULL(claim_fence);
		SET_NULL(claimed_at);
		SET_NULL(claim_seq);
		SET_NULL(claim_kind);
		SET_NULL(claim_role);
	}
	SET(final_kind, finish->kind);
	if (move->actor)
		SET(final_actor, finish->actor);
	/* else the owner, which may be NULL */
	else
	{
		values[TASK_final_actor] = values[TASK_owner];
		isnull[TASK_final_actor] = isnull[TASK_owner];
	}
	SET(final_role, finish->role);
	if (move->detail)
		SET(final_detail, JsonbPGetDatum(move->detail));
	else
		SET_NULL(final_detail);
	if (move->run_at != 0)
		SET(run_at, TimestampTzGetDatum(move->run_at));
	SET(state, finish->to_state);
	/* MOVED_ATTEMPT */
	if (move->reset_attempts)
		attempt = 0;
	else if (move->give_back_attempt)
		attempt = Max(attempt - 1, 0);
	SET(attempt, Int32GetDatum(attempt));
	SET(version, Int32GetDatum(DatumGetInt32(values[TASK_version]) + 1));
	SET(fence, Int64GetDatum(DatumGetInt64(values[TASK_fence]) + (move->revoke ? 1 : 0)));
	SET_NULL(lease_until);
	SET_NULL(lease);
}

/*
 * DurableFinishDirectly
 *		Move task_id's live row to history as finish_task would, when
 *		move's conditions hold: the row in history's queue, owner, parent,
 *		waits and claim time into finished (copied into the current memory
 *		context).  DURABLE_DIRECT_BY_STATEMENT when the statement must.
 */
DurableDirectResult
DurableFinishDirectly(int64 task_id, const DurableMove *move, TimestampTz now,
					  DurableFinished *finished)
{
	FinishValues finish = {0};
	Datum		keys[2];
	Datum		values[TASK_NCOLUMNS];
	bool		isnull[TASK_NCOLUMNS];
	DurableDirectResult result;
	DurableRelocation *relocation;

	Assert(DurableTaskIsTerminal(move->to_state));
	finish.move = move;
	finish.now = now;
	finish.kind = CStringGetTextDatum(move->kind);
	finish.actor = move->actor ? CStringGetTextDatum(move->actor) : (Datum) 0;
	finish.role = CStringGetTextDatum(DurableCallerName());
	finish.stop_code = move->stop_code ? CStringGetTextDatum(move->stop_code) : (Datum) 0;
	finish.max_in_doubt = move->allow_doubt ? PG_INT32_MAX : 0;
	keys[0] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	keys[1] = Int64GetDatum(task_id);

	relocation = DurableRelocationInPartition(&finish_relocation,
											  DURABLE_TASK_PARTITION(task_id));
	if (relocation == NULL)
		return DURABLE_DIRECT_BY_STATEMENT;
	finish.relocation = relocation;
	result = DurableRelocate(relocation, keys, finishable, finish_row, &finish,
							 values, isnull);
	if (result != DURABLE_DIRECT_DONE)
		return result;

	finished->moved.queue = TextDatumGetCString(values[TASK_queue_name]);
	finished->moved.owner = isnull[TASK_owner] ? NULL : TextDatumGetCString(values[TASK_owner]);
	finished->moved.restricted = DurableQueueRestricted(finished->moved.queue);
	finished->parent_id = isnull[TASK_parent_id] ? 0 : DatumGetInt64(values[TASK_parent_id]);
	finished->waits = isnull[TASK_waits] ? NULL : DatumGetJsonbP(values[TASK_waits]);
	finished->has_claimed_at = !isnull[TASK_claimed_at];
	if (finished->has_claimed_at)
		finished->claimed_at = DatumGetTimestampTz(values[TASK_claimed_at]);
	finished->attempt = DatumGetInt32(values[TASK_attempt]);
	return result;
}
