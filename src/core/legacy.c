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
	[STMT_QUEUE_GET] = {
		"queue_get",
		"SELECT partition_base, partitions, lease, max_attempts, deadline,"
		" notify, paused, restricted, concurrency_limit"
		" FROM durable.queues WHERE queue_name = $1",
		1, {TEXTOID}
	},
	[STMT_QUEUE_INSERT] = {
		"queue_insert",
		"INSERT INTO durable.queues (queue_name, partition_base, partitions,"
		" lease, max_attempts, retry_base, retry_cap, deadline,"
		" retry_capacity, retry_refill_rate, retry_tokens, retry_tokens_at,"
		" progress_timeout, notify, created_at, concurrency_limit)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,"
		" COALESCE($9, 0), $11, $12, $13, $11, $14)"
		" ON CONFLICT (queue_name) DO NOTHING",
		14, {TEXTOID, INT4OID, INT4OID, INTERVALOID, INT4OID, INT4OID, INT4OID,
		INTERVALOID, INT4OID, FLOAT8OID, TIMESTAMPTZOID, INTERVALOID, BOOLOID,
		INT4OID}
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
		" notify = COALESCE($10, notify),"
		" concurrency_limit = CASE WHEN $15 THEN NULL ELSE COALESCE($14, concurrency_limit) END"
		" WHERE queue_name = $1",
		15, {TEXTOID, INTERVALOID, INT4OID, INT4OID, INT4OID, INTERVALOID,
			INT4OID, FLOAT8OID, INTERVALOID, BOOLOID, BOOLOID, BOOLOID, BOOLOID,
		INT4OID, BOOLOID}
	},
	[STMT_QUEUE_SET_PAUSED] = {
		"queue_set_paused",
		"UPDATE durable.queues SET paused = $2"
		" WHERE queue_name = $1",
		2, {TEXTOID, BOOLOID}
	},
	[STMT_QUEUE_GET_SHARE] = {
		"queue_get_share",
		"SELECT partition_base, partitions, lease, max_attempts, deadline,"
		" notify, paused, restricted, concurrency_limit"
		" FROM durable.queues WHERE queue_name = $1"
		" FOR KEY SHARE",
		1, {TEXTOID}
	},
	[STMT_QUEUE_GET_FOR_DROP] = {
		"queue_get_for_drop",
		"SELECT partition_base, partitions, lease, max_attempts, deadline,"
		" notify, paused, restricted, concurrency_limit"
		" FROM durable.queues WHERE queue_name = $1"
		" FOR UPDATE",
		1, {TEXTOID}
	},
	[STMT_QUEUE_UNFINISHED] = {
		"queue_unfinished",
		"SELECT pg_catalog.count(*) FROM durable.live_tasks"
		" WHERE partition_key = ANY ($2)"
		" AND queue_name = $1"
		" AND state NOT IN ('completed', 'failed', 'cancelled')",
		2, {TEXTOID, INT4ARRAYOID}
	},
	[STMT_QUEUE_DROP] = {
		"queue_drop",
		"WITH l AS (DELETE FROM durable.live_tasks"
		"  WHERE partition_key = ANY ($2)"
		"  AND queue_name = $1"
		"  RETURNING partition_key, task_id),"
		" h AS (DELETE FROM durable.task_history"
		"  WHERE partition_key = ANY ($2)"
		"  AND queue_name = $1"
		"  RETURNING partition_key, task_id),"
		" t AS (SELECT * FROM l UNION ALL SELECT * FROM h),"
		" e AS (DELETE FROM durable.event_log e USING t"
		"  WHERE e.partition_key = t.partition_key"
		"  AND e.task_id = t.task_id),"
		" s AS (DELETE FROM durable.live_steps s USING l t"
		"  WHERE s.partition_key = t.partition_key"
		"  AND s.task_id = t.task_id),"
		" sh AS (DELETE FROM durable.step_history s USING h t"
		"  WHERE s.partition_key = t.partition_key"
		"  AND s.task_id = t.task_id),"
		" k AS (DELETE FROM durable.task_keys"
		"  WHERE partition_key = ANY ($2)"
		"  AND queue_name = $1)"
		" DELETE FROM durable.queues WHERE queue_name = $1",
		2, {TEXTOID, INT4ARRAYOID}
	},
	[STMT_QUEUE_ACCESS] = {
		"queue_access",
		"SELECT q.restricted, ARRAY(SELECT g.grantee FROM durable.queue_grants g"
		"  WHERE g.queue_name = q.queue_name AND g.privilege = $2)"
		" FROM durable.queues q WHERE q.queue_name = $1",
		2, {TEXTOID, TEXTOID}
	},
	[STMT_QUEUE_GRANT] = {
		"queue_grant",
		"WITH q AS (UPDATE durable.queues SET restricted = true"
		"  WHERE queue_name = $1 RETURNING queue_name)"
		" INSERT INTO durable.queue_grants (queue_name, grantee, privilege)"
		" SELECT q.queue_name, $2, p FROM q, pg_catalog.unnest($3::text[]) p"
		" ON CONFLICT DO NOTHING"
		" RETURNING 1",
		3, {TEXTOID, OIDOID, TEXTARRAYOID}
	},
	[STMT_QUEUE_REVOKE] = {
		"queue_revoke",
		"DELETE FROM durable.queue_grants"
		" WHERE queue_name = $1 AND grantee = $2 AND privilege = ANY ($3)",
		3, {TEXTOID, OIDOID, TEXTARRAYOID}
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
	[STMT_QUEUE_SCHEDULES] = {
		"queue_schedules",
		"SELECT schedule_name FROM durable.schedules WHERE queue_name = $1"
		" ORDER BY schedule_name",
		1, {TEXTOID}
	},
	[STMT_QUEUE_DROP_SCHEDULES] = {
		"queue_drop_schedules",
		"DELETE FROM durable.schedules WHERE queue_name = $1",
		1, {TEXTOID}
	},
	[STMT_TASK_DEFER] = {
		"task_defer",
		"UPDATE durable.live_tasks SET run_at = $3"
		" WHERE partition_key = $1 AND task_id = $2"
		" AND state = 'waiting' AND run_at < $3",
		3, {INT4OID, INT8OID, TIMESTAMPTZOID}
	},
	[STMT_ENQUEUE] = {
		"enqueue",
		"WITH t AS (INSERT INTO durable.live_tasks (partition_key, task_id, state,"
		"  class, priority, max_attempts, run_at, created_at, deadline,"
		"  queue_name, idempotency_key, request_hash, workflow_version,"
		"  payload, metadata, parent_id, concurrency_key)"
		"  VALUES ($1, pg_catalog.nextval('durable.task_seq'::pg_catalog.regclass)"
		"  << " CppAsString2(DURABLE_ID_SHIFT) " | $2,"
		"  'ready', $3::durable.activity_class, $4, $5, $6, $7, $8, $9, $10,"
		"  $11, $12, $13, $14, $16, $17)"
		"  RETURNING partition_key, task_id, version, fence)"
		ENQUEUE_EVENT,
		17, ENQUEUE_ARGTYPES
	},
	[STMT_ENQUEUE_KEYED] = {
		"enqueue_keyed",
		"WITH k AS (INSERT INTO durable.task_keys (partition_key, queue_name,"
		"  idempotency_key, task_id, request_hash, created_at)"
		"  VALUES ($1, $9, $10,"
		"  pg_catalog.nextval('durable.task_seq'::pg_catalog.regclass)"
		"  << " CppAsString2(DURABLE_ID_SHIFT) " | $2, $11, $7)"
		"  ON CONFLICT (partition_key, queue_name, idempotency_key) DO NOTHING"
		"  RETURNING task_id),"
		" t AS (INSERT INTO durable.live_tasks (partition_key, task_id, state,"
		"  class, priority, max_attempts, run_at, created_at, deadline,"
		"  queue_name, idempotency_key, request_hash, workflow_version,"
		"  payload, metadata, parent_id, concurrency_key)"
		"  SELECT $1, k.task_id, 'ready', $3::durable.activity_class, $4, $5, $6,"
		"  $7, $8, $9, $10, $11, $12, $13, $14, $16, $17 FROM k"
		"  RETURNING partition_key, task_id, version, fence)"
		ENQUEUE_EVENT,
		17, ENQUEUE_ARGTYPES
	},
	[STMT_ENQUEUE_EXISTING] = {
		"enqueue_existing",
		"SELECT task_id, request_hash FROM durable.task_keys"
		" WHERE partition_key = $1"
		" AND queue_name = $2"
		" AND idempotency_key = $3",
		3, {INT4OID, TEXTOID, TEXTOID}
	},
	[STMT_CLAIM] = {
		"claim",
		"WITH u AS (UPDATE durable.live_tasks t SET state = 'running', owner = $5,"
		"  lease = $6, lease_until = $7, heartbeat_at = $3, progress = NULL,"
		"  progress_at = $3, fence = t.fence + 1, attempt = t.attempt + 1,"
		"  version = t.version + 1, claimed_at = $3, claim_seq = t.version + 1,"
		"  claim_kind = 'claimed', claim_role = $8"
		"  WHERE t.partition_key = $1 AND t.task_id = ANY (ARRAY("
		"   SELECT task_id FROM durable.live_tasks"
		"   WHERE partition_key = $1 AND queue_name = $2"
		"   AND state IN ('ready', 'waiting') AND run_at <= $3"
		"   ORDER BY priority DESC, run_at, task_id"
		"   LIMIT $4 FOR UPDATE SKIP LOCKED))"
		"  RETURNING t.partition_key, t.task_id, t.fence, t.lease_until,"
		"  t.attempt, t.payload, t.checkpoint, t.version, t.priority, t.run_at)"
		" SELECT task_id, fence, lease_until, attempt, payload, checkpoint"
		" FROM u ORDER BY priority DESC, run_at, task_id",
		8, {INT4OID, TEXTOID, TIMESTAMPTZOID, INT4OID, TEXTOID, INTERVALOID,
		TIMESTAMPTZOID, TEXTOID}
	},
	/* on Citus: whether a partition has work to claim, and expired leases */
	[STMT_CLAIM_PROBE] = {
		"claim_probe",
		"SELECT EXISTS (SELECT FROM durable.live_tasks"
		"  WHERE partition_key = $1 AND queue_name = $2"
		"  AND state IN ('ready', 'waiting') AND run_at <= $3),"
		" EXISTS (SELECT FROM durable.live_tasks"
		"  WHERE partition_key = $1 AND state = 'running' AND lease_until < $3)",
		3, {INT4OID, TEXTOID, TIMESTAMPTZOID}
	},
	[STMT_CLAIM_LIMITED] = {
		"claim_limited",
		"WITH u AS (UPDATE durable.live_tasks t SET state = 'running', owner = $5,"
		"  lease = $6, lease_until = $7, heartbeat_at = $3, progress = NULL,"
		"  progress_at = $3, fence = t.fence + 1, attempt = t.attempt + 1,"
		"  version = t.version + 1, claimed_at = $3, claim_seq = t.version + 1,"
		"  claim_kind = 'claimed', claim_role = $8"
		"  WHERE t.partition_key = $1 AND t.task_id = ANY (ARRAY("
		"   SELECT task_id FROM durable.live_tasks c"
		"   WHERE partition_key = $1 AND queue_name = $2"
		"   AND state IN ('ready', 'waiting') AND run_at <= $3"
		"   AND (concurrency_key IS NULL"
		"    OR " KEY_BUSY " < $10)"
		"   ORDER BY priority DESC, run_at, task_id"
		"   LIMIT $4 FOR UPDATE SKIP LOCKED))"
		"  RETURNING t.partition_key, t.task_id, t.fence, t.lease_until,"
		"  t.attempt, t.payload, t.checkpoint, t.version, t.priority, t.run_at)"
		" SELECT task_id, fence, lease_until, attempt, payload, checkpoint"
		" FROM u ORDER BY priority DESC, run_at, task_id",
		10, {INT4OID, TEXTOID, TIMESTAMPTZOID, INT4OID, TEXTOID, INTERVALOID,
		TIMESTAMPTZOID, TEXTOID, INT4ARRAYOID, INT4OID}
	},
	[STMT_HEARTBEAT] = {
		"heartbeat",
		"WITH u AS (UPDATE durable.live_tasks SET"
		" lease = COALESCE($4, lease),"
		" lease_until = " UTC_PLUS("$3", "+", "COALESCE($4, lease)") ","
		" heartbeat_at = $3,"
		" progress_at = CASE WHEN $5::text IS NOT NULL"
		"  AND $5::text IS DISTINCT FROM progress THEN $3 ELSE progress_at END,"
		" progress = COALESCE($5, progress)"
		" WHERE partition_key = $1"
		" AND task_id = $2"
		" AND fence = $6 AND state = 'running'"
		" RETURNING lease_until, queue_name)"
		" SELECT u.lease_until, u.queue_name, q.restricted FROM u" QUEUE_OF_U,
		6, {INT4OID, INT8OID, TIMESTAMPTZOID, INTERVALOID, TEXTOID, INT8OID}
	},
	[STMT_HEARTBEAT_BATCH] = {
		"heartbeat_batch",
		"WITH i AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1::int8[]),"
		"  pg_catalog.unnest($2::int8[])) WITH ORDINALITY AS i(task_id, fence, n)),"
		" u AS (UPDATE durable.live_tasks t SET"
		"  lease = COALESCE($4, t.lease),"
		"  lease_until = " UTC_PLUS("$3", "+", "COALESCE($4, t.lease)") ","
		"  heartbeat_at = $3"
		"  FROM i WHERE t.partition_key = (i.task_id & " CppAsString2(DURABLE_PARTITION_MASK) ")::int4"
		"  AND t.task_id = i.task_id AND t.fence = i.fence AND t.state = 'running'"
		"  RETURNING t.task_id, t.fence, t.lease_until, t.queue_name)"
		" SELECT i.task_id, u.queue_name, q.restricted, u.lease_until"
		" FROM i LEFT JOIN u ON u.task_id = i.task_id AND u.fence = i.fence"
		" LEFT JOIN durable.queues q ON q.queue_name = u.queue_name"
		" ORDER BY i.n",
		4, {INT8ARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID, INTERVALOID}
	},
	[STMT_TRANSITION] = {
		"transition",
		"WITH u AS (UPDATE durable.live_tasks SET"
		"  state = $5::durable.task_state,"
		"  fence = fence + $6,"
		"  version = version + 1,"
		"  run_at = COALESCE($7, run_at),"
		"  stop_code = $8,"
		"  last_error = COALESCE($9, last_error),"
		"  result = COALESCE($10, result),"
		"  attempt = " MOVED_ATTEMPT ","
		"  lease = NULL, lease_until = NULL"
		MOVE_WHERE
		MOVE_RETURNING ","
		"  claimed_at, claim_seq, claim_kind, claim_role),"
		" e AS (INSERT INTO durable.event_log (partition_key, task_id, seq, state,"
		"  fence, at, kind, actor, detail, role, lease_seq, lease_fence, lease_at,"
		"  lease_kind, lease_actor, lease_role)"
		"  SELECT partition_key, task_id, version, state, fence, $11, $12,"
		"  COALESCE($13, owner), $14, $17, " ENDS_LEASE("claim_seq") ","
		"  " ENDS_LEASE("fence - $6") ", " ENDS_LEASE("claimed_at") ","
		"  " ENDS_LEASE("claim_kind") ", " ENDS_LEASE("owner") ","
		"  " ENDS_LEASE("claim_role") " FROM u"
		"  RETURNING seq)"
		" SELECT e.seq, u.queue_name, u.owner, q.restricted FROM u CROSS JOIN e"
		QUEUE_OF_U,
		18, TRANSITION_ARGTYPES
	},
	[STMT_FINISH] = {
		"finish",
		"WITH d AS (DELETE FROM durable.live_tasks" MOVE_WHERE " RETURNING *),"
		" u AS (INSERT INTO durable.task_history (" TASK_TABLE_COLUMNS ")"
		"  SELECT " FINISHED_TASK_ROW " FROM d"
		MOVE_RETURNING ", parent_id,"
		/* a task without waits, as most are, has no children to look for */
		"  CASE WHEN waits IS NOT NULL THEN"
		"  (SELECT pg_catalog.array_agg((w.value ->> 'task_id')::int8)"
		"   FROM pg_catalog.jsonb_each(waits) w"
		"   WHERE w.value ->> 'kind' = 'spawn') END AS children,"
		"  waits IS NOT NULL AS waited),"
		" s AS (DELETE FROM durable.live_steps s USING d"
		"  WHERE s.partition_key = d.partition_key AND s.task_id = d.task_id"
		"  RETURNING s.*),"
		" h AS (INSERT INTO durable.step_history (" STEP_TABLE_COLUMNS ", finished_at)"
		"  SELECT s.*, $11 FROM s)"
		" SELECT u.version, u.queue_name, u.owner, q.restricted, u.parent_id,"
		" u.children, u.waited FROM u" QUEUE_OF_U,
		18, TRANSITION_ARGTYPES
	},
	[STMT_REVIVE] = {
		"revive",
		"WITH d AS (DELETE FROM durable.task_history" MOVE_WHERE " RETURNING *),"
		/* the row was the task's last event: it becomes one of the log */
		" f AS (INSERT INTO durable.event_log (partition_key, task_id, seq, state,"
		"  fence, at, kind, actor, detail, role, lease_seq, lease_fence, lease_at,"
		"  lease_kind, lease_actor, lease_role)"
		"  SELECT partition_key, task_id, version, state, fence, finished_at,"
		"  final_kind, final_actor, final_detail, final_role, claim_seq,"
		"  claim_fence, claimed_at, claim_kind, owner, claim_role FROM d"
		"  WHERE final_kind IS NOT NULL),"
		" u AS (INSERT INTO durable.live_tasks (" TASK_TABLE_COLUMNS ")"
		"  SELECT partition_key, task_id, $5::durable.task_state, class, priority,"
		"  " MOVED_ATTEMPT ", max_attempts, version + 1, fence + $6,"
		"  COALESCE($7, run_at), created_at, NULL, heartbeat_at, progress_at,"
		"  stuck_alarm_at, NULL, NULL, deadline, queue_name, owner, progress, $8,"
		"  idempotency_key, request_hash, workflow_version, payload,"
		"  COALESCE($10, result), COALESCE($9, last_error), checkpoint,"
		"  checkpoint_version, steps_in_doubt, metadata,"
		"  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
		"  parent_id, concurrency_key, waits FROM d"
		MOVE_RETURNING "),"
		" s AS (DELETE FROM durable.step_history s USING d"
		"  WHERE s.partition_key = d.partition_key AND s.task_id = d.task_id"
		"  RETURNING s.*),"
		" l AS (INSERT INTO durable.live_steps (" STEP_TABLE_COLUMNS ")"
		"  SELECT " STEP_TABLE_COLUMNS " FROM s),"
		" e AS (INSERT INTO durable.event_log (partition_key, task_id, seq, state,"
		"  fence, at, kind, actor, detail, role)"
		"  SELECT partition_key, task_id, version, state, fence, $11, $12,"
		"  COALESCE($13, owner), $14, $17 FROM u"
		"  RETURNING seq)"
		" SELECT e.seq, u.queue_name, u.owner, q.restricted FROM u CROSS JOIN e"
		QUEUE_OF_U,
		18, TRANSITION_ARGTYPES
	},
	[STMT_COMMIT_BATCH] = {
		"commit_batch",
		"WITH i AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1::int8[]),"
		"  pg_catalog.unnest($2::int8[]), pg_catalog.unnest($3::jsonb[]))"
		"  AS i(task_id, fence, result)),"
		" d AS (DELETE FROM durable.live_tasks t USING i"
		"  WHERE t.partition_key = (i.task_id & " CppAsString2(DURABLE_PARTITION_MASK) ")::int4"
		"  AND t.task_id = i.task_id AND t.fence = i.fence"
		"  AND t.state = 'running' AND t.steps_in_doubt = 0"
		"  RETURNING t.*, i.result AS committed_result),"
		" u AS (INSERT INTO durable.task_history (" TASK_TABLE_COLUMNS ")"
		"  SELECT partition_key, task_id, 'completed', class, priority, attempt,"
		"  max_attempts, version + 1, fence, run_at, created_at, NULL, heartbeat_at,"
		"  progress_at, stuck_alarm_at, $4, NULL, deadline, queue_name, owner,"
		"  progress, NULL, idempotency_key, request_hash, workflow_version, payload,"
		"  COALESCE(committed_result, result), last_error, checkpoint,"
		"  checkpoint_version, steps_in_doubt, metadata, claimed_at, claim_seq,"
		"  fence, claim_kind, claim_role, 'completed', owner, $5, NULL,"
		"  parent_id, concurrency_key, waits FROM d"
		"  RETURNING task_id, queue_name, parent_id),"
		" s AS (DELETE FROM durable.live_steps s USING d"
		"  WHERE s.partition_key = d.partition_key AND s.task_id = d.task_id"
		"  RETURNING s.*),"
		" h AS (INSERT INTO durable.step_history (" STEP_TABLE_COLUMNS ", finished_at)"
		"  SELECT s.*, $4 FROM s)"
		" SELECT u.task_id, u.queue_name, q.restricted, u.parent_id FROM u"
		" JOIN durable.queues q ON q.queue_name = u.queue_name",
		5, {INT8ARRAYOID, INT8ARRAYOID, JSONBARRAYOID, TIMESTAMPTZOID, TEXTOID}
	},


	[STMT_EVENT_APPEND] = {
		"event_append",
		"WITH t AS (UPDATE durable.live_tasks SET version = version + 1,"
		"  steps_in_doubt = steps_in_doubt + $8"
		"  WHERE partition_key = $1 AND task_id = $2"
		"  RETURNING partition_key, task_id, version, fence, state, owner)"
		" INSERT INTO durable.event_log (partition_key, task_id, seq, state, fence,"
		" at, kind, actor, detail, step, role)"
		" SELECT partition_key, task_id, version, state, fence, $3, $4,"
		" COALESCE($5, owner), $6, $7, $9 FROM t"
		" RETURNING seq",
		9, {INT4OID, INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, JSONBOID,
		TEXTOID, INT4OID, TEXTOID}
	},





	[STMT_STEPS_UNSETTLED] = {
		"steps_unsettled",
		"SELECT step FROM durable.live_steps"
		" WHERE partition_key = $1 AND task_id = $2"
		" AND state IN ('started', 'unknown', 'failed')"
		" ORDER BY ordinal DESC",
		2, {INT4OID, INT8OID}
	},

	[STMT_RECONCILE_CLAIM] = {
		"reconcile_claim",
		"WITH u AS (UPDATE durable.live_tasks t SET state = 'running', owner = $5,"
		"  lease = $6, lease_until = $7, heartbeat_at = $3, progress = NULL,"
		"  progress_at = $3, fence = t.fence + 1, version = t.version + 1,"
		"  claimed_at = $3, claim_seq = t.version + 1,"
		"  claim_kind = 'reconcile_claimed', claim_role = $8"
		"  WHERE t.partition_key = $1 AND t.task_id = ANY (ARRAY("
		"   SELECT task_id FROM durable.live_tasks"
		"   WHERE partition_key = $1 AND queue_name = $2"
		"   AND state = 'waiting' AND run_at = 'infinity' AND steps_in_doubt > 0"
		"   ORDER BY task_id LIMIT $4 FOR UPDATE SKIP LOCKED))"
		"  RETURNING t.partition_key, t.task_id, t.fence, t.lease_until, t.version)"
		" SELECT u.task_id, u.fence, u.lease_until, s.step, s.idempotency_key,"
		" s.request"
		" FROM u JOIN durable.live_steps s ON s.partition_key = u.partition_key"
		" AND s.task_id = u.task_id AND s.state = 'unknown'"
		" ORDER BY u.task_id",
		8, {INT4OID, TEXTOID, TIMESTAMPTZOID, INT4OID, TEXTOID, INTERVALOID,
		TIMESTAMPTZOID, TEXTOID}
	},
	[STMT_TASK_GET] = {
		"task_get",
		TASK_COLUMNS("durable.tasks"),
		2, {INT4OID, INT8OID}
	},
	[STMT_TASK_LOCK] = {
		"task_lock",
		TASK_COLUMNS("durable.live_tasks") " FOR NO KEY UPDATE OF t",
		2, {INT4OID, INT8OID}
	},
	[STMT_TASK_IDS] = {
		"task_ids",
		"SELECT pg_catalog.nextval('durable.task_seq'::pg_catalog.regclass)"
		" FROM pg_catalog.generate_series(1, $1)",
		1, {INT4OID}
	},
	[STMT_ENQUEUE_BATCH] = {
		"enqueue_batch",
		"WITH i AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1::int4[]),"
		"  pg_catalog.unnest($2::int8[]), pg_catalog.unnest($3::jsonb[]),"
		"  pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::bytea[]),"
		"  pg_catalog.unnest($6::text[])) WITH ORDINALITY"
		"  AS i(partition_key, task_id, payload, idempotency_key, request_hash,"
		"  concurrency_key, n)),"
		" k AS (INSERT INTO durable.task_keys (partition_key, queue_name,"
		"  idempotency_key, task_id, request_hash, created_at)"
		"  SELECT partition_key, $7, idempotency_key, task_id, request_hash, $8"
		"  FROM i WHERE idempotency_key IS NOT NULL ORDER BY n"
		"  ON CONFLICT (partition_key, queue_name, idempotency_key) DO NOTHING"
		"  RETURNING task_id),"
		" t AS (INSERT INTO durable.live_tasks (partition_key, task_id, state,"
		"  class, priority, max_attempts, run_at, created_at, deadline,"
		"  queue_name, idempotency_key, request_hash, workflow_version,"
		"  payload, metadata, concurrency_key)"
		"  SELECT partition_key, task_id, 'ready', $10::durable.activity_class,"
		"  $11, $12, $9, $8, $13, $7, idempotency_key, request_hash, $14,"
		"  payload, $15, concurrency_key FROM i"
		"  WHERE idempotency_key IS NULL OR task_id IN (SELECT task_id FROM k)"
		"  RETURNING partition_key, task_id, version, fence),"
		" e AS (INSERT INTO durable.event_log (partition_key, task_id, seq, state,"
		"  fence, at, kind, actor, role)"
		"  SELECT partition_key, task_id, version, 'ready', fence, $8,"
		"  'enqueued', $16, $16 FROM t)"
		" SELECT n FROM i WHERE task_id NOT IN (SELECT task_id FROM t) ORDER BY n",
		16, {INT4ARRAYOID, INT8ARRAYOID, JSONBARRAYOID, TEXTARRAYOID,
			BYTEAARRAYOID, TEXTARRAYOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
		TEXTOID, INT4OID, INT4OID, INTERVALOID, TEXTOID, JSONBOID, TEXTOID}
	},
	[STMT_CHILDREN_STATES] = {
		"children_states",
		"SELECT t.task_id, t.state::text, t.result, t.last_error"
		" FROM durable.tasks t"
		" WHERE t.partition_key = ANY ($2) AND t.task_id = ANY ($1)",
		2, {INT8ARRAYOID, INT4ARRAYOID}
	},
	[STMT_PARENT_LOCK] = {
		"parent_lock",
		/* an update, not a lock: see DurableWakeParent */
		"UPDATE durable.live_tasks SET run_at = run_at"
		" WHERE partition_key = $1 AND task_id = $2",
		2, {INT4OID, INT8OID}
	},
	[STMT_PARENT_WAKE] = {
		"parent_wake",
		"WITH p AS (SELECT t.partition_key, t.task_id, j.key AS name"
		"  FROM durable.live_tasks t, pg_catalog.jsonb_each(t.waits) j"
		"  WHERE t.partition_key = $1 AND t.task_id = $2 AND t.state = 'waiting'"
		"  AND t.run_at > $3"
		"  AND j.value ->> 'kind' = 'join' AND j.value ->> 'status' = 'waiting'"
		"  AND NOT EXISTS (SELECT FROM pg_catalog.jsonb_each(t.waits) s"
		"   JOIN durable.live_tasks c"
		"   ON c.partition_key = ((s.value ->> 'task_id')::int8"
		"    & " CppAsString2(DURABLE_PARTITION_MASK) ")::int4"
		"   AND c.task_id = (s.value ->> 'task_id')::int8"
		"   WHERE s.value ->> 'kind' = 'spawn'"
		"   AND (pg_catalog.jsonb_typeof(j.value -> 'args' -> 'children') = 'null'"
		"    OR j.value -> 'args' -> 'children' ? s.key))),"
		" u AS (UPDATE durable.live_tasks t SET run_at = $3, version = t.version + 1"
		"  FROM p WHERE t.partition_key = p.partition_key AND t.task_id = p.task_id"
		"  RETURNING t.partition_key, t.task_id, t.version, t.state, t.fence,"
		"  t.queue_name, p.name),"
		" e AS (INSERT INTO durable.event_log (partition_key, task_id, seq, state,"
		"  fence, at, kind, actor, detail, role)"
		"  SELECT partition_key, task_id, version, state, fence, $3, 'woken', $5,"
		"  pg_catalog.jsonb_build_object('wait', name, 'child', $4), $5 FROM u)"
		WOKEN_QUEUES,
		5, {INT4OID, INT8OID, TIMESTAMPTZOID, INT8OID, TEXTOID}
	},
	[STMT_TASK_PARENT] = {
		"task_parent",
		"SELECT parent_id FROM durable.live_tasks"
		" WHERE partition_key = $1 AND task_id = $2 AND parent_id IS NOT NULL",
		2, {INT4OID, INT8OID}
	},

	[STMT_EVENT_WAITS_DROP] = {
		"event_waits_drop",
		"DELETE FROM durable.event_waits WHERE task_id = $1",
		1, {INT8OID}
	},
	[STMT_QUEUE_DROP_EVENTS] = {
		"queue_drop_events",
		"WITH w AS (DELETE FROM durable.event_waits"
		"  WHERE partition_key = ANY ($2) AND queue_name = $1)"
		" DELETE FROM durable.emitted_events"
		" WHERE partition_key = ANY ($2) AND queue_name = $1",
		2, {TEXTOID, INT4ARRAYOID}
	},
	[STMT_TICK_FAILURES_FORGET] = {
		"tick_failures_forget",
		"DELETE FROM durable.tick_failures WHERE part = ANY ($1)",
		1, {TEXTARRAYOID}
	},
};

