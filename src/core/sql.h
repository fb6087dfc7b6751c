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


/* the columns of a task that fail, cancel and error reports read */
#define TASK_COLUMNS(table) \
	"SELECT t.state::text, t.fence, t.attempt, t.max_attempts, t.created_at," \
	" t.deadline, t.class::text, t.queue_name, t.owner, t.lease_until," \
	" q.retry_base, q.retry_cap, q.retry_capacity, t.version, t.run_at," \
	" t.steps_in_doubt, t.checkpoint_version, q.restricted" \
	" FROM " table " t" \
	" LEFT JOIN durable.queues q ON q.queue_name = t.queue_name" \
	" WHERE t.partition_key = $1" \
	" AND t.task_id = $2"

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
	" final_detail, parent_id, concurrency_key, waits"

#define STEP_TABLE_COLUMNS \
	"partition_key, task_id, step, state, class, version, attempt, ordinal," \
	" created_at, updated_at, idempotency_key, request_hash, compensates," \
	" receipt, effect_id, error_class, request, result, evidence, error"

/* the attempt after a move, by the parameters of STMT_TRANSITION */
#define MOVED_ATTEMPT \
	"CASE WHEN $16 THEN 0" \
	" WHEN $18 THEN pg_catalog.int4larger(attempt - 1, 0) ELSE attempt END"

/*
 * A running lease is its own open event: the claim sets claimed_at,
 * claim_seq, claim_kind and claim_role instead of appending a row, and the
 * move that ends the lease records the claim with its own event (in the
 * event's lease_* columns, or for a task that finishes, in its row in
 * history, which is also its last event).  durable.events shows both.
 */
#define ENDS_LEASE(col) "CASE WHEN $4 = 'running' THEN " col " END"

/*
 * A finished state from its name, without the enum's input function: Citus
 * allows no function in RETURNING that is not immutable.
 */
#define FINISHED_STATE(name) \
	"CASE WHEN " name " = 'completed' THEN 'completed'::durable.task_state" \
	" WHEN " name " = 'failed' THEN 'failed'::durable.task_state" \
	" WHEN " name " = 'cancelled' THEN 'cancelled'::durable.task_state END"

/*
 * A finished task's row in history, from its live row and the parameters
 * of STMT_TRANSITION: in the SELECT of STMT_FINISH, in the RETURNING of
 * its split.
 */
#define FINISHED_TASK_ROW \
	"partition_key, task_id, " FINISHED_STATE("$5") ", class, priority," \
	" " MOVED_ATTEMPT ", max_attempts, version + 1, fence + $6," \
	" COALESCE($7, run_at), created_at, NULL::timestamptz, heartbeat_at," \
	" progress_at, stuck_alarm_at, $11, NULL::interval, deadline, queue_name," \
	" owner, progress, $8, idempotency_key, request_hash, workflow_version," \
	" payload, COALESCE($10, result), COALESCE($9, last_error), checkpoint," \
	" checkpoint_version, steps_in_doubt, metadata," \
	" " ENDS_LEASE("claimed_at") ", " ENDS_LEASE("claim_seq") "," \
	" " ENDS_LEASE("fence") ", " ENDS_LEASE("claim_kind") "," \
	" " ENDS_LEASE("claim_role") ", $12, COALESCE($13, owner), $17, $14," \
	" parent_id, concurrency_key, waits"

/* the row a move takes, by the parameters of STMT_TRANSITION */
#define MOVE_WHERE \
	" WHERE partition_key = $1 AND task_id = $2 AND fence = $3" \
	" AND state = $4::durable.task_state AND steps_in_doubt <= $15"

/*
 * What a move returns.  Whether the task's queue is restricted is read by
 * joining durable.queues in the statement's last SELECT, not in RETURNING:
 * on Citus, RETURNING runs on the shard, where no other table may be read.
 */
#define MOVE_RETURNING \
	" RETURNING partition_key, task_id, version, fence, state, owner, queue_name"

#define QUEUE_OF_U " LEFT JOIN durable.queues q ON q.queue_name = u.queue_name"

#define TRANSITION_ARGTYPES \
	{INT4OID, INT8OID, INT8OID, TEXTOID, TEXTOID, INT8OID, \
	 TIMESTAMPTZOID, TEXTOID, JSONBOID, JSONBOID, TIMESTAMPTZOID, TEXTOID, \
	 TEXTOID, JSONBOID, INT4OID, BOOLOID, TEXTOID, BOOLOID}

/*
 * A claim in a queue with a concurrency limit ($10) takes a task c of a key
 * only while the key's running tasks and its tasks ahead of c in claim
 * order that could be claimed now are fewer than the limit, counted in all
 * partitions of the queue ($9), in one probe that stops at the limit.  No
 * lock is needed: every snapshot sees a task of the key that another claim
 * is taking either as running or, as it was, ahead in claim order; and a
 * task ahead goes first.
 */
