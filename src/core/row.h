/*-------------------------------------------------------------------------
 *
 * row.h
 *	  The row of a task and the row of a step, declared once: their columns
 *	  in the order of the tables, with their types, and for a task what
 *	  each move that restates the whole row puts in each column.
 *
 * A task moves between durable.live_tasks and durable.task_history whole,
 * and its steps between durable.live_steps and durable.step_history, in
 * statements that name every column (move.c's finish and revive,
 * commit.c's batch commit).  Their column lists and the lists of values
 * they write are generated here at compile time, as string literals (so
 * that tools/statements reads them whole from the preprocessed text), and
 * the same declaration is what the plan cache checks the four tables
 * against, by name, order and type, before the first of those statements
 * runs in a backend and again after a table changes (row.c, store/cluster.c).
 *
 * Adding a column: its line here, in the place the table has it (at the
 * end, where ALTER TABLE ... ADD COLUMN puts it), with what each move
 * writes there; the column in src/sql/schema (live_tasks.sql or
 * live_steps.sql: history is LIKE them) and its ALTER TABLE of both
 * tables in the version's src/sql/updates script.
 *
 * A task's columns are the same in both of its tables (task_history is
 * LIKE live_tasks; finished_at is NULL in the live one):
 *
 *		COLUMN(name, type, finish, revive, commit)
 *
 * type is the column's type as format_type() writes it qualified
 * (FORMAT_TYPE_FORCE_QUALIFY).  finish, revive and commit say what the
 * move writes there from the row it takes: AS_IS (the column as it was)
 * or TO("expression").  The expressions use the parameters of the move's
 * statement, by name: finish and revive those of move.h's move_params,
 * commit those of commit.c's commit_batch ($now the time, $role the role,
 * committed_result the result given).
 *
 * The first column is declared with FIRST, the others with COLUMN: a
 * generator gives each the separator it needs.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_CORE_ROW_H
#define DURABLE_CORE_ROW_H

/* the attempt after a move, by the parameters of transition */
#define MOVED_ATTEMPT \
	"CASE WHEN $reset_attempts THEN 0" \
	" WHEN $give_back_attempt THEN pg_catalog.int4larger(attempt - 1, 0) ELSE attempt END"

/*
 * A running lease is its own open event: the claim sets claimed_at,
 * claim_seq, claim_kind and claim_role instead of appending a row, and the
 * move that ends the lease records the claim with its own event (in the
 * event's lease_* columns, or for a task that finishes, in its row in
 * history, which is also its last event).  durable.events shows both.
 */
#define ENDS_LEASE(col) "CASE WHEN $from_state = 'running' THEN " col " END"

/*
 * A finished state from its name, without the enum's input function: Citus
 * allows no function in RETURNING that is not immutable.
 */
#define FINISHED_STATE(name) \
	"CASE WHEN " name " = 'completed' THEN 'completed'::durable.task_state" \
	" WHEN " name " = 'failed' THEN 'failed'::durable.task_state" \
	" WHEN " name " = 'cancelled' THEN 'cancelled'::durable.task_state END"

/*
 * A task that leaves its place in a fair queue's claim order (it waits,
 * is released, retried, deferred or revived) waits for its pass again: a
 * pass becomes Infinity until the reconciler admits the task once due
 * (fairness.c); NULL, a queue without fairness, stays NULL.
 */
#define UNADMITTED(col) "CASE WHEN " col " IS NOT NULL THEN 'Infinity'::float8 END"

