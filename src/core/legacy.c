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
	[STMT_PARTITIONS] = {
		"partitions",
		"SELECT DISTINCT (q.partition_base + i)"
		" % " CppAsString2(DURABLE_PARTITION_SPACE)
		" FROM durable.queues q, pg_catalog.generate_series(0, q.partitions - 1) i",
		0, {InvalidOid}
	},
	/* on Citus: those of the partitions whose shards this node holds */
	[STMT_PARTITIONS_LOCAL] = {
		"partitions_local",
		"SELECT p FROM (SELECT DISTINCT (q.partition_base + i)"
		"  % " CppAsString2(DURABLE_PARTITION_SPACE)
		"  FROM durable.queues q, pg_catalog.generate_series(0, q.partitions - 1) i) x(p)"
		" WHERE EXISTS (SELECT FROM pg_catalog.pg_dist_placement pl"
		"  WHERE pl.shardid = pg_catalog.get_shard_id_for_distribution_column("
		"   'durable.live_tasks'::pg_catalog.regclass, x.p)"
		"  AND pl.groupid = (SELECT groupid FROM pg_catalog.pg_dist_local_group))",
		0, {InvalidOid}
	},
	/* on Citus: this node's shards of durable.live_tasks, by name */
	[STMT_LOCAL_TASK_SHARDS] = {
		"local_task_shards",
		"SELECT 'live_tasks_' || s.shardid FROM pg_catalog.pg_dist_shard s"
		" JOIN pg_catalog.pg_dist_placement pl ON pl.shardid = s.shardid"
		" WHERE s.logicalrelid = 'durable.live_tasks'::pg_catalog.regclass"
		" AND pl.groupid = (SELECT groupid FROM pg_catalog.pg_dist_local_group)"
		" ORDER BY s.shardid",
		0, {InvalidOid}
	},
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
	[STMT_MAINTAIN_HISTORY] = {
		"maintain_history",
		"SELECT task_id, action, part, error_code, error_message"
		" FROM durable.maintain_history($1,"
		" pg_catalog.make_interval(secs => $2), $3)",
		3, {TIMESTAMPTZOID, INT4OID, INT4OID}
	},
	/* retention of one table each, a part of the tick apiece (retention.c) */
	[STMT_RETAIN_INBOX] = {
		"retain_inbox",
		"DELETE FROM durable.inbox WHERE ctid = ANY (ARRAY("
		" SELECT ctid FROM durable.inbox WHERE received_at < $1"
		" LIMIT $2 FOR UPDATE SKIP LOCKED))",
		2, {TIMESTAMPTZOID, INT4OID}
	},
	[STMT_RETAIN_OUTBOX] = {
		"retain_outbox",
		"DELETE FROM durable.outbox WHERE ctid = ANY (ARRAY("
		" SELECT ctid FROM durable.outbox WHERE published_at < $1"
		" LIMIT $2 FOR UPDATE SKIP LOCKED))",
		2, {TIMESTAMPTZOID, INT4OID}
	},
	[STMT_RETAIN_KEYS] = {
		"retain_keys",
		"DELETE FROM durable.idempotency_keys WHERE ctid = ANY (ARRAY("
		" SELECT ctid FROM durable.idempotency_keys WHERE expires_at < $1"
		" LIMIT $2 FOR UPDATE SKIP LOCKED))",
		2, {TIMESTAMPTZOID, INT4OID}
	},
	/*
	 * On Citus, where rows are locked (SKIP LOCKED) only in a statement on
	 * one shard: each table in one statement on all shards, without a
	 * batch limit, run by the coordinator's reconciler alone ($2 unused).
	 */
	[STMT_RETAIN_INBOX_ALL] = {
		"retain_inbox_all",
		"DELETE FROM durable.inbox WHERE received_at < $1 AND $2 IS NOT NULL",
		2, {TIMESTAMPTZOID, INT4OID}
	},
	[STMT_RETAIN_OUTBOX_ALL] = {
		"retain_outbox_all",
		"DELETE FROM durable.outbox WHERE published_at < $1 AND $2 IS NOT NULL",
		2, {TIMESTAMPTZOID, INT4OID}
	},
	[STMT_RETAIN_KEYS_ALL] = {
		"retain_keys_all",
		"DELETE FROM durable.idempotency_keys WHERE expires_at < $1 AND $2 IS NOT NULL",
		2, {TIMESTAMPTZOID, INT4OID}
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
	[STMT_WAIT_GET] = {
		"wait_get",
		"SELECT w ->> 'kind', w -> 'args', w ->> 'status', " WAIT_UNTIL("w") ","
		" w -> 'payload', (w ->> 'task_id')::int8"
		" FROM (SELECT waits -> $3 AS w FROM durable.live_tasks"
		"  WHERE partition_key = $1 AND task_id = $2) t"
		" WHERE w IS NOT NULL",
		3, {INT4OID, INT8OID, TEXTOID}
	},
	[STMT_WAIT_SET] = {
		"wait_set",
		"UPDATE durable.live_tasks SET waits ="
		" COALESCE(waits, '{}'::pg_catalog.jsonb)"
		"  || pg_catalog.jsonb_build_object($3::text, $4::pg_catalog.jsonb)"
		" WHERE partition_key = $1 AND task_id = $2",
		4, {INT4OID, INT8OID, TEXTOID, JSONBOID}
	},
	[STMT_WAIT_RESOLVE] = {
		"wait_resolve",
		"UPDATE durable.live_tasks SET waits = pg_catalog.jsonb_set(waits,"
		" ARRAY[$3::text], (waits -> $3::text) || pg_catalog.jsonb_build_object("
		" 'status', $4::text, 'resolved_at', " UTC_TIME_JSON("$6") ")"
		" || " WAIT_PAYLOAD("$5") ")"
		" WHERE partition_key = $1 AND task_id = $2",
		6, {INT4OID, INT8OID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID}
	},
	[STMT_SPAWNED] = {
		"spawned",
		"SELECT w.key, (w.value ->> 'task_id')::int8"
		" FROM durable.live_tasks t, pg_catalog.jsonb_each(t.waits) w"
		" WHERE t.partition_key = $1 AND t.task_id = $2"
		" AND w.value ->> 'kind' = 'spawn'"
		" ORDER BY 2",
		2, {INT4OID, INT8OID}
	},
	[STMT_CHILDREN_STATES] = {
		"children_states",
		"SELECT t.task_id, t.state::text, t.result, t.last_error"
		" FROM durable.tasks t"
		" WHERE t.partition_key = ANY ($2) AND t.task_id = ANY ($1)",
		2, {INT8ARRAYOID, INT4ARRAYOID}
	},

	[STMT_EVENT_PLACE] = {
		"event_place",
		"INSERT INTO durable.emitted_events (partition_key, queue_name, event, created_at)"
		" VALUES ($1, $2, $3, $4)"
		" ON CONFLICT (partition_key, queue_name, event) DO NOTHING",
		4, {INT4OID, TEXTOID, TEXTOID, TIMESTAMPTZOID}
	},
	[STMT_EVENT_LOCK] = {
		"event_lock",
		"SELECT emitted_at IS NOT NULL, payload FROM durable.emitted_events"
		" WHERE partition_key = $1 AND queue_name = $2 AND event = $3"
		" FOR SHARE",
		3, {INT4OID, TEXTOID, TEXTOID}
	},
	[STMT_EVENT_EMIT] = {
		"event_emit",
		"INSERT INTO durable.emitted_events AS e (partition_key, queue_name, event,"
		" payload, payload_hash, emitted_at, role, created_at)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $6)"
		" ON CONFLICT (partition_key, queue_name, event) DO UPDATE SET"
		" payload = EXCLUDED.payload, payload_hash = EXCLUDED.payload_hash,"
		" emitted_at = EXCLUDED.emitted_at, role = EXCLUDED.role"
		" WHERE e.emitted_at IS NULL"
		" RETURNING 1",
		7, {INT4OID, TEXTOID, TEXTOID, JSONBOID, BYTEAOID, TIMESTAMPTZOID, TEXTOID}
	},
	[STMT_EVENT_GET] = {
		"event_get",
		"SELECT payload_hash, payload FROM durable.emitted_events"
		" WHERE partition_key = $1 AND queue_name = $2 AND event = $3"
		" AND emitted_at IS NOT NULL",
		3, {INT4OID, TEXTOID, TEXTOID}
	},
	[STMT_EVENT_WAIT_INSERT] = {
		"event_wait_insert",
		"INSERT INTO durable.event_waits (partition_key, queue_name, event, task_id, name)"
		" VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
		5, {INT4OID, TEXTOID, TEXTOID, INT8OID, TEXTOID}
	},
	[STMT_EVENT_WAIT_DELETE] = {
		"event_wait_delete",
		/* by the task's wait: the event's queue may be gone (dropped) */
		"DELETE FROM durable.event_waits WHERE task_id = $1 AND name = $2",
		2, {INT8OID, TEXTOID}
	},
	[STMT_EVENT_WAKE] = {
		"event_wake",
		/* the awaits of this event of this queue only */
		"WITH w AS (DELETE FROM durable.event_waits"
		"  WHERE partition_key = $1 AND queue_name = $2 AND event = $3"
		"  RETURNING task_id, name),"
		" u AS (UPDATE durable.live_tasks t SET"
		"  waits = pg_catalog.jsonb_set(t.waits, ARRAY[w.name],"
		"   (t.waits -> w.name) || pg_catalog.jsonb_build_object('status', 'received',"
		"   'resolved_at', " UTC_TIME_JSON("$5") ") || " WAIT_PAYLOAD("$4") "),"
		"  run_at = CASE WHEN t.state = 'waiting' THEN $5 ELSE t.run_at END,"
		"  version = t.version + 1"
		"  FROM w WHERE t.partition_key = (w.task_id"
		"   & " CppAsString2(DURABLE_PARTITION_MASK) ")::int4"
		"  AND t.task_id = w.task_id"
		"  AND t.waits -> w.name ->> 'status' = 'waiting'"
		"  AND (t.waits -> w.name ->> 'until' IS NULL"
		"   OR " WAIT_UNTIL("t.waits -> w.name") " > $5)"
		"  RETURNING t.partition_key, t.task_id, t.version, t.state, t.fence,"
		"  t.queue_name, w.name),"
		" e AS (INSERT INTO durable.event_log (partition_key, task_id, seq, state,"
		"  fence, at, kind, actor, detail, role)"
		"  SELECT partition_key, task_id, version, state, fence, $5, 'woken', $6,"
		"  pg_catalog.jsonb_build_object('wait', name, 'queue', $2, 'event', $3), $6"
		"  FROM u)"
		WOKEN_QUEUES,
		6, {INT4OID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, TEXTOID}
	},
	[STMT_RETAIN_EVENTS] = {
		"retain_events",
		/* emitted before the cutoff, or awaited then and no more */
		"DELETE FROM durable.emitted_events WHERE ctid = ANY (ARRAY("
		" SELECT e.ctid FROM durable.emitted_events e"
		" WHERE COALESCE(e.emitted_at, e.created_at) < $1"
		" AND (e.emitted_at IS NOT NULL OR NOT EXISTS (SELECT FROM durable.event_waits w"
		"  WHERE w.partition_key = e.partition_key AND w.queue_name = e.queue_name"
		"  AND w.event = e.event))"
		" LIMIT $2 FOR UPDATE SKIP LOCKED))",
		2, {TIMESTAMPTZOID, INT4OID}
	},
	[STMT_SCHEDULE_UPSERT] = {
		"schedule_upsert",
		"INSERT INTO durable.schedules AS s (schedule_name, cron, timezone,"
		" queue_name, payload, backfill, next_run, created_at, role)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
		" ON CONFLICT (schedule_name) DO UPDATE SET cron = EXCLUDED.cron,"
		" timezone = EXCLUDED.timezone, queue_name = EXCLUDED.queue_name,"
		" payload = EXCLUDED.payload, backfill = EXCLUDED.backfill,"
		" next_run = EXCLUDED.next_run, role = EXCLUDED.role,"
		" last_error = NULL, last_error_at = NULL",
		9, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, BOOLOID,
		TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID}
	},
	[STMT_SCHEDULE_DELETE] = {
		"schedule_delete",
		"DELETE FROM durable.schedules WHERE schedule_name = $1",
		1, {TEXTOID}
	},
	[STMT_SCHEDULES_DUE] = {
		"schedules_due",
		"SELECT s.schedule_name, s.cron, s.timezone, s.queue_name, s.payload,"
		" s.backfill, s.next_run"
		" FROM durable.schedules s"
		" JOIN durable.queues q ON q.queue_name = s.queue_name"
		" WHERE s.next_run <= $1"
		" ORDER BY s.next_run LIMIT $2"
		" FOR NO KEY UPDATE OF s SKIP LOCKED",
		2, {TIMESTAMPTZOID, INT4OID}
	},
	[STMT_SCHEDULE_ADVANCE] = {
		"schedule_advance",
		"UPDATE durable.schedules SET next_run = $2, last_run = $3,"
		" last_task_id = COALESCE($4, last_task_id),"
		" last_error = NULL, last_error_at = NULL"
		" WHERE schedule_name = $1",
		4, {TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}
	},
	[STMT_INSTALLATION_ID] = {
		"installation_id",
		"SELECT installation_id::text FROM durable.installation"
		" ORDER BY installed_at DESC, installation_id DESC LIMIT 1",
		0, {InvalidOid}
	},
	[STMT_SCHEDULE_LOCK] = {
		"schedule_lock",
		"SELECT last_run FROM durable.schedules WHERE schedule_name = $1 FOR UPDATE",
		1, {TEXTOID}
	},
	/* an occurrence that could not be enqueued is skipped, with why */
	[STMT_SCHEDULE_SKIP] = {
		"schedule_skip",
		"UPDATE durable.schedules SET next_run = $2, last_error = $3,"
		" last_error_at = COALESCE(last_error_at, $4)"
		" WHERE schedule_name = $1",
		4, {TEXTOID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID}
	},
	[STMT_TICK_FAILURES] = {
		"tick_failures",
		"SELECT part FROM durable.tick_failures",
		0, {InvalidOid}
	},
	[STMT_TICK_FAILURE_SET] = {
		"tick_failure_set",
		"INSERT INTO durable.tick_failures AS f (part, sqlstate, error,"
		" failing_since, last_failed_at, failures) VALUES ($1, $2, $3, $4, $4, 1)"
		" ON CONFLICT (part) DO UPDATE SET sqlstate = EXCLUDED.sqlstate,"
		" error = EXCLUDED.error, last_failed_at = EXCLUDED.last_failed_at,"
		" failures = f.failures + 1",
		4, {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID}
	},
	[STMT_TICK_FAILURE_CLEAR] = {
		"tick_failure_clear",
		"DELETE FROM durable.tick_failures WHERE part = $1",
		1, {TEXTOID}
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
