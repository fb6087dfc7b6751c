/*-------------------------------------------------------------------------
 *
 * legacy.c
 *	  The statements not yet declared by the modules that run them, by
 *	  number (transitional: each moves to its module).
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_type.h"
#include "core/sql.h"

typedef struct DurableStmtDef
{
	const char *name;
	const char *sql;
	int			nargs;
	Oid			argtypes[DURABLE_MAX_ARGS];
} DurableStmtDef;

typedef struct DurableSplitDef
{
	int			nsteps;
	DurableSplitStep steps[DURABLE_MAX_SPLIT_STEPS];
} DurableSplitDef;

static const DurableStmtDef durable_stmts[DURABLE_NUM_STMTS] = {
	/* on Citus: whether a partition has work to claim, and expired leases */
	[STMT_DEAD_LETTERS] = {
		"dead_letters",
		DEAD_LETTERS("= ANY ($1)"),
		3, {INT4ARRAYOID, TEXTOID, INT4OID}
	},
	/* on Citus, which locks rows only in a statement on one shard */
	[STMT_DEAD_LETTERS_ONE] = {
		"dead_letters_one",
		DEAD_LETTERS("= $1"),
		3, {INT4OID, TEXTOID, INT4OID}
	},
	[STMT_CHECKPOINT] = {
		"checkpoint",
		"UPDATE durable.live_tasks SET checkpoint = $3,"
		" checkpoint_version = checkpoint_version + 1"
		" WHERE partition_key = $1 AND task_id = $2"
		" RETURNING checkpoint_version",
		3, {INT4OID, INT8OID, JSONBOID}
	},
	[STMT_STEP_GET] = {
		"step_get",
		"SELECT state::text, class::text, version, attempt, ordinal,"
		" idempotency_key, request_hash, result, receipt, compensates"
		" FROM durable.live_steps"
		" WHERE partition_key = $1 AND task_id = $2 AND step = $3",
		3, {INT4OID, INT8OID, TEXTOID}
	},
	[STMT_STEP_INSERT] = {
		"step_insert",
		"INSERT INTO durable.live_steps (partition_key, task_id, step, state, class,"
		" ordinal, created_at, updated_at, idempotency_key, request_hash,"
		" request, compensates)"
		" VALUES ($1, $2, $3, 'planned', $4::durable.activity_class, $5, $6, $6,"
		" $7, $8, $9, $10)"
		" ON CONFLICT (partition_key, task_id, step) DO NOTHING",
		10, {INT4OID, INT8OID, TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID,
		TEXTOID, BYTEAOID, JSONBOID, TEXTOID}
	},
	[STMT_STEP_UPDATE] = {
		"step_update",
		"UPDATE durable.live_steps SET state = $4::durable.step_state,"
		" version = version + 1, attempt = attempt + $5, updated_at = $6,"
		" result = COALESCE($7, result),"
		" receipt = CASE WHEN $13 THEN NULL ELSE COALESCE($8, receipt) END,"
		" effect_id = CASE WHEN $13 THEN NULL ELSE COALESCE($9, effect_id) END,"
		" evidence = CASE WHEN $13 THEN NULL ELSE COALESCE($10, evidence) END,"
		" error_class = COALESCE($11, error_class),"
		" error = COALESCE($12, error)"
		" WHERE partition_key = $1 AND task_id = $2 AND step = $3"
		" AND version = $14"
		" RETURNING version",
		14, {INT4OID, INT8OID, TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID,
			JSONBOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, JSONBOID, BOOLOID,
		INT4OID}
	},
	[STMT_STEPS_IN_DOUBT] = {
		"steps_in_doubt",
		"SELECT step FROM durable.live_steps"
		" WHERE partition_key = $1 AND task_id = $2"
		" AND state IN ('started', 'unknown')"
		" ORDER BY ordinal DESC",
		2, {INT4OID, INT8OID}
	},
	[STMT_STEPS_UNSETTLED] = {
		"steps_unsettled",
		"SELECT step FROM durable.live_steps"
		" WHERE partition_key = $1 AND task_id = $2"
		" AND state IN ('started', 'unknown', 'failed')"
		" ORDER BY ordinal DESC",
		2, {INT4OID, INT8OID}
	},
	[STMT_STEPS_TO_COMPENSATE] = {
		"steps_to_compensate",
		"SELECT step, class::text FROM durable.live_steps"
		" WHERE partition_key = $1 AND task_id = $2"
		" AND state IN ('committed', 'compensated') AND compensates IS NULL"
		" ORDER BY ordinal DESC",
		2, {INT4OID, INT8OID}
	},
	[STMT_EXPIRED] = {
		"expired",
		"SELECT t.task_id, t.fence, t.attempt, t.max_attempts, t.class::text,"
		" t.owner, t.lease_until, q.retry_base, q.retry_cap, t.queue_name,"
		" q.retry_capacity IS NOT NULL, t.steps_in_doubt, t.run_at"
		" FROM durable.live_tasks t"
		" JOIN durable.queues q ON q.queue_name = t.queue_name"
		" WHERE t.partition_key = $1"
		" AND t.state = 'running'"
		" AND t.lease_until < $2"
		" ORDER BY t.lease_until LIMIT $3"
		" FOR NO KEY UPDATE OF t SKIP LOCKED",
		3, {INT4OID, TIMESTAMPTZOID, INT4OID}
	},
	[STMT_STUCK] = {
		"stuck",
		/* the timeout as DurableResultText writes it, whatever IntervalStyle */
		"SELECT t.task_id, t.progress, t.progress_at, t.owner, q.progress_timeout"
		" FROM durable.live_tasks t"
		" JOIN durable.queues q ON q.queue_name = t.queue_name"
		" WHERE t.partition_key = $1 AND t.state = 'running'"
		" AND q.progress_timeout IS NOT NULL"
		" AND t.progress_at < " UTC_PLUS("$2", "-", "q.progress_timeout")
		" AND (t.stuck_alarm_at IS NULL OR t.stuck_alarm_at < t.progress_at)"
		" ORDER BY t.lease_until LIMIT $3"
		" FOR NO KEY UPDATE OF t SKIP LOCKED",
		3, {INT4OID, TIMESTAMPTZOID, INT4OID}
	},
	[STMT_STUCK_MARK] = {
		"stuck_mark",
		"UPDATE durable.live_tasks SET stuck_alarm_at = $3"
		" WHERE partition_key = $1 AND task_id = $2",
		3, {INT4OID, INT8OID, TIMESTAMPTZOID}
	},
	[STMT_INBOX_INSERT] = {
		"inbox_insert",
		"INSERT INTO durable.inbox (partition_key, consumer, message_id,"
		" payload_hash, received_at)"
		" VALUES ($1, $2, $3, $4, $5)"
		" ON CONFLICT (partition_key, consumer, message_id) DO NOTHING",
		5, {INT4OID, TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID}
	},
	[STMT_INBOX_GET] = {
		"inbox_get",
		"SELECT payload_hash FROM durable.inbox"
		" WHERE partition_key = $1 AND consumer = $2 AND message_id = $3",
		3, {INT4OID, TEXTOID, TEXTOID}
	},
	[STMT_OUTBOX_INSERT] = {
		"outbox_insert",
		"INSERT INTO durable.outbox (partition_key, message_id, created_at,"
		" topic, key, payload)"
		" VALUES ($1, pg_catalog.nextval('durable.outbox_seq'::pg_catalog.regclass)"
		" << " CppAsString2(DURABLE_ID_SHIFT) " | $2, $3, $4, $5, $6)"
		" RETURNING message_id",
		6, {INT4OID, INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, JSONBOID}
	},
	[STMT_OUTBOX_CLAIM] = {
		"outbox_claim",
		"UPDATE durable.outbox o SET"
		" fence = $5, attempt = o.attempt + 1, publisher = $2, lease_until = $3"
		" WHERE o.message_id = ANY (ARRAY("
		"  SELECT message_id FROM durable.outbox"
		"  WHERE published_at IS NULL"
		"  AND (lease_until IS NULL OR lease_until < $1)"
		"  ORDER BY message_id LIMIT $4 FOR UPDATE SKIP LOCKED))"
		" AND o.published_at IS NULL"
		" RETURNING o.message_id, o.fence, o.topic, o.key, o.payload, o.attempt",
		5, {TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID, INT4OID, INT8OID}
	},
	/*
	 * On Citus, where a statement on many shards cannot lock rows with
	 * SKIP LOCKED: the candidates are read first, then taken one by one,
	 * each by a statement on its shard that skips it if another publisher
	 * holds it, and checks again that it is free.
	 */
	[STMT_OUTBOX_CANDIDATES] = {
		"outbox_candidates",
		"SELECT partition_key, message_id FROM durable.outbox"
		" WHERE published_at IS NULL"
		" AND (lease_until IS NULL OR lease_until < $1)"
		" AND message_id > $3"
		" ORDER BY message_id LIMIT $2",
		3, {TIMESTAMPTZOID, INT4OID, INT8OID}
	},
	[STMT_OUTBOX_CLAIM_ONE] = {
		"outbox_claim_one",
		"UPDATE durable.outbox o SET"
		" fence = $5, attempt = o.attempt + 1, publisher = $2, lease_until = $3"
		" WHERE o.partition_key = $6 AND o.message_id = ANY (ARRAY("
		"  SELECT message_id FROM durable.outbox"
		"  WHERE partition_key = $6 AND message_id = $4"
		"  AND published_at IS NULL"
		"  AND (lease_until IS NULL OR lease_until < $1)"
		"  FOR UPDATE SKIP LOCKED))"
		" AND o.published_at IS NULL"
		" RETURNING o.message_id, o.fence, o.topic, o.key, o.payload, o.attempt",
		6, {TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID, INT8OID, INT8OID, INT4OID}
	},
	[STMT_OUTBOX_FENCE] = {
		"outbox_fence",
		"SELECT pg_catalog.nextval('durable.outbox_fence_seq'::pg_catalog.regclass)",
		0, {InvalidOid}
	},
	[STMT_OUTBOX_ACK] = {
		"outbox_ack",
		"UPDATE durable.outbox SET published_at = $3, lease_until = NULL"
		" WHERE partition_key = ANY ($4) AND message_id = ANY ($1)"
		" AND fence = $2 AND published_at IS NULL",
		4, {INT8ARRAYOID, INT8OID, TIMESTAMPTZOID, INT4ARRAYOID}
	},
	[STMT_IDEMPOTENT_INSERT] = {
		"idempotent_insert",
		"INSERT INTO durable.idempotency_keys (partition_key, scope, key,"
		" request_hash, created_at, locked_until, expires_at, recovery_point,"
		" fence)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, 'started', COALESCE($8, 1))"
		" ON CONFLICT (partition_key, scope, key) DO NOTHING",
		8, {INT4OID, TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID,
		TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}
	},
	[STMT_IDEMPOTENT_LOCK] = {
		"idempotent_lock",
		"SELECT request_hash, completed, locked_until, expires_at,"
		" recovery_point, response, fence"
		" FROM durable.idempotency_keys"
		" WHERE partition_key = $1 AND scope = $2 AND key = $3"
		" FOR NO KEY UPDATE",
		3, {INT4OID, TEXTOID, TEXTOID}
	},
	[STMT_IDEMPOTENT_RESTART] = {
		"idempotent_restart",
		"UPDATE durable.idempotency_keys SET request_hash = $4, completed = false,"
		" created_at = $5, locked_until = $6, expires_at = $7,"
		" recovery_point = 'started', response = NULL,"
		" fence = COALESCE($8, fence + 1)"
		" WHERE partition_key = $1 AND scope = $2 AND key = $3"
		" RETURNING fence",
		8, {INT4OID, TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID,
		TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}
	},
	[STMT_IDEMPOTENT_UPDATE] = {
		"idempotent_update",
		"UPDATE durable.idempotency_keys SET"
		" locked_until = COALESCE($4, locked_until),"
		" recovery_point = COALESCE($5, recovery_point),"
		" completed = $6, response = COALESCE($7, response),"
		" expires_at = COALESCE($8, expires_at),"
		" fence = COALESCE($10, fence + $9)"
		" WHERE partition_key = $1 AND scope = $2 AND key = $3"
		" RETURNING fence",
		10, {INT4OID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, BOOLOID,
		JSONBOID, TIMESTAMPTZOID, INT8OID, INT8OID}
	},
	[STMT_IDEMPOTENT_FENCE] = {
		"idempotent_fence",
		/* none before the 0.5.0 SQL, whose update makes the sequence */
		"SELECT pg_catalog.nextval(s)"
		" FROM pg_catalog.to_regclass('durable.request_fence_seq') s"
		" WHERE s IS NOT NULL",
		0, {InvalidOid}
	},
	[STMT_CHILDREN_STATES] = {
		"children_states",
		"SELECT t.task_id, t.state::text, t.result, t.last_error"
		" FROM durable.tasks t"
		" WHERE t.partition_key = ANY ($2) AND t.task_id = ANY ($1)",
		2, {INT8ARRAYOID, INT4ARRAYOID}
	},

	[STMT_INSTALLATION_ID] = {
		"installation_id",
		"SELECT installation_id::text FROM durable.installation"
		" ORDER BY installed_at DESC, installation_id DESC LIMIT 1",
		0, {InvalidOid}
	},
};

