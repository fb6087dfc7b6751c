/*-------------------------------------------------------------------------
 *
 * transition_direct.c
 *	  A task's move between live states on one server without a
 *	  statement: its row updated by its key through the table and index
 *	  access methods (store/take.c), and the move's event appended
 *	  (DurableInsertRow).
 *
 * It takes the row move.c's transition statement would take (MOVE_WHERE:
 * the task's key, fence, state and steps in doubt, tested again in the
 * row's last version after waiting for its lock, as UPDATE does), changes
 * it as MOVE_SET does, and writes the event that statement's INSERT
 * writes.  The two must change together: sql/direct_moves.sql checks every
 * column of the row and of its events against the statement's.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

/* the columns of durable.live_tasks a transition reads, then those it writes */
enum
{
	MOVING_PARTITION_KEY,
	MOVING_TASK_ID,
	MOVING_OWNER,
	MOVING_QUEUE_NAME,
	MOVING_CLAIMED_AT,
	MOVING_CLAIM_SEQ,
	MOVING_CLAIM_KIND,
	MOVING_CLAIM_ROLE,
	MOVING_STEPS_IN_DOUBT,
	MOVING_STATE,				/* the first one written */
	MOVING_FENCE,
	MOVING_VERSION,
	MOVING_RUN_AT,
	MOVING_STOP_CODE,
	MOVING_LAST_ERROR,
	MOVING_RESULT,
	MOVING_ATTEMPT,
	MOVING_LEASE,
	MOVING_LEASE_UNTIL,
	MOVING_FAIR_PASS,
	MOVING_NCOLUMNS
};

static const DurableColumn moving_columns[MOVING_NCOLUMNS] = {
	[MOVING_PARTITION_KEY] = {"partition_key", INT4OID},
	[MOVING_TASK_ID] = {"task_id", INT8OID},
	[MOVING_OWNER] = {"owner", TEXTOID},
	[MOVING_QUEUE_NAME] = {"queue_name", TEXTOID},
	[MOVING_CLAIMED_AT] = {"claimed_at", TIMESTAMPTZOID},
	[MOVING_CLAIM_SEQ] = {"claim_seq", INT4OID},
	[MOVING_CLAIM_KIND] = {"claim_kind", TEXTOID},
	[MOVING_CLAIM_ROLE] = {"claim_role", TEXTOID},
	[MOVING_STEPS_IN_DOUBT] = {"steps_in_doubt", INT4OID},
	/* durable.task_state, an enum whose OID each installation chooses */
	[MOVING_STATE] = {"state", InvalidOid},
	[MOVING_FENCE] = {"fence", INT8OID},
	[MOVING_VERSION] = {"version", INT4OID},
	[MOVING_RUN_AT] = {"run_at", TIMESTAMPTZOID},
	[MOVING_STOP_CODE] = {"stop_code", TEXTOID},
	[MOVING_LAST_ERROR] = {"last_error", JSONBOID},
	[MOVING_RESULT] = {"result", JSONBOID},
	[MOVING_ATTEMPT] = {"attempt", INT4OID},
	[MOVING_LEASE] = {"lease", INTERVALOID},
	[MOVING_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID},
	[MOVING_FAIR_PASS] = {"fair_pass", FLOAT8OID},
};

static DurableTake transition_take = {
	.table = {.schema = "durable", .name = "live_tasks", DURABLE_COLUMNS(moving_columns)},
	.index = NULL,				/* the primary key */
	.keys = {.nkeys = 2},		/* partition_key, task_id */
	.nread = MOVING_STATE,
	.lockmode = LockTupleNoKeyExclusive,	/* as UPDATE locks it */
	.wait = LockWaitBlock,
};

/* the columns of durable.event_log an event has; the others stay NULL */
enum
{
	EVENT_PARTITION_KEY,
	EVENT_TASK_ID,
	EVENT_SEQ,
	EVENT_STATE,
	EVENT_FENCE,
	EVENT_AT,
	EVENT_KIND,
	EVENT_ACTOR,
	EVENT_DETAIL,
	EVENT_ROLE,
	EVENT_LEASE_SEQ,
	EVENT_LEASE_FENCE,
	EVENT_LEASE_AT,
	EVENT_LEASE_KIND,
	EVENT_LEASE_ACTOR,
	EVENT_LEASE_ROLE,
	EVENT_NCOLUMNS
};