static const DurableSplitDef durable_splits[DURABLE_NUM_STMTS] = {
	/* each table on all its shards, joined on partition_key where needed */
	[STMT_QUEUE_DROP] = {5, {
		{"WITH a AS (DELETE FROM durable.event_log x" QUEUE_TASKS("durable.live_tasks") " RETURNING 1),"
			" b AS (DELETE FROM durable.event_log x" QUEUE_TASKS("durable.task_history") " RETURNING 1)"
			" SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)",
		DURABLE_SPLIT_NO_INPUT, false},
		{"WITH a AS (DELETE FROM durable.live_steps x" QUEUE_TASKS("durable.live_tasks") " RETURNING 1),"
			" b AS (DELETE FROM durable.step_history x" QUEUE_TASKS("durable.task_history") " RETURNING 1)"
			" SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)",
		DURABLE_SPLIT_NO_INPUT, false},
		{"WITH a AS (DELETE FROM durable.live_tasks WHERE partition_key = ANY ($2)"
			"  AND queue_name = $1 RETURNING 1),"
			" b AS (DELETE FROM durable.task_history WHERE partition_key = ANY ($2)"
			"  AND queue_name = $1 RETURNING 1)"
			" SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)",
		DURABLE_SPLIT_NO_INPUT, false},
		{"DELETE FROM durable.task_keys WHERE partition_key = ANY ($2) AND queue_name = $1",
		DURABLE_SPLIT_NO_INPUT, false},
		{"DELETE FROM durable.queues WHERE queue_name = $1", DURABLE_SPLIT_NO_INPUT, false}}
	},
	[STMT_ENQUEUE] = {2, {
		{"INSERT INTO durable.live_tasks (" ENQUEUE_COLUMNS ")"
			" VALUES ($1, pg_catalog.nextval('durable.task_seq'::pg_catalog.regclass)"
			" << " CppAsString2(DURABLE_ID_SHIFT) " | $2,"
			" 'ready', $3::durable.activity_class, $4, $5, $6, $7, $8, $9, $10,"
			" $11, $12, $13, $14, $16, $17)"
			" RETURNING partition_key, task_id, version, fence",
		DURABLE_SPLIT_NO_INPUT, true},
		{ENQUEUE_EVENT_SPLIT, 0, true}}
	},
	[STMT_ENQUEUE_KEYED] = {3, {
		{"INSERT INTO durable.task_keys (partition_key, queue_name,"
			" idempotency_key, task_id, request_hash, created_at)"
			" VALUES ($1, $9, $10,"
			" pg_catalog.nextval('durable.task_seq'::pg_catalog.regclass)"
			" << " CppAsString2(DURABLE_ID_SHIFT) " | $2, $11, $7)"
			" ON CONFLICT (partition_key, queue_name, idempotency_key) DO NOTHING"
			" RETURNING task_id",
		DURABLE_SPLIT_NO_INPUT, true},
		{"INSERT INTO durable.live_tasks (" ENQUEUE_COLUMNS ")"
			" VALUES ($1, $18, 'ready', $3::durable.activity_class, $4, $5, $6,"
			" $7, $8, $9, $10, $11, $12, $13, $14, $16, $17)"
			" RETURNING partition_key, task_id, version, fence",
		0, true},
		{ENQUEUE_EVENT_SPLIT, 1, true}}
	},
	[STMT_EVENT_APPEND] = {2, {
		{"UPDATE durable.live_tasks SET version = version + 1,"
			" steps_in_doubt = steps_in_doubt + $8"
			" WHERE partition_key = $1 AND task_id = $2"
			" RETURNING partition_key, task_id, version, fence, state, owner",
		DURABLE_SPLIT_NO_INPUT, true},
		{"INSERT INTO durable.event_log (partition_key, task_id, seq, state, fence,"
			" at, kind, actor, detail, step, role)"
			" VALUES ($10, $11, $12, $14, $13, $3, $4, COALESCE($5, $15), $6, $7, $9)"
			" RETURNING seq",
		0, true}}
	},
	[STMT_TRANSITION] = {3, {
		/* $19.. partition_key, task_id, version, fence, state, owner, queue_name,
		 * claimed_at, claim_seq, claim_kind, claim_role */
		{"UPDATE durable.live_tasks SET" MOVE_SET MOVE_WHERE
			" RETURNING partition_key, task_id, version, fence, state, owner,"
			" queue_name, claimed_at, claim_seq, claim_kind, claim_role",
		DURABLE_SPLIT_NO_INPUT, true},
		{"INSERT INTO durable.event_log (partition_key, task_id, seq, state, fence,"
			" at, kind, actor, detail, role, lease_seq, lease_fence, lease_at,"
			" lease_kind, lease_actor, lease_role)"
			" VALUES ($19, $20, $21, $23, $22, $11, $12, COALESCE($13, $24), $14, $17,"
			" " ENDS_LEASE_PARAM("$27") ", " ENDS_LEASE_PARAM("$22 - $6") ","
			" " ENDS_LEASE_PARAM("$26") ", " ENDS_LEASE_PARAM("$28") ","
			" " ENDS_LEASE_PARAM("$24") ", " ENDS_LEASE_PARAM("$29") ")"
			" RETURNING seq, $25::text, $24::text",
		0, true},
		{MOVED_QUEUE("$19", "$20", "$21"), 1, true}}
	},
	[STMT_FINISH] = {5, {
		/* the task's row in history, as STMT_FINISH makes it */
		{"DELETE FROM durable.live_tasks" MOVE_WHERE
			" RETURNING " FINISHED_TASK_ROW,
		DURABLE_SPLIT_NO_INPUT, true},
		{"INSERT INTO durable.task_history (" TASK_TABLE_COLUMNS ") VALUES ($*)"
			" RETURNING version, queue_name, owner, parent_id, waits",
		0, true},
		{"DELETE FROM durable.live_steps WHERE partition_key = $1 AND task_id = $2"
			" RETURNING " STEP_TABLE_COLUMNS,
		DURABLE_SPLIT_NO_INPUT, false},
		{"INSERT INTO durable.step_history (" STEP_TABLE_COLUMNS ", finished_at)"
			" VALUES ($*, $11)",
		2, false},
		{"SELECT $19::int4 AS version, $20::text AS queue_name, $21::text AS owner,"
			" q.restricted, $22::int8 AS parent_id,"
			" CASE WHEN $23 IS NOT NULL THEN"
			" (SELECT pg_catalog.array_agg((w.value ->> 'task_id')::int8)"
			"  FROM pg_catalog.jsonb_each($23) w"
			"  WHERE w.value ->> 'kind' = 'spawn') END AS children,"
			" $23 IS NOT NULL AS waited"
			" FROM (SELECT) x LEFT JOIN durable.queues q ON q.queue_name = $20",
		1, true}}
	},
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
