/*-------------------------------------------------------------------------
 *
 * sql.h
 *	  Fragments of SQL that the statements of more than one core module
 *	  share: the columns of a task and a step as they move between live
 *	  tables and history, the parameters of a move, times on the UTC
 *	  calendar.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_CORE_SQL_H
#define DURABLE_CORE_SQL_H


/*
 * A task moves between durable.live_tasks and durable.task_history whole:
 * every column, in this order, with the changes of the move spliced in.
 */
#define TASK_TABLE_COLUMNS \
	"partition_key, task_id, state, class, priority, attempt, max_attempts," \
	" version, fence, run_at, created_at, lease_until, heartbeat_at," \
	" progress_at, stuck_alarm_at, finished_at, lease, deadline, queue_name," \
	" owner, progress, stop_code, idempotency_key, request_hash," \
	" workflow_version, payload, result, last_error, checkpoint," \
	" checkpoint_version, steps_in_doubt, metadata, claimed_at, claim_seq," \
	" claim_fence, claim_kind, claim_role, final_kind, final_actor, final_role," \
	" final_detail, parent_id, concurrency_key, waits, versions"

#define STEP_TABLE_COLUMNS \
	"partition_key, task_id, step, state, class, version, attempt, ordinal," \
	" created_at, updated_at, idempotency_key, request_hash, compensates," \
	" receipt, effect_id, error_class, request, result, evidence, error"

#define QUEUE_OF_U " LEFT JOIN durable.queues q ON q.queue_name = u.queue_name"

/*
 * A time plus or minus an interval on the UTC calendar, whatever the
 * session's TimeZone (as DurableTimePlus adds in C): a day is 24 hours.
 */
#define UTC_PLUS(time, op, span) \
	"pg_catalog.timezone('UTC', pg_catalog.timezone('UTC', " time ") " op " " span ")"

/* where a wait's deadline is kept in its entry of a task's waits */
#define WAIT_UNTIL(entry) "(" entry " ->> 'until')::pg_catalog.timestamptz"


#endif							/* DURABLE_CORE_SQL_H */