static const DurableColumn event_columns[EVENT_NCOLUMNS] = {
	[EVENT_PARTITION_KEY] = {"partition_key", INT4OID},
	[EVENT_TASK_ID] = {"task_id", INT8OID},
	[EVENT_SEQ] = {"seq", INT4OID},
	[EVENT_STATE] = {"state", InvalidOid},
	[EVENT_FENCE] = {"fence", INT8OID},
	[EVENT_AT] = {"at", TIMESTAMPTZOID},
	[EVENT_KIND] = {"kind", TEXTOID},
	[EVENT_ACTOR] = {"actor", TEXTOID},
	[EVENT_DETAIL] = {"detail", JSONBOID},
	[EVENT_ROLE] = {"role", TEXTOID},
	[EVENT_LEASE_SEQ] = {"lease_seq", INT4OID},
	[EVENT_LEASE_FENCE] = {"lease_fence", INT8OID},
	[EVENT_LEASE_AT] = {"lease_at", TIMESTAMPTZOID},
	[EVENT_LEASE_KIND] = {"lease_kind", TEXTOID},
	[EVENT_LEASE_ACTOR] = {"lease_actor", TEXTOID},
	[EVENT_LEASE_ROLE] = {"lease_role", TEXTOID},
};

static DurableDirectTable event_table = {
	.schema = "durable", .name = "event_log", DURABLE_COLUMNS(event_columns)
};

/* a transition's values, as the parameters of transition hold them */
typedef struct TransitionValues
{
	const DurableMove *move;
	int32		max_in_doubt;
	Datum		from_state;		/* as values of the state column, once */
	Datum		to_state;		/* it is resolved */
} TransitionValues;

/* MOVE_WHERE, beyond the task's key */
static bool
movable(const Datum *values, const bool *isnull, void *arg)
{
	TransitionValues *transition = arg;

	if (transition->from_state == (Datum) 0)
	{
		Oid			typid = transition_take.table.atttypids[MOVING_STATE];

		transition->from_state = DurableTaskStateValue(typid, transition->move->from_state);
		transition->to_state = DurableTaskStateValue(typid, transition->move->to_state);
	}
	return DatumGetInt64(values[MOVING_FENCE]) == transition->move->fence &&
		values[MOVING_STATE] == transition->from_state &&
		DatumGetInt32(values[MOVING_STEPS_IN_DOUBT]) <= transition->max_in_doubt;
}

/* MOVE_SET, with the move's values */
static void
move_row(Datum *values, bool *isnull, void *arg)
{
	TransitionValues *transition = arg;
	const DurableMove *move = transition->move;
	int32		attempt = DatumGetInt32(values[MOVING_ATTEMPT]);

	values[MOVING_STATE] = transition->to_state;
	values[MOVING_FENCE] = Int64GetDatum(DatumGetInt64(values[MOVING_FENCE]) +
										 (move->revoke ? 1 : 0));
	values[MOVING_VERSION] = Int32GetDatum(DatumGetInt32(values[MOVING_VERSION]) + 1);
	if (move->run_at != 0)
	{
		values[MOVING_RUN_AT] = TimestampTzGetDatum(move->run_at);
		isnull[MOVING_RUN_AT] = false;
	}
	isnull[MOVING_STOP_CODE] = move->stop_code == NULL;
	if (move->stop_code)
		values[MOVING_STOP_CODE] = CStringGetTextDatum(move->stop_code);
	if (move->error)
	{
		values[MOVING_LAST_ERROR] = JsonbPGetDatum(move->error);
		isnull[MOVING_LAST_ERROR] = false;
	}
	if (move->result)
	{
		values[MOVING_RESULT] = JsonbPGetDatum(move->result);
		isnull[MOVING_RESULT] = false;
	}
	/* MOVED_ATTEMPT */
	if (move->reset_attempts)
		attempt = 0;
	else if (move->give_back_attempt)
		attempt = Max(attempt - 1, 0);
	values[MOVING_ATTEMPT] = Int32GetDatum(attempt);
	isnull[MOVING_LEASE] = true;
	isnull[MOVING_LEASE_UNTIL] = true;
	/* UNADMITTED */
	if (!isnull[MOVING_FAIR_PASS])
		values[MOVING_FAIR_PASS] = Float8GetDatum(get_float8_infinity());
}