static const DurableSplitDef durable_splits[DURABLE_NUM_STMTS] = {
	/* each table on all its shards, joined on partition_key where needed */
};

static DurableStatement legacy_statements[DURABLE_NUM_STMTS];

uint64
DurableExecuteStmt(DurableStmt id, Datum *values, const char *nulls,
				   int expected, long tcount)
{
	DurableStatement *stmt = &legacy_statements[id];

	if (stmt->name == NULL)
	{
		const DurableStmtDef *def = &durable_stmts[id];

		if (def->sql == NULL)
			elog(ERROR, "durable statement %d has no definition", (int) id);
		stmt->name = def->name;
		stmt->sql = def->sql;
		stmt->nargs = def->nargs;
		memcpy(stmt->argtypes, def->argtypes, sizeof(def->argtypes));
		stmt->ncolumns = -1;
		stmt->nsplit = durable_splits[id].nsteps;
		memcpy(stmt->split, durable_splits[id].steps, sizeof(stmt->split));
	}
	return DurableExecute(stmt, values, nulls, expected, tcount);
}

Datum
DurableResultDatum(uint64 row, int col, bool *isnull)
{
	return DurableColumnDatum(row, col - 1, isnull);
}

int64
DurableResultInt64(uint64 row, int col)
{
	return DurableColumnInt64(row, col - 1);
}

char *
DurableResultText(uint64 row, int col)
{
	return DurableColumnText(row, col - 1);
}
