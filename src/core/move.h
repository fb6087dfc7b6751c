/*-------------------------------------------------------------------------
 *
 * move.h
 *	  What the statements of a task's moves share (move.c, finish.c): the
 *	  row a move takes, what it returns, and its parameters.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_CORE_MOVE_H
#define DURABLE_CORE_MOVE_H

#include "core/core.h"

#include "catalog/pg_type.h"

/* the row a move takes, by the parameters of transition */
#define MOVE_WHERE \
	" WHERE partition_key = $partition AND task_id = $task_id AND fence = $fence" \
	" AND state = $from_state::durable.task_state AND steps_in_doubt <= $max_in_doubt"

/*
 * What a move returns.  Whether the task's queue is restricted is read by
 * joining durable.queues in the statement's last SELECT, not in RETURNING:
 * on Citus, RETURNING runs on the shard, where no other table may be read.
 */
#define MOVE_RETURNING \
	" RETURNING partition_key, task_id, version, fence, state, owner, queue_name"

/*
 * The parameters of a move, which transition, finish and revive share (and
 * row.h's expressions name): the partition first, as a statement of one
 * partition must declare it.  Delegated on Citus, transition and finish
 * send their values in this order (store/delegate.c).
 */
enum
{
	MOVE_PARTITION,
	MOVE_TASK_ID,
	MOVE_FENCE,
	MOVE_FROM_STATE,
	MOVE_TO_STATE,
	MOVE_REVOKE,
	MOVE_RUN_AT,
	MOVE_STOP_CODE,
	MOVE_ERROR,
	MOVE_RESULT,
	MOVE_NOW,
	MOVE_KIND,
	MOVE_ACTOR,
	MOVE_DETAIL,
	MOVE_MAX_IN_DOUBT,
	MOVE_RESET_ATTEMPTS,
	MOVE_ROLE,
	MOVE_GIVE_BACK_ATTEMPT,
	MOVE_NPARAMS
};

/*
 * Their names and types, in each file that runs a move's statement: the
 * statements are checked against them (params.c, tools/statements).
 */
static const DurableParam move_params[MOVE_NPARAMS] = {
	[MOVE_PARTITION] = {"partition", INT4OID},
	[MOVE_TASK_ID] = {"task_id", INT8OID},
	[MOVE_FENCE] = {"fence", INT8OID},
	[MOVE_FROM_STATE] = {"from_state", TEXTOID},
	[MOVE_TO_STATE] = {"to_state", TEXTOID},
	/* what the fence grows by: 1 when the move revokes a lease */
	[MOVE_REVOKE] = {"revoke", INT8OID},
	[MOVE_RUN_AT] = {"run_at", TIMESTAMPTZOID},
	[MOVE_STOP_CODE] = {"stop_code", TEXTOID},
	[MOVE_ERROR] = {"error", JSONBOID},
	[MOVE_RESULT] = {"result", JSONBOID},
	[MOVE_NOW] = {"now", TIMESTAMPTZOID},
	[MOVE_KIND] = {"kind", TEXTOID},
	[MOVE_ACTOR] = {"actor", TEXTOID},
	[MOVE_DETAIL] = {"detail", JSONBOID},
	/* the most steps in doubt the task may have for the move */
	[MOVE_MAX_IN_DOUBT] = {"max_in_doubt", INT4OID},
	[MOVE_RESET_ATTEMPTS] = {"reset_attempts", BOOLOID},
	[MOVE_ROLE] = {"role", TEXTOID},
	[MOVE_GIVE_BACK_ATTEMPT] = {"give_back_attempt", BOOLOID},
};

extern bool DurableFinishTask(int64 task_id, const DurableMove *move, Datum *args,
							  const char *nulls, TimestampTz now,
							  DurableFinished *finished);

#endif							/* DURABLE_CORE_MOVE_H */
