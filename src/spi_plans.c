/*-------------------------------------------------------------------------
 *
 * spi_plans.c
 *	  Every SQL statement durable runs, prepared once per backend.
 *
 * Statements name every relation and function with its schema, take values
 * only as $n parameters, and never call a volatile function inside an
 * UPDATE: the caller binds the transaction time.  They always run with
 * search_path = pg_catalog, pg_temp (the API functions pin it, the
 * reconciler sets it), so operators resolve to the built-in ones.  Plans are kept for the life of the backend; the plan
 * cache revalidates them after DDL.
 *
 * Concurrency lives in the statements themselves: claims take rows with
 * FOR UPDATE SKIP LOCKED, fenced writes re-check fence and state in their
 * WHERE clause (so a write that waited for a lock sees the row as it is
 * after the other transaction), and idempotent inserts use ON CONFLICT.
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "catalog/pg_type.h"

#define MAX_ARGS 16

typedef struct DurableStmtDef
{
	const char *name;
	const char *sql;
	int			nargs;
	Oid			argtypes[MAX_ARGS];
} DurableStmtDef;

/* the columns of a task that fail, cancel and error reports read */
#define TASK_COLUMNS \
	"SELECT t.state::text, t.fence, t.attempt, t.max_attempts, t.created_at," \
	" t.deadline, t.class::text, t.queue_name, t.owner, t.lease_until," \
	" q.retry_base, q.retry_cap, q.retry_capacity" \
	" FROM durable.tasks t" \
	" LEFT JOIN durable.queues q ON q.queue_name = t.queue_name" \
	" WHERE t.partition_key = $1" \
	" AND t.task_id = $2"