/* a column of the event: the task's column of that name, or NULL */
#define EVENT_FROM(event, task) \
	(values[EVENT_##event] = moved[MOVING_##task], isnull[EVENT_##event] = moved_isnull[MOVING_##task])

/*
 * The event the transition statement's INSERT appends for the row as
 * moved: the claim's columns too when the move ends a lease (ENDS_LEASE).
 */
static void
event_row(const DurableMove *move, const Datum *moved, const bool *moved_isnull,
		  TimestampTz now, Datum state, Datum *values, bool *isnull)
{
	memset(isnull, true, EVENT_NCOLUMNS * sizeof(bool));
	EVENT_FROM(PARTITION_KEY, PARTITION_KEY);
	EVENT_FROM(TASK_ID, TASK_ID);
	EVENT_FROM(SEQ, VERSION);
	EVENT_FROM(FENCE, FENCE);
	values[EVENT_STATE] = state;
	isnull[EVENT_STATE] = false;
	values[EVENT_AT] = TimestampTzGetDatum(now);
	isnull[EVENT_AT] = false;
	values[EVENT_KIND] = CStringGetTextDatum(move->kind);
	isnull[EVENT_KIND] = false;
	if (move->actor)
	{
		values[EVENT_ACTOR] = CStringGetTextDatum(move->actor);
		isnull[EVENT_ACTOR] = false;
	}
	else
		EVENT_FROM(ACTOR, OWNER);
	values[EVENT_DETAIL] = JsonbPGetDatum(move->detail);
	isnull[EVENT_DETAIL] = move->detail == NULL;
	values[EVENT_ROLE] = CStringGetTextDatum(DurableCallerName());
	isnull[EVENT_ROLE] = false;
	if (move->from_state == DURABLE_TASK_RUNNING)
	{
		EVENT_FROM(LEASE_SEQ, CLAIM_SEQ);
		/* the fence the lease was held under */
		values[EVENT_LEASE_FENCE] = Int64GetDatum(DatumGetInt64(moved[MOVING_FENCE]) -
												  (move->revoke ? 1 : 0));
		isnull[EVENT_LEASE_FENCE] = false;
		EVENT_FROM(LEASE_AT, CLAIMED_AT);
		EVENT_FROM(LEASE_KIND, CLAIM_KIND);
		EVENT_FROM(LEASE_ACTOR, OWNER);
		EVENT_FROM(LEASE_ROLE, CLAIM_ROLE);
	}
}

/*
 * DurableTransitionDirectly
 *		Move task_id between live states as the transition statement would,
 *		when move's conditions hold and the task has at most max_in_doubt
 *		steps in doubt, and append its event: its queue, owner and whether
 *		the queue is restricted into moved (copied into the current memory
 *		context).  DURABLE_DIRECT_BY_STATEMENT when the statement must.
 */
DurableDirectResult
DurableTransitionDirectly(int64 task_id, const DurableMove *move, int32 max_in_doubt,
						  TimestampTz now, DurableMoved *moved)
{
	TransitionValues transition = {0};
	Datum		keys[2];
	Datum		values[MOVING_NCOLUMNS];
	bool		isnull[MOVING_NCOLUMNS];
	Datum		event[EVENT_NCOLUMNS];
	bool		event_isnull[EVENT_NCOLUMNS];
	Relation	events;
	bool		resolved;
	DurableDirectResult result;

	Assert(!DurableTaskIsTerminal(move->from_state) &&
		   !DurableTaskIsTerminal(move->to_state));

	/* the event's table first: a move is written whole one way or the other */
	events = DurableDirectOpen(&event_table, RowExclusiveLock, &resolved);
	if (!DurableDirectWritable(events))
	{
		table_close(events, NoLock);
		return DURABLE_DIRECT_BY_STATEMENT;
	}
	DurableDirectCheckPrivileges(events, ACL_INSERT);

	transition.move = move;
	transition.max_in_doubt = max_in_doubt;
	keys[0] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	keys[1] = Int64GetDatum(task_id);
	result = DurableTakeFirst(&transition_take, keys, movable, move_row, &transition,
							  values, isnull);
	if (result == DURABLE_DIRECT_DONE)
	{
		Oid			state_type = event_table.atttypids[EVENT_STATE];

		event_row(move, values, isnull, now,
				  DurableTaskStateValue(state_type, move->to_state),
				  event, event_isnull);
		DurableInsertRow(events, &event_table, event, event_isnull);
		moved->queue = TextDatumGetCString(values[MOVING_QUEUE_NAME]);
		moved->owner = isnull[MOVING_OWNER] ? NULL : TextDatumGetCString(values[MOVING_OWNER]);
		moved->restricted = DurableQueueRestricted(moved->queue);
	}
	table_close(events, NoLock);
	return result;
}