#define KEY_BUSY \
	"(SELECT pg_catalog.count(*) FROM (SELECT FROM durable.live_tasks k" \
	" WHERE k.partition_key = ANY ($9) AND k.queue_name = $2" \
	" AND k.concurrency_key = c.concurrency_key" \
	" AND k.state IN ('ready', 'waiting', 'running')" \
	" AND (k.state = 'running' OR k.run_at <= $3" \
	"  AND (k.priority > c.priority OR (k.priority = c.priority" \
	"   AND (k.run_at, k.task_id) < (c.run_at, c.task_id))))" \
	" LIMIT $10) k)"

/* the event of an enqueue, from the inserted task t */
#define ENQUEUE_EVENT \
	" INSERT INTO durable.event_log (partition_key, task_id, seq, state, fence," \
	" at, kind, actor, role)" \
	" SELECT partition_key, task_id, version, 'ready', fence, $7," \
	" 'enqueued', $15, $15 FROM t" \
	" RETURNING task_id"

#define ENQUEUE_ARGTYPES \
	{INT4OID, INT8OID, TEXTOID, INT4OID, INT4OID, TIMESTAMPTZOID, \
	 TIMESTAMPTZOID, INTERVALOID, TEXTOID, TEXTOID, BYTEAOID, TEXTOID, \
	 JSONBOID, JSONBOID, TEXTOID, INT8OID, TEXTOID}

/*
 * What a wait ended with, for its entry: no key for none, so that an SQL
 * NULL stays one and a JSON null stays that.
 */
#define WAIT_PAYLOAD(param) \
	"CASE WHEN " param "::pg_catalog.jsonb IS NULL THEN '{}'::pg_catalog.jsonb" \
	" ELSE pg_catalog.jsonb_build_object('payload', " param "::pg_catalog.jsonb) END"

/* the queues of the tasks u woke whose queue announces ready work */
#define WOKEN_QUEUES \
	" SELECT DISTINCT u.queue_name FROM u" \
	" JOIN durable.queues q ON q.queue_name = u.queue_name WHERE q.notify"

/*
 * A time as a jsonb string in the one form durable keeps times in jsonb
 * (DurableDetailTime's: ISO 8601 in UTC, "+00:00"), whatever the session's
 * TimeZone: to_jsonb of a time without zone, which JSON writes in ISO 8601
 * whatever DateStyle, read in UTC.  The time must be finite.
 */
#define UTC_TIME_JSON(param) \
	"((pg_catalog.to_jsonb(pg_catalog.timezone('UTC', " param "::pg_catalog.timestamptz))" \
	" OPERATOR(pg_catalog.#>>) '{}') || '+00:00')"

/*
 * A time plus or minus an interval on the UTC calendar, whatever the
 * session's TimeZone (as DurableTimePlus adds in C): a day is 24 hours.
 */
#define UTC_PLUS(time, op, span) \
	"pg_catalog.timezone('UTC', pg_catalog.timezone('UTC', " time ") " op " " span ")"

/* where a wait's deadline is kept in its entry of a task's waits */
#define WAIT_UNTIL(entry) "(" entry " ->> 'until')::pg_catalog.timestamptz"


/* the event of an enqueue, from the task's row given as $18..$21 */
#define ENQUEUE_EVENT_SPLIT \
	"INSERT INTO durable.event_log (partition_key, task_id, seq, state, fence," \
	" at, kind, actor, role)" \
	" VALUES ($18, $19, $20, 'ready', $21, $7, 'enqueued', $15, $15)" \
	" RETURNING task_id"

#define ENQUEUE_COLUMNS \
	"partition_key, task_id, state, class, priority, max_attempts, run_at," \
	" created_at, deadline, queue_name, idempotency_key, request_hash," \
	" workflow_version, payload, metadata, parent_id, concurrency_key"

/* the changes of a move (STMT_TRANSITION's parameters) */
#define MOVE_SET \
	" state = $5::durable.task_state, fence = fence + $6, version = version + 1," \
	" run_at = COALESCE($7, run_at), stop_code = $8," \
	" last_error = COALESCE($9, last_error), result = COALESCE($10, result)," \
	" attempt = " MOVED_ATTEMPT ", lease = NULL, lease_until = NULL"

/* a lease's column given as a parameter, when the move ends the lease */
#define ENDS_LEASE_PARAM(param) "CASE WHEN $4 = 'running' THEN " param " END"

/* queue, owner and whether the queue is restricted, after a move */
#define MOVED_QUEUE(seq, queue, owner) \
	"SELECT " seq ", " queue "::text AS queue_name, " owner "::text AS owner," \
	" q.restricted FROM (SELECT) x" \
	" LEFT JOIN durable.queues q ON q.queue_name = " queue

/* what of a queue's ($1, in its partitions $2) goes with it, by table */
#define QUEUE_TASKS(table) \
	" USING " table " t WHERE x.partition_key = t.partition_key" \
	" AND x.task_id = t.task_id AND t.partition_key = ANY ($2)" \
	" AND t.queue_name = $1"

#endif							/* DURABLE_CORE_SQL_H */