static const DurableStmtDef durable_stmts[DURABLE_NUM_STMTS] = {
	[STMT_QUEUE_GET] = {
		"queue_get",
		"SELECT partition_base, partitions, lease, max_attempts, deadline,"
		" notify, paused"
		" FROM durable.queues WHERE queue_name = $1",
		1, {TEXTOID}
	},
	[STMT_QUEUE_INSERT] = {
		"queue_insert",
		"INSERT INTO durable.queues (queue_name, partition_base, partitions,"
		" lease, max_attempts, retry_base, retry_cap, deadline,"
		" retry_capacity, retry_refill_rate, retry_tokens, retry_tokens_at,"
		" progress_timeout, notify, created_at)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,"
		" COALESCE($9, 0), $11, $12, $13, $11)"
		" ON CONFLICT (queue_name) DO NOTHING",
		13, {TEXTOID, INT4OID, INT4OID, INTERVALOID, INT4OID, INT4OID, INT4OID,
		INTERVALOID, INT4OID, FLOAT8OID, TIMESTAMPTZOID, INTERVALOID, BOOLOID}
	},
	[STMT_QUEUE_ALTER] = {
		"queue_alter",
		"UPDATE durable.queues SET"
		" lease = COALESCE($2, lease),"
		" max_attempts = COALESCE($3, max_attempts),"
		" retry_base = COALESCE($4, retry_base),"
		" retry_cap = COALESCE($5, retry_cap),"
		" deadline = CASE WHEN $11 THEN NULL ELSE COALESCE($6, deadline) END,"
		" retry_capacity = CASE WHEN $12 THEN NULL ELSE COALESCE($7, retry_capacity) END,"
		" retry_tokens = CASE WHEN $7 IS NULL THEN retry_tokens"
		"  WHEN retry_capacity IS NULL THEN $7::float8"
		"  ELSE LEAST(retry_tokens, $7::float8) END,"
		" retry_refill_rate = COALESCE($8, retry_refill_rate),"
		" progress_timeout = CASE WHEN $13 THEN NULL ELSE COALESCE($9, progress_timeout) END,"
		" notify = COALESCE($10, notify)"
		" WHERE queue_name = $1",
		13, {TEXTOID, INTERVALOID, INT4OID, INT4OID, INT4OID, INTERVALOID,
			INT4OID, FLOAT8OID, INTERVALOID, BOOLOID, BOOLOID, BOOLOID, BOOLOID}
	},
	[STMT_QUEUE_SET_PAUSED] = {
		"queue_set_paused",
		"UPDATE durable.queues SET paused = $2"
		" WHERE queue_name = $1",
		2, {TEXTOID, BOOLOID}
	},
	[STMT_QUEUE_LOCK_TASKS] = {
		"queue_lock_tasks",
		"LOCK TABLE durable.tasks IN SHARE MODE",
		0, {InvalidOid}
	},
	[STMT_QUEUE_UNFINISHED] = {
		"queue_unfinished",
		"SELECT pg_catalog.count(*) FROM durable.tasks"
		" WHERE partition_key = ANY ($2)"
		" AND queue_name = $1"
		" AND state NOT IN ('completed', 'failed', 'cancelled')",
		2, {TEXTOID, INT4ARRAYOID}
	},
	[STMT_QUEUE_DROP] = {
		"queue_drop",
		"WITH t AS (DELETE FROM durable.tasks"
		"  WHERE partition_key = ANY ($2)"
		"  AND queue_name = $1"
		"  RETURNING partition_key, task_id),"
		" e AS (DELETE FROM durable.events e USING t"
		"  WHERE e.partition_key = t.partition_key"
		"  AND e.task_id = t.task_id)"
		" DELETE FROM durable.queues WHERE queue_name = $1",
		2, {TEXTOID, INT4ARRAYOID}
	},
	[STMT_QUEUE_TOKENS_LOCK] = {
		"queue_tokens_lock",
		"SELECT retry_capacity, retry_refill_rate, retry_tokens, retry_tokens_at"
		" FROM durable.queues WHERE queue_name = $1"
		" FOR NO KEY UPDATE",
		1, {TEXTOID}
	},
	[STMT_QUEUE_TOKENS_SET] = {
		"queue_tokens_set",
		"UPDATE durable.queues SET retry_tokens = $2, retry_tokens_at = $3"
		" WHERE queue_name = $1",
		3, {TEXTOID, FLOAT8OID, TIMESTAMPTZOID}
	},
	[STMT_PARTITIONS] = {
		"partitions",
		"SELECT DISTINCT (q.partition_base + i)"
		" % " CppAsString2(DURABLE_PARTITION_SPACE)
		" FROM durable.queues q, pg_catalog.generate_series(0, q.partitions - 1) i",
		0, {InvalidOid}
	},
	[STMT_ENQUEUE] = {
		"enqueue",
		"WITH t AS (INSERT INTO durable.tasks (partition_key, task_id, state,"
		"  class, priority, max_attempts, run_at, created_at, deadline,"
		"  queue_name, idempotency_key, request_hash, workflow_version,"
		"  payload, metadata)"
		"  VALUES ($1, pg_catalog.nextval('durable.task_seq'::pg_catalog.regclass)"
		"  << " CppAsString2(DURABLE_ID_SHIFT) " | $2,"
		"  'ready', $3::durable.activity_class, $4, $5, $6, $7, $8, $9, $10,"
		"  $11, $12, $13, $14)"
		"  ON CONFLICT (partition_key, queue_name, idempotency_key)"
		"  WHERE idempotency_key IS NOT NULL DO NOTHING"
		"  RETURNING partition_key, task_id, version, fence)"
		" INSERT INTO durable.events (partition_key, task_id, seq, state, fence,"
		" at, kind, actor)"
		" SELECT partition_key, task_id, version, 'ready', fence, $7,"
		" 'enqueued', $15 FROM t"
		" RETURNING task_id",
		15, {INT4OID, INT8OID, TEXTOID, INT4OID, INT4OID, TIMESTAMPTZOID,
			TIMESTAMPTZOID, INTERVALOID, TEXTOID, TEXTOID, BYTEAOID, TEXTOID,
		JSONBOID, JSONBOID, TEXTOID}
	},
	[STMT_ENQUEUE_EXISTING] = {
		"enqueue_existing",
		"SELECT task_id, request_hash FROM durable.tasks"
		" WHERE partition_key = $1"
		" AND queue_name = $2"
		" AND idempotency_key = $3",
		3, {INT4OID, TEXTOID, TEXTOID}
	},
	[STMT_CLAIM] = {
		"claim",
		"WITH u AS (UPDATE durable.tasks t SET state = 'running', owner = $5,"
		"  lease = $6, lease_until = $7, heartbeat_at = $3, progress = NULL,"
		"  progress_at = $3, fence = t.fence + 1, attempt = t.attempt + 1,"
		"  version = t.version + 1"
		"  WHERE t.partition_key = $1 AND t.task_id = ANY (ARRAY("
		"   SELECT task_id FROM durable.tasks"
		"   WHERE partition_key = $1 AND queue_name = $2"
		"   AND state IN ('ready', 'waiting') AND run_at <= $3"
		"   ORDER BY priority DESC, run_at, task_id"
		"   LIMIT $4 FOR UPDATE SKIP LOCKED))"
		"  RETURNING t.partition_key, t.task_id, t.fence, t.lease_until,"
		"  t.attempt, t.payload, t.checkpoint, t.version, t.priority, t.run_at),"
		" e AS (INSERT INTO durable.events (partition_key, task_id, seq, state,"
		"  fence, at, kind, actor)"
		"  SELECT partition_key, task_id, version, 'running', fence, $3,"
		"  'claimed', $5 FROM u)"
		" SELECT task_id, fence, lease_until, attempt, payload, checkpoint"
		" FROM u ORDER BY priority DESC, run_at, task_id",
		7, {INT4OID, TEXTOID, TIMESTAMPTZOID, INT4OID, TEXTOID, INTERVALOID,
		TIMESTAMPTZOID}
	},
	[STMT_HEARTBEAT] = {
		"heartbeat",
		"UPDATE durable.tasks SET"
		" lease = COALESCE($4, lease),"
		" lease_until = $3 + COALESCE($4, lease),"
		" heartbeat_at = $3,"
		" progress_at = CASE WHEN $5::text IS NOT NULL"
		"  AND $5::text IS DISTINCT FROM progress THEN $3 ELSE progress_at END,"
		" progress = COALESCE($5, progress)"
		" WHERE partition_key = $1"
		" AND task_id = $2"
		" AND fence = $6 AND state = 'running'"
		" RETURNING lease_until",
		6, {INT4OID, INT8OID, TIMESTAMPTZOID, INTERVALOID, TEXTOID, INT8OID}
	},
	[STMT_TRANSITION] = {
		"transition",
		"WITH u AS (UPDATE durable.tasks SET"
		"  state = $5::durable.task_state,"
		"  fence = fence + $6,"
		"  version = version + 1,"
		"  run_at = COALESCE($7, run_at),"
		"  stop_code = $8,"
		"  last_error = COALESCE($9, last_error),"
		"  result = COALESCE($10, result),"
		"  lease = NULL, lease_until = NULL"
		"  WHERE partition_key = $1"
		"  AND task_id = $2"
		"  AND fence = $3"
		"  AND state = $4::durable.task_state"
		"  RETURNING partition_key, task_id, version, fence, state, owner)"
		" INSERT INTO durable.events (partition_key, task_id, seq, state, fence,"
		" at, kind, actor, detail)"
		" SELECT partition_key, task_id, version, state, fence, $11, $12,"
		" COALESCE($13, owner), $14 FROM u"
		" RETURNING seq",
		14, {INT4OID, INT8OID, INT8OID, TEXTOID, TEXTOID, INT8OID,
			TIMESTAMPTZOID, TEXTOID, JSONBOID, JSONBOID, TIMESTAMPTZOID, TEXTOID,
		TEXTOID, JSONBOID}
	},
	[STMT_TASK_GET] = {
		"task_get",
		TASK_COLUMNS,
		2, {INT4OID, INT8OID}
	},
	[STMT_TASK_LOCK] = {
		"task_lock",
		TASK_COLUMNS " FOR NO KEY UPDATE OF t",
		2, {INT4OID, INT8OID}
	},
	[STMT_EXPIRED] = {
		"expired",
		"SELECT t.task_id, t.fence, t.attempt, t.max_attempts, t.class::text,"
		" t.owner, t.lease_until, q.retry_base, q.retry_cap, t.queue_name,"
		" q.retry_capacity IS NOT NULL"
		" FROM durable.tasks t"
		" JOIN durable.queues q ON q.queue_name = t.queue_name"
		" WHERE t.partition_key = $1"
		" AND t.state = 'running'"
		" AND t.lease_until < $2"
		" ORDER BY t.lease_until LIMIT $3"
		" FOR NO KEY UPDATE OF t SKIP LOCKED",
		3, {INT4OID, TIMESTAMPTZOID, INT4OID}
	},
};