#define DURABLE_TASK_ROW(FIRST, COLUMN) \
	FIRST(partition_key, "integer", AS_IS, AS_IS, AS_IS) \
	COLUMN(task_id, "bigint", AS_IS, AS_IS, AS_IS) \
	COLUMN(priority, "integer", AS_IS, AS_IS, AS_IS) \
	COLUMN(max_attempts, "integer", AS_IS, AS_IS, AS_IS) \
	COLUMN(checkpoint_version, "integer", AS_IS, AS_IS, AS_IS) \
	COLUMN(steps_in_doubt, "integer", AS_IS, AS_IS, AS_IS) \
	COLUMN(class, "durable.activity_class", AS_IS, AS_IS, AS_IS) \
	COLUMN(created_at, "timestamp with time zone", AS_IS, AS_IS, AS_IS) \
	COLUMN(deadline, "interval", AS_IS, AS_IS, AS_IS) \
	COLUMN(queue_name, "pg_catalog.text", AS_IS, AS_IS, AS_IS) \
	COLUMN(idempotency_key, "pg_catalog.text", AS_IS, AS_IS, AS_IS) \
	COLUMN(request_hash, "pg_catalog.bytea", AS_IS, AS_IS, AS_IS) \
	COLUMN(workflow_version, "pg_catalog.text", AS_IS, AS_IS, AS_IS) \
	COLUMN(payload, "pg_catalog.jsonb", AS_IS, AS_IS, AS_IS) \
	COLUMN(metadata, "pg_catalog.jsonb", AS_IS, AS_IS, AS_IS) \
	COLUMN(checkpoint, "pg_catalog.jsonb", AS_IS, AS_IS, AS_IS) \
	COLUMN(result, "pg_catalog.jsonb", TO("COALESCE($result, result)"), \
		   TO("COALESCE($result, result)"), TO("COALESCE(committed_result, result)")) \
	COLUMN(last_error, "pg_catalog.jsonb", TO("COALESCE($error, last_error)"), \
		   TO("COALESCE($error, last_error)"), AS_IS) \
	COLUMN(stop_code, "pg_catalog.text", TO("$stop_code"), TO("$stop_code"), TO("NULL")) \
	COLUMN(stuck_alarm_at, "timestamp with time zone", AS_IS, AS_IS, AS_IS) \
	COLUMN(finished_at, "timestamp with time zone", TO("$now"), TO("NULL"), TO("$now")) \
	COLUMN(claim_fence, "bigint", TO(ENDS_LEASE("fence")), TO("NULL"), TO("fence")) \
	COLUMN(final_kind, "pg_catalog.text", TO("$kind"), TO("NULL"), TO("'completed'")) \
	COLUMN(final_actor, "pg_catalog.text", TO("COALESCE($actor, owner)"), TO("NULL"), \
		   TO("owner")) \
	COLUMN(final_role, "pg_catalog.text", TO("$role"), TO("NULL"), TO("$role")) \
	COLUMN(final_detail, "pg_catalog.jsonb", TO("$detail"), TO("NULL"), TO("NULL")) \
	COLUMN(run_at, "timestamp with time zone", TO("COALESCE($run_at, run_at)"), \
		   TO("COALESCE($run_at, run_at)"), AS_IS) \
	COLUMN(state, "durable.task_state", TO(FINISHED_STATE("$to_state")), \
		   TO("$to_state::durable.task_state"), TO("'completed'")) \
	COLUMN(attempt, "integer", TO(MOVED_ATTEMPT), TO(MOVED_ATTEMPT), AS_IS) \
	COLUMN(version, "integer", TO("version + 1"), TO("version + 1"), \
		   TO("version + 1")) \
	COLUMN(fence, "bigint", TO("fence + $revoke"), TO("fence + $revoke"), AS_IS) \
	COLUMN(lease_until, "timestamp with time zone", TO("NULL::timestamptz"), \
		   TO("NULL"), TO("NULL")) \
	COLUMN(heartbeat_at, "timestamp with time zone", AS_IS, AS_IS, AS_IS) \
	COLUMN(progress_at, "timestamp with time zone", AS_IS, AS_IS, AS_IS) \
	COLUMN(lease, "interval", TO("NULL::interval"), TO("NULL"), TO("NULL")) \
	COLUMN(owner, "pg_catalog.text", AS_IS, AS_IS, AS_IS) \
	COLUMN(progress, "pg_catalog.text", AS_IS, AS_IS, AS_IS) \
	COLUMN(claimed_at, "timestamp with time zone", TO(ENDS_LEASE("claimed_at")), \
		   TO("NULL"), AS_IS) \
	COLUMN(claim_seq, "integer", TO(ENDS_LEASE("claim_seq")), TO("NULL"), AS_IS) \
	COLUMN(claim_kind, "pg_catalog.text", TO(ENDS_LEASE("claim_kind")), \
		   TO("NULL"), AS_IS) \
	COLUMN(claim_role, "pg_catalog.text", TO(ENDS_LEASE("claim_role")), \
		   TO("NULL"), AS_IS) \
	COLUMN(parent_id, "bigint", AS_IS, AS_IS, AS_IS) \
	COLUMN(concurrency_key, "pg_catalog.text", AS_IS, AS_IS, AS_IS) \
	COLUMN(waits, "pg_catalog.jsonb", AS_IS, AS_IS, AS_IS) \
	COLUMN(versions, "pg_catalog.jsonb", AS_IS, AS_IS, AS_IS) \
	COLUMN(fairness_key, "pg_catalog.text", AS_IS, AS_IS, AS_IS) \
	COLUMN(fair_pass, "double precision", AS_IS, TO(UNADMITTED("fair_pass")), AS_IS) \
	COLUMN(rate_limits, "pg_catalog.jsonb", AS_IS, AS_IS, AS_IS) \
	COLUMN(rate_limited_by, "pg_catalog.text", AS_IS, AS_IS, AS_IS) \
	COLUMN(budgets, "pg_catalog.text[]", AS_IS, AS_IS, AS_IS) \
	COLUMN(began_at, "timestamp with time zone", AS_IS, TO("NULL"), AS_IS) \
	COLUMN(unbegun_expiries, "integer", AS_IS, TO("0"), AS_IS)