StaticAssertDecl(DURABLE_ID_SHIFT == DURABLE_PARTITION_BITS + DURABLE_NODE_BITS,
				 "task id layout does not add up");

static SPIPlanPtr durable_plans[DURABLE_NUM_STMTS];

/*
 * DurablePlan
 *		The kept plan of a statement, prepared on its first use.
 */
SPIPlanPtr
DurablePlan(DurableStmt id)
{
	const DurableStmtDef *def = &durable_stmts[id];

	if (durable_plans[id] == NULL)
	{
		SPIPlanPtr	plan;

		/*
		 * Plan once: a custom plan per call would cost more than most of
		 * these statements take to run.  The statements are written so that
		 * their generic plans use the right indexes whatever the values.
		 */
		plan = SPI_prepare_cursor(def->sql, def->nargs, (Oid *) def->argtypes,
								  CURSOR_OPT_GENERIC_PLAN);

		if (plan == NULL)
			elog(ERROR, "could not prepare \"%s\": %s",
				 def->name, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "could not keep plan for \"%s\"", def->name);
		durable_plans[id] = plan;
	}
	return durable_plans[id];
}

/*
 * DurableExecute
 *		Run a statement with the given parameters and check that SPI
 *		returned what the caller expects.  nulls follows SPI's convention
 *		(' ' not null, 'n' null) and may be NULL when no value is null.
 *		Returns SPI_processed.
 */
uint64
DurableExecute(DurableStmt id, Datum *values, const char *nulls,
			   int expected, long tcount)
{
	int			rc;

	rc = SPI_execute_plan(DurablePlan(id), values, nulls, false, tcount);
	if (rc != expected)
		elog(ERROR, "unexpected SPI result for \"%s\": %s",
			 durable_stmts[id].name, SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * Accessors for a column of the current SPI result.  Null handling is
 * explicit: the "_or" forms return the given default for NULL.
 */
Datum
DurableResultDatum(uint64 row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
						 col, isnull);
}

int64
DurableResultInt64(uint64 row, int col)
{
	bool		isnull;
	Datum		d = DurableResultDatum(row, col, &isnull);

	if (isnull)
		elog(ERROR, "unexpected null in column %d", col);
	return SPI_gettypeid(SPI_tuptable->tupdesc, col) == INT8OID ?
		DatumGetInt64(d) : (int64) DatumGetInt32(d);
}

/* a column as text (NULL for NULL), valid until SPI_finish */
char *
DurableResultText(uint64 row, int col)
{
	bool		isnull;

	(void) DurableResultDatum(row, col, &isnull);
	if (isnull)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);
}