/*
 * A step's columns, and in which of its tables each is: BOTH, or HISTORY
 * for durable.step_history only (LIKE live_steps, with finished_at after
 * the live columns).
 *
 *		COLUMN(name, type, where)
 */
#define DURABLE_STEP_ROW(FIRST, COLUMN) \
	FIRST(partition_key, "integer", BOTH) \
	COLUMN(task_id, "bigint", BOTH) \
	COLUMN(step, "pg_catalog.text", BOTH) \
	COLUMN(state, "durable.step_state", BOTH) \
	COLUMN(class, "durable.activity_class", BOTH) \
	COLUMN(version, "integer", BOTH) \
	COLUMN(attempt, "integer", BOTH) \
	COLUMN(ordinal, "integer", BOTH) \
	COLUMN(created_at, "timestamp with time zone", BOTH) \
	COLUMN(updated_at, "timestamp with time zone", BOTH) \
	COLUMN(idempotency_key, "pg_catalog.text", BOTH) \
	COLUMN(request_hash, "pg_catalog.bytea", BOTH) \
	COLUMN(compensates, "pg_catalog.text", BOTH) \
	COLUMN(receipt, "pg_catalog.text", BOTH) \
	COLUMN(effect_id, "pg_catalog.text", BOTH) \
	COLUMN(error_class, "pg_catalog.text", BOTH) \
	COLUMN(request, "pg_catalog.jsonb", BOTH) \
	COLUMN(result, "pg_catalog.jsonb", BOTH) \
	COLUMN(evidence, "pg_catalog.jsonb", BOTH) \
	COLUMN(error, "pg_catalog.jsonb", BOTH) \
	COLUMN(finished_at, "timestamp with time zone", HISTORY)

/*
 * The generators.  A move's value is AS_IS or TO(expression) applied to
 * the column's name as a string: AS_IS("name") is "name", and
 * TO("expression")("name") is "expression" (TO leaves ROW_DROP behind,
 * which takes the name away).
 */
#define AS_IS(name) name
#define TO(expression) expression ROW_DROP
#define ROW_DROP(name)

#define ROW_FIRST_NAME(name, ...) #name
#define ROW_NAME(name, ...) ", " #name

#define ROW_FIRST_FINISH(name, type, finish, revive, commit) finish(#name)
#define ROW_FINISH(name, type, finish, revive, commit) ", " finish(#name)
#define ROW_FIRST_REVIVE(name, type, finish, revive, commit) revive(#name)
#define ROW_REVIVE(name, type, finish, revive, commit) ", " revive(#name)
#define ROW_FIRST_COMMIT(name, type, finish, revive, commit) commit(#name)
#define ROW_COMMIT(name, type, finish, revive, commit) ", " commit(#name)

/* a step's column in the live table: BOTH, not HISTORY */
#define ROW_LIVE_NAME(name, type, where) ROW_IN_LIVE_##where(", " #name)
#define ROW_IN_LIVE_BOTH(text) text
#define ROW_IN_LIVE_HISTORY(text)

/* every column of a task, in the order of its tables */
#define TASK_TABLE_COLUMNS DURABLE_TASK_ROW(ROW_FIRST_NAME, ROW_NAME)

/* a finished task's row in history, from its live row (move.c's finish) */
#define FINISHED_TASK_ROW DURABLE_TASK_ROW(ROW_FIRST_FINISH, ROW_FINISH)

/* a replayed task's live row, from its row in history (move.c's revive) */
#define REVIVED_TASK_ROW DURABLE_TASK_ROW(ROW_FIRST_REVIVE, ROW_REVIVE)

/* a committed task's row in history, from its live row (commit_batch) */
#define COMMITTED_TASK_ROW DURABLE_TASK_ROW(ROW_FIRST_COMMIT, ROW_COMMIT)

/* the columns of durable.live_steps, and of durable.step_history */
#define STEP_TABLE_COLUMNS DURABLE_STEP_ROW(ROW_FIRST_NAME, ROW_LIVE_NAME)
#define STEP_HISTORY_COLUMNS DURABLE_STEP_ROW(ROW_FIRST_NAME, ROW_NAME)

/* the four tables, for a statement that restates their rows (row.c) */
extern DurableTable DurableLiveTasksTable;
extern DurableTable DurableTaskHistoryTable;
extern DurableTable DurableLiveStepsTable;
extern DurableTable DurableStepHistoryTable;

#define DURABLE_ROW_TABLES \
	.tables = {&DurableLiveTasksTable, &DurableTaskHistoryTable, \
			   &DurableLiveStepsTable, &DurableStepHistoryTable}

#endif							/* DURABLE_CORE_ROW_H */
