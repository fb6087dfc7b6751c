// Connections as the role that logged in, what that role may do, and every
// statement the console runs.  Statements are constants: values are always
// bound parameters.  The one identifier in them, the schema the extension's
// API functions live in, is read from pg_extension and quoted once.
//
// Nothing in them may resolve to anything but pg_catalog and durable's
// objects, whatever the role's search_path and whatever a database owner
// created in public (an exact-match overload such as public.&(bigint,
// integer) wins over pg_catalog's even when pg_catalog comes first): every
// connection starts with search_path = pg_catalog, pg_temp, and besides
// every function is schema-qualified (pg_catalog.count, the API's schema),
// every operator written OPERATOR(pg_catalog.x) and every cast to a
// pg_catalog type.  OPERATOR(...) binds like any other operator (tighter
// than comparisons, looser than + and -): its operands are parenthesized.
// The test: console/test/browser.test.mjs, under a search_path full of
// shadowing code (test/t/data/hostile_path.sql).

import crypto from 'node:crypto';
import pg from 'pg';
import { parse as parseConnectionString } from 'pg-connection-string';
import { parseJson } from './html.js';

// jsonb and json keep 64-bit integers (task ids) exact; intervals stay text
pg.types.setTypeParser(3802, parseJson);
pg.types.setTypeParser(114, parseJson);
pg.types.setTypeParser(1186, (s) => s);

// The API functions the console calls, by signature: a role is offered an
// action only when it may execute the function.
export const FUNCTIONS = {
  resolve: 'durable_resolve(bigint,text,text,jsonb,text,numeric)',
  package: 'durable_recovery_package(bigint)',
  pause: 'durable_pause(text,integer)',
  resume: 'durable_resume(text,integer)',
  quarantine: 'durable_quarantine(bigint,text)',
  replay: 'durable_replay_dead_letters(text,integer,integer,text)',
  replayChosen: 'durable_replay_dead_letters(bigint[])',
  migrate: 'durable_migrate(bigint,jsonb,jsonb,text,jsonb,boolean)',
  migrateQueue: 'durable_migrate(text,jsonb,jsonb,text,jsonb,boolean,integer)',
  cancel: 'durable_cancel(bigint,text)',
  expire: 'durable_expire_lease(bigint,text)',
  emit: 'durable_emit(text,text,jsonb)',
  pauseSchedule: 'durable_pause_schedule(text)',
  resumeSchedule: 'durable_resume_schedule(text)',
  triggerSchedule: 'durable_trigger_schedule(text)',
  prometheus: 'durable_metrics_prometheus()',
};

// What a role may read, by relation (and column where a grant is per column)
export const RELATIONS = {
  queue_gauges: 'durable.queue_gauges',
  fairness_keys: 'durable.fairness_keys',
  queue_stats: 'durable.queue_stats',
  metrics: 'durable.metrics',
  history_metrics: 'durable.history_metrics',
  wait_stats: 'durable.wait_stats',
  queue_samples: 'durable.queue_samples',
  schedule_stats: 'durable.schedule_stats',
  status: 'durable.status',
  queue_counters: 'durable.queue_counters',
  tasks: 'durable.tasks',
  live_tasks: 'durable.live_tasks',
  task_history: 'durable.task_history',
  unfinished_tasks: 'durable.unfinished_tasks',
  finished_tasks: 'durable.finished_tasks',
  queue_settings: 'durable.queue_settings',
  events: 'durable.events',
  steps: 'durable.steps',
  review_queue: 'durable.review_queue',
  schedule_list: 'durable.schedule_list',
  waiting_tasks: 'durable.waiting_tasks',
  stuck_tasks: 'durable.stuck_tasks',
  budgets: 'durable.budgets',
  rate_limits: 'durable.rate_limits',
  workers: 'durable.workers',
  dead_letters: 'durable.dead_letters',
};

// Relations are looked up in the catalog (to_regclass would raise without
// USAGE on schema durable, which a worker role lacks); reading one needs the
// schema's USAGE and SELECT on it (or, for a view granted by column, on the
// column named).
const CAPS_SQL = `
WITH r AS (
  SELECT key, kind, target,
         CASE WHEN kind OPERATOR(pg_catalog.=) 'function'
              THEN pg_catalog.to_regprocedure(target)::pg_catalog.oid
              ELSE (SELECT c.oid FROM pg_catalog.pg_class c
                    JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
                    WHERE n.nspname OPERATOR(pg_catalog.=)
                            pg_catalog.split_part(pg_catalog.split_part(target, ':', 1), '.', 1)
                      AND c.relname OPERATOR(pg_catalog.=)
                            pg_catalog.split_part(pg_catalog.split_part(target, ':', 1), '.', 2)) END AS oid,
         pg_catalog.has_schema_privilege('durable', 'USAGE') AS schema_usage
  FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[]),
                  pg_catalog.unnest($3::pg_catalog.text[])) AS u(key, kind, target)
)
SELECT key,
       oid IS NOT NULL AS present,
       CASE WHEN oid IS NULL THEN false
            WHEN kind OPERATOR(pg_catalog.=) 'function' THEN pg_catalog.has_function_privilege(oid, 'EXECUTE')
            WHEN NOT schema_usage THEN false
            WHEN kind OPERATOR(pg_catalog.=) 'column'
              THEN pg_catalog.has_column_privilege(oid, pg_catalog.split_part(target, ':', 2), 'SELECT')
            ELSE pg_catalog.has_table_privilege(oid, 'SELECT') END AS allowed
FROM r`;

export const EXT_SQL = `
SELECT n.nspname AS schema, e.extversion AS version,
       r.rolsuper AS superuser, current_user AS role
FROM pg_catalog.pg_extension e
JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
CROSS JOIN pg_catalog.pg_roles r
WHERE e.extname OPERATOR(pg_catalog.=) 'durable' AND r.rolname OPERATOR(pg_catalog.=) current_user`;

function poolKey(user, password) {
  return crypto.createHash('sha256').update(`${user}\0${password}`).digest('hex');
}

// One pool per role and password, shared by that role's sessions, kept only
// in memory; closed when its last session ends.
export class Pools {
  constructor(databaseUrl, { maxPerPool = 4 } = {}) {
    this.base = parseConnectionString(databaseUrl || 'postgresql:///postgres');
    this.maxPerPool = maxPerPool;
    this.pools = new Map();
  }

  peek(user, password) {
    return this.pools.get(poolKey(user, password));
  }

  async open(user, password) {
    const key = poolKey(user, password);
    let entry = this.pools.get(key);
    if (entry) {
      entry.refs++;
      return entry;
    }
    const config = {
      host: this.base.host || undefined,
      port: this.base.port ? Number(this.base.port) : undefined,
      database: this.base.database || undefined,
      ssl: this.base.ssl,
      user,
      password: password === '' ? undefined : password,
      max: this.maxPerPool,
      idleTimeoutMillis: 30000,
      application_name: 'durable console',
      // search_path first of all (see the top of this file)
      options: '-c search_path=pg_catalog,pg_temp -c TimeZone=UTC -c statement_timeout=10000',
    };
    const pool = new pg.Pool(config);
    pool.on('error', () => {}); // an idle client's lost connection: the next query reconnects
    let ext;
    try {
      const r = await pool.query(EXT_SQL);
      if (r.rows.length === 0) throw new Error('the extension durable is not installed in this database');
      ext = r.rows[0];
    } catch (err) {
      await pool.end().catch(() => {});
      throw err;
    }
    entry = { key, pool, refs: 1, user: ext.role, ext, sql: null, caps: null };
    entry.caps = await capabilities(pool, ext.schema);
    entry.sql = statements(pg.escapeIdentifier(ext.schema), { tables: entry.caps.tables });
    this.pools.set(key, entry);
    return entry;
  }

  async release(entry) {
    if (!entry || --entry.refs > 0) return;
    this.pools.delete(entry.key);
    if (entry.sampler) entry.sampler.stop();
    await entry.pool.end().catch(() => {});
  }

  async closeAll() {
    for (const entry of this.pools.values()) {
      if (entry.sampler) entry.sampler.stop();
      await entry.pool.end().catch(() => {});
    }
    this.pools.clear();
  }
}

export async function capabilities(pool, schema) {
  const keys = [];
  const kinds = [];
  const targets = [];
  for (const [k, sig] of Object.entries(FUNCTIONS)) {
    keys.push(`fn:${k}`);
    kinds.push('function');
    targets.push(`${pg.escapeIdentifier(schema)}.${sig}`);
  }
  for (const [k, rel] of Object.entries(RELATIONS)) {
    keys.push(`rel:${k}`);
    kinds.push('relation');
    targets.push(rel);
  }
  for (const col of ['failures', 'failing_parts']) {
    keys.push(`col:status_${col}`);
    kinds.push('column');
    targets.push(`durable.status:${col}`);
  }
  const r = await pool.query(CAPS_SQL, [keys, kinds, targets]);
  const allowed = {};
  const present = {};
  for (const row of r.rows) {
    allowed[row.key] = row.allowed === true;
    present[row.key] = row.present === true;
  }
  const can = (k) => allowed[k] === true;
  return {
    raw: allowed,
    present,
    // the overview's counts: durable.queue_gauges (live tasks only) where
    // this durable has it, else durable.queue_stats (which counts history)
    gauges: can('rel:queue_gauges'),
    queueStats: can('rel:queue_stats'),
    overview: can('rel:queue_gauges') || can('rel:queue_stats'),
    // expired leases and stuck tasks, from the live tasks, for a role that
    // may read them (queue_gauges has neither)
    liveAlarms: can('rel:unfinished_tasks') && can('rel:queue_settings'),
    // a fair queue's keys (durable 0.9.0 on)
    fairnessKeys: can('rel:fairness_keys'),
    counters: can('rel:queue_counters'),
    countersPresent: present['rel:queue_counters'],
    // durable.metrics is counted from 0.9.0 on, which brought history_metrics
    metrics: can('rel:metrics') && present['rel:history_metrics'],
    history_metrics: can('rel:history_metrics'),
    waitStats: can('rel:wait_stats'),
    // the reconciler's samples of the last 48 hours (durable 0.9.0 on)
    samples: can('rel:queue_samples'),
    scheduleStats: can('rel:schedule_stats'),
    status: can('col:status_failing_parts'),
    statusFailures: can('col:status_failures'),
    tasks: can('rel:unfinished_tasks') && can('rel:finished_tasks') && can('rel:queue_settings'),
    // the tables themselves (an operator of every queue): read those, with
    // the plans their indexes give, not the views that filter a queue
    // operator's rows behind a security barrier
    tables: can('rel:live_tasks') && can('rel:task_history'),
    events: can('rel:events'),
    steps: can('rel:steps'),
    review: can('rel:review_queue'),
    schedules: can('rel:schedule_list'),
    waits: can('rel:waiting_tasks'),
    stuck: can('rel:stuck_tasks'),
    budgets: can('rel:budgets'),
    rateLimits: can('rel:rate_limits'),
    workers: can('rel:workers'),
    deadLetters: can('rel:dead_letters') && can('rel:queue_settings'),
    package: can('fn:package'),
    resolve: can('fn:resolve'),
    pause: can('fn:pause') && can('fn:resume'),
    quarantine: can('fn:quarantine'),
    replay: can('fn:replay'),
    replayChosen: can('fn:replayChosen'),
    migrate: can('fn:migrate'),
    migrateQueue: can('fn:migrateQueue'),
    cancel: can('fn:cancel'),
    expire: can('fn:expire'),
    emit: can('fn:emit'),
    scheduleOps: can('fn:pauseSchedule') && can('fn:resumeSchedule') && can('fn:triggerSchedule'),
    prometheus: can('fn:prometheus'),
    prometheusPresent: present['fn:prometheus'],
  };
}

// The statements, with the API's schema in place of @api.  Each reads by an
// index: live tasks by (partition_key, task_id) or the claim index; history
// by its primary key (partition_key, task_id, finished_at) per partition of
// the queue, or the failed-task index (partition_key, queue_name,
// finished_at); never a count over history, never an OFFSET.
// the partition of task $1: its id's low 15 bits
const PARTITION_OF_1 = '($1::pg_catalog.int8 OPERATOR(pg_catalog.&) 32767)::pg_catalog.int4';

export function statements(api, { tables = false } = {}) {
  // the unfinished tasks, the finished ones, and every task retained with
  // the columns the search reads: the tables where the role reads them
  const LIVE = tables ? 'durable.live_tasks' : 'durable.unfinished_tasks';
  const HISTORY = tables ? 'durable.task_history' : 'durable.finished_tasks';
  const SEARCHED = 'task_id, partition_key, queue_name, state, attempt, idempotency_key, owner, payload, metadata, last_error, created_at';
  // a finished task as a queue's page lists it
  const HISTORY_COLUMNS = `t.task_id, t.partition_key, t.state, t.class, t.attempt, t.max_attempts,
                           t.priority, t.run_at, t.created_at, t.finished_at, t.owner, t.stop_code,
                           t.parent_id, t.versions`;
  // a dead letter as a queue's page lists it
  const DEAD_LETTER_COLUMNS = `t.task_id, t.partition_key, t.stop_code,
                               CASE WHEN t.stop_code OPERATOR(pg_catalog.=) 'quarantined'
                                    THEN t.last_error OPERATOR(pg_catalog.->>) 'reason'
                                    ELSE t.stop_code END AS reason,
                               t.finished_at AS failed_at, t.finished_at::pg_catalog.text AS failed_at_text,
                               t.attempt, pg_catalog.jsonb_pretty(t.last_error) AS last_error, t.versions`;
  const TASKS = tables ? `(SELECT ${SEARCHED} FROM durable.live_tasks UNION ALL SELECT ${SEARCHED} FROM durable.task_history)` : 'durable.tasks';
  // the search, with a condition first where one narrows it; the state
  // is a parameter of the enum's type, a constant the planner proves the
  // index of failed tasks from, in a search of dead letters
  const search = (first = '') => `SELECT t.task_id, t.queue_name, t.state, t.attempt, t.idempotency_key, t.owner,
                    pg_catalog.left(t.payload::pg_catalog.text, 120) AS payload,
                    pg_catalog.left(t.last_error::pg_catalog.text, 120) AS last_error,
                    t.created_at, t.created_at::pg_catalog.text AS created_at_text
             FROM ${TASKS} t
             WHERE ${first}($1::pg_catalog.text IS NULL OR t.queue_name OPERATOR(pg_catalog.=) $1)
               AND ($2::durable.task_state IS NULL OR t.state OPERATOR(pg_catalog.=) $2::durable.task_state)
               AND ($3::pg_catalog.text IS NULL OR t.idempotency_key OPERATOR(pg_catalog.=) $3)
               AND ($4::pg_catalog.text IS NULL OR t.owner OPERATOR(pg_catalog.=) $4)
               AND ($5::pg_catalog.jsonb IS NULL OR t.payload OPERATOR(pg_catalog.@>) $5)
               AND ($6::pg_catalog.jsonb IS NULL OR t.metadata OPERATOR(pg_catalog.@>) $6)
               AND ($7::pg_catalog.text IS NULL
                    OR pg_catalog.strpos(t.last_error::pg_catalog.text, $7) OPERATOR(pg_catalog.>) 0)
               AND ($8::pg_catalog.timestamptz IS NULL OR t.created_at OPERATOR(pg_catalog.>=) $8)
               AND ($9::pg_catalog.timestamptz IS NULL OR t.created_at OPERATOR(pg_catalog.<) $9)
               AND ($10::pg_catalog.timestamptz IS NULL
                    OR (t.created_at, t.task_id) OPERATOR(pg_catalog.<) ($10, $11::pg_catalog.int8))
             ORDER BY t.created_at DESC, t.task_id DESC LIMIT $12`;
  const s = {
    // per queue, from the unfinished tasks only: cheap whatever history is kept
    gauges: `SELECT queue_name, paused, paused_partitions, ready, running, waiting, needs_review, scheduled,
                    oldest_ready_age_seconds AS oldest_due_s, oldest_heartbeat_age_seconds AS oldest_heartbeat_s
             FROM durable.queue_gauges ORDER BY queue_name`,
    liveAlarms: `SELECT t.queue_name,
                        pg_catalog.count(*) FILTER (WHERE t.lease_until OPERATOR(pg_catalog.<) pg_catalog.now())
                          AS expired_leases,
                        pg_catalog.count(*) FILTER (WHERE q.progress_timeout IS NOT NULL
                                           AND t.progress_at OPERATOR(pg_catalog.<)
                                                 (pg_catalog.now() OPERATOR(pg_catalog.-) q.progress_timeout))
                          AS stuck
                 FROM ${LIVE} t
                 JOIN durable.queue_settings q ON q.queue_name OPERATOR(pg_catalog.=) t.queue_name
                 WHERE t.state OPERATOR(pg_catalog.=) 'running'
                 GROUP BY t.queue_name`,
    // counts history: only for a durable without queue_gauges
    queueStats: `SELECT queue_name, paused, ready, waiting, running, needs_review, completed, failed,
                        cancelled, EXTRACT(epoch FROM oldest_due_age)::pg_catalog.float8 AS oldest_due_s,
                        EXTRACT(epoch FROM oldest_heartbeat_age)::pg_catalog.float8 AS oldest_heartbeat_s,
                        expired_leases, stuck, paused_partitions
                 FROM durable.queue_stats ORDER BY queue_name`,
    counters: `SELECT * FROM durable.queue_counters ORDER BY queue_name`,
    // the reconciler's samples of the last $1 (an interval), of queue $2 or
    // of every queue, a point per bucket of $3 (on the epoch's minutes): the
    // largest counts, and the counters as the bucket's last sample has them
    samples: `SELECT EXTRACT(epoch FROM b.bucket)::pg_catalog.float8 AS t, b.queue_name,
                     pg_catalog.max(b.ready) AS ready, pg_catalog.max(b.running) AS running,
                     pg_catalog.max(b.needs_review) AS needs_review,
                     pg_catalog.max(b.oldest_ready_age_seconds) AS oldest_ready_s,
                     (pg_catalog.array_agg(b.completed ORDER BY b.at DESC))[1] AS completed,
                     (pg_catalog.array_agg(b.failed ORDER BY b.at DESC))[1] AS failed,
                     (pg_catalog.array_agg(b.counters_since ORDER BY b.at DESC))[1] AS counters_since
              FROM (SELECT pg_catalog.date_bin($3::pg_catalog.interval, s.at,
                                               '2000-01-01 00:00:00+00'::pg_catalog.timestamptz) AS bucket,
                           s.at, s.queue_name, s.ready, s.running, s.needs_review,
                           s.oldest_ready_age_seconds, s.completed, s.failed, s.counters_since
                    FROM durable.queue_samples s
                    WHERE s.at OPERATOR(pg_catalog.>=) (pg_catalog.now() OPERATOR(pg_catalog.-) $1::pg_catalog.interval)
                      AND ($2::pg_catalog.text IS NULL OR s.queue_name OPERATOR(pg_catalog.=) $2)) b
              GROUP BY b.bucket, b.queue_name ORDER BY b.bucket, b.queue_name`,
    metrics: `SELECT queue_name, finished, duplicate_side_effects, recoveries, recovery_success_rate,
                     mean_recovery_time, ambiguous_outcome_rate, human_escalation_rate,
                     claims_per_task, reconciliation_lag, since
              FROM durable.metrics ORDER BY queue_name`,
    historyMetrics: `SELECT queue_name, tasks, duplicate_side_effects, recoveries, recovery_success_rate,
                            mean_recovery_time, ambiguous_outcome_rate, human_escalation_rate,
                            claims_per_task, reconciliation_lag
                     FROM durable.history_metrics ORDER BY queue_name`,
    waitStats: `SELECT queue_name, kind, waiting, oldest_wait, with_timeout
                FROM durable.wait_stats ORDER BY queue_name, kind`,
    scheduleStats: `SELECT queue_name, schedules, due, oldest_due_age
                    FROM durable.schedule_stats ORDER BY queue_name`,
    statusPublic: `SELECT preloaded, reconciler, reconciler_pid, reconciler_database, node_id,
                          failing_parts, failing_since FROM durable.status`,
    statusFull: `SELECT preloaded, reconciler, reconciler_pid, reconciler_database, node_id,
                        failing_parts, failing_since, failures FROM durable.status`,
    queue: `SELECT q.queue_name, q.partitions, q.paused, q.paused_partitions, q.lease, q.max_attempts,
                   q.version_timeout, q.concurrency_limit, q.restricted, q.partition_keys
            FROM durable.queue_settings q WHERE q.queue_name OPERATOR(pg_catalog.=) $1`,
    // a fair queue's keys with the most due work first: each key's backlog
    // and how long its oldest due task has waited
    fairnessKeys: `SELECT fairness_key, weight, ready, running, unadmitted,
                          oldest_ready_age_seconds AS oldest_due_s
                   FROM durable.fairness_keys WHERE queue_name OPERATOR(pg_catalog.=) $1
                   ORDER BY ready DESC, oldest_ready_age_seconds DESC, fairness_key LIMIT 20`,
    // live tasks of a queue in one state, newest id first, after a cursor
    liveTasks: `SELECT t.task_id, t.partition_key, t.state, t.class, t.attempt, t.max_attempts, t.priority,
                       t.run_at, t.created_at, t.lease_until, t.owner, t.stop_code, t.parent_id, t.versions
                FROM ${LIVE} t
                WHERE t.queue_name OPERATOR(pg_catalog.=) $1
                  AND t.state::pg_catalog.text OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])
                  AND t.partition_key OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.int4[])
                  AND ($4::pg_catalog.int4 IS NULL OR t.partition_key OPERATOR(pg_catalog.=) $4)
                  AND ($5::pg_catalog.int8 IS NULL OR t.task_id OPERATOR(pg_catalog.<) $5)
                ORDER BY t.task_id DESC LIMIT $6`,
    // finished tasks: per partition of the queue, the primary key backwards.
    // A state may be rare (or absent) in a queue's history, and nothing but
    // the failed-task index finds one state fast: so a page reads at most a
    // window of the newest finished tasks of each partition (before the
    // cursor).  historyFloor gives, per partition, the id WINDOW rows back
    // (an index-only scan; NULL when fewer are left); historyTasks lists
    // the tasks of the state at or above the highest of these floors, where
    // every partition's window is whole, so that paging on from it skips
    // nothing.
    //
    // A queue operator reads durable.finished_tasks, a security barrier,
    // through which PostgreSQL cannot read an index in order: the ids come
    // from durable.finished_task_ids (and dead letters' from
    // durable.dead_letter_ids: the queue's, in its scope only), the rows
    // by id.
    historyFloor: tables
      ? `SELECT pg_catalog.max(f.floor) AS floor
         FROM pg_catalog.unnest($1::pg_catalog.int4[]) AS k(partition_key),
         LATERAL (SELECT t.task_id AS floor FROM durable.task_history t
                  WHERE t.partition_key OPERATOR(pg_catalog.=) k.partition_key
                    AND ($2::pg_catalog.int8 IS NULL OR t.task_id OPERATOR(pg_catalog.<) $2)
                  ORDER BY t.task_id DESC
                  OFFSET ($3::pg_catalog.int4 OPERATOR(pg_catalog.-) 1) LIMIT 1) f`
      : `SELECT pg_catalog.max(f.floor) AS floor
         FROM pg_catalog.unnest($1::pg_catalog.int4[]) AS k(partition_key),
         LATERAL (SELECT pg_catalog.min(i.id) AS floor, pg_catalog.count(*) AS n
                  FROM durable.finished_task_ids($4::pg_catalog.text, ARRAY[k.partition_key], NULL,
                                                 $2::pg_catalog.int8, NULL, $3::pg_catalog.int4) AS i(id)) f
         WHERE f.n OPERATOR(pg_catalog.=) $3`,
    historyTasks: tables
      ? `SELECT h.* FROM pg_catalog.unnest($3::pg_catalog.int4[]) AS k(partition_key),
         LATERAL (SELECT ${HISTORY_COLUMNS}
                  FROM durable.task_history t
                  WHERE t.partition_key OPERATOR(pg_catalog.=) k.partition_key
                    AND t.queue_name OPERATOR(pg_catalog.=) $1
                    AND t.state::pg_catalog.text OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])
                    AND ($4::pg_catalog.int4 IS NULL OR t.partition_key OPERATOR(pg_catalog.=) $4)
                    AND ($5::pg_catalog.int8 IS NULL OR t.task_id OPERATOR(pg_catalog.<) $5)
                    AND ($7::pg_catalog.int8 IS NULL OR t.task_id OPERATOR(pg_catalog.>=) $7)
                  ORDER BY t.task_id DESC LIMIT $6) h
         ORDER BY h.task_id DESC LIMIT $6`
      : `SELECT ${HISTORY_COLUMNS}
         FROM durable.finished_tasks t
         WHERE t.partition_key OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.int4[])
           AND t.task_id OPERATOR(pg_catalog.=) ANY (ARRAY(
                 SELECT i.id FROM durable.finished_task_ids(
                   $1::pg_catalog.text,
                   CASE WHEN $4::pg_catalog.int4 IS NULL THEN $3::pg_catalog.int4[] ELSE ARRAY[$4] END,
                   $2::pg_catalog.text[]::durable.task_state[], $5::pg_catalog.int8, $7::pg_catalog.int8,
                   $6::pg_catalog.int4) AS i(id)))
         ORDER BY t.task_id DESC LIMIT $6`,
    deadLetters: tables
      ? `SELECT d.* FROM pg_catalog.unnest($2::pg_catalog.int4[]) AS k(partition_key),
         LATERAL (SELECT ${DEAD_LETTER_COLUMNS}
                  FROM durable.task_history t
                  WHERE t.partition_key OPERATOR(pg_catalog.=) k.partition_key
                    AND t.queue_name OPERATOR(pg_catalog.=) $1
                    AND t.state OPERATOR(pg_catalog.=) 'failed'
                    AND ($3::pg_catalog.timestamptz IS NULL
                         OR (t.finished_at, t.task_id) OPERATOR(pg_catalog.<) ($3, $4::pg_catalog.int8))
                  ORDER BY t.finished_at DESC, t.task_id DESC LIMIT $5) d
         ORDER BY d.failed_at DESC, d.task_id DESC LIMIT $5`
      : `SELECT ${DEAD_LETTER_COLUMNS}
         FROM durable.finished_tasks t
         WHERE t.partition_key OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.int4[])
           AND t.task_id OPERATOR(pg_catalog.=) ANY (ARRAY(
                 SELECT i.id FROM durable.dead_letter_ids($1::pg_catalog.text, $2::pg_catalog.int4[],
                   $3::pg_catalog.timestamptz, $4::pg_catalog.int8, $5::pg_catalog.int4) AS i(id)))
         ORDER BY t.finished_at DESC, t.task_id DESC LIMIT $5`,
    deadLetterReplayable: `SELECT d.task_id, d.replayable FROM durable.dead_letters d
                           WHERE d.partition_key OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int4[])
                             AND d.task_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.int8[])`,
    task: `SELECT t.task_id, t.partition_key, t.queue_name, t.state, t.class, t.priority, t.attempt,
                  t.max_attempts, t.version, t.fence, t.run_at, t.created_at, t.lease_until, t.heartbeat_at,
                  t.progress_at, t.finished_at, t.lease, t.deadline, t.owner, t.progress, t.stop_code,
                  t.idempotency_key, t.workflow_version, t.parent_id, t.concurrency_key, t.steps_in_doubt,
                  t.checkpoint_version,
                  pg_catalog.jsonb_pretty(t.payload) AS payload, pg_catalog.jsonb_pretty(t.result) AS result,
                  pg_catalog.jsonb_pretty(t.last_error) AS last_error,
                  pg_catalog.jsonb_pretty(t.checkpoint) AS checkpoint,
                  pg_catalog.jsonb_pretty(t.metadata) AS metadata,
                  pg_catalog.jsonb_pretty(t.versions) AS versions_text,
                  t.versions, t.waits
           FROM durable.tasks t
           WHERE t.partition_key OPERATOR(pg_catalog.=) ${PARTITION_OF_1}
             AND t.task_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8`,
    events: `SELECT e.seq, e.at, e.kind, e.state, e.fence, e.actor, e.role, e.step,
                    pg_catalog.jsonb_pretty(e.detail) AS detail
             FROM durable.events e
             WHERE e.partition_key OPERATOR(pg_catalog.=) ${PARTITION_OF_1}
               AND e.task_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8
             ORDER BY e.seq LIMIT 1000`,
    steps: `SELECT s.step, s.state, s.class, s.version, s.attempt, s.ordinal, s.updated_at,
                   s.idempotency_key, s.compensates, s.receipt, s.effect_id, s.error_class,
                   pg_catalog.jsonb_pretty(s.request) AS request, pg_catalog.jsonb_pretty(s.result) AS result,
                   pg_catalog.jsonb_pretty(s.evidence) AS evidence, pg_catalog.jsonb_pretty(s.error) AS error
            FROM durable.steps s
            WHERE s.partition_key OPERATOR(pg_catalog.=) ${PARTITION_OF_1}
              AND s.task_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8
            ORDER BY s.ordinal`,
    // the children a task spawned, from its own events (indexed by task);
    // each child is then read by its id
    spawned: `SELECT e.detail OPERATOR(pg_catalog.->>) 'child' AS name,
                     e.detail OPERATOR(pg_catalog.->>) 'task_id' AS task_id
              FROM durable.events e
              WHERE e.partition_key OPERATOR(pg_catalog.=) ${PARTITION_OF_1}
                AND e.task_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8
                AND e.kind OPERATOR(pg_catalog.=) 'spawned'
              ORDER BY e.seq LIMIT 200`,
    taskBrief: `SELECT t.task_id, t.queue_name, t.state, t.parent_id
                FROM durable.tasks t
                WHERE t.partition_key OPERATOR(pg_catalog.=) ${PARTITION_OF_1}
                  AND t.task_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8`,
    review: `SELECT r.task_id, r.queue_name, r.class, r.attempt, r.last_owner, r.step, r.step_class,
                    r.step_state, r.idempotency_key, r.receipt, r.since, r.reason, r.decided
             FROM durable.review_queue r
             WHERE ($1::pg_catalog.int8 IS NULL OR r.task_id OPERATOR(pg_catalog.>) $1)
               AND ($2::pg_catalog.text IS NULL OR r.queue_name OPERATOR(pg_catalog.=) $2)
             ORDER BY r.task_id, r.step LIMIT $3`,
    versionUnavailable: `SELECT t.task_id, t.queue_name, t.partition_key, t.versions, t.run_at
                         FROM ${LIVE} t
                         WHERE t.state OPERATOR(pg_catalog.=) 'needs_review'
                           AND t.stop_code OPERATOR(pg_catalog.=) 'version_unavailable'
                         ORDER BY t.task_id LIMIT 200`,
    schedules: `SELECT schedule_name, cron, timezone, queue_name, pg_catalog.jsonb_pretty(payload) AS payload, backfill,
                       next_run, last_run, last_task_id, created_at, last_error, last_error_at,
                       pg_catalog.to_jsonb(l) OPERATOR(pg_catalog.->>) 'paused_at' AS paused_at
                FROM durable.schedule_list l ORDER BY next_run, schedule_name LIMIT 500`,
    pauseSchedule: `SELECT ${api}.durable_pause_schedule($1::pg_catalog.text)`,
    resumeSchedule: `SELECT ${api}.durable_resume_schedule($1::pg_catalog.text) AS next_run`,
    triggerSchedule: `SELECT ${api}.durable_trigger_schedule($1::pg_catalog.text) AS task_id`,
    // a search over every task retained, newest first, a page at a time
    // after (created_at, task_id); every filter is optional
    search: search(),
    // by an idempotency key, where the role reads the tables: the tasks
    // durable.task_keys binds it to, by their keys, not a scan of history
    ...(tables ? {
      searchByKey: search(`(t.partition_key, t.task_id) OPERATOR(pg_catalog.=) ANY (
                 SELECT (k.task_id OPERATOR(pg_catalog.&) 32767)::pg_catalog.int4, k.task_id
                 FROM durable.task_keys k WHERE k.idempotency_key OPERATOR(pg_catalog.=) $3)
               AND `),
    } : {}),
    // spend budgets, the tasks' own limits after the shared ones, each a page of 200
    budgets: `SELECT b.name, b.amount, b.period::pg_catalog.text AS period, b.period_start, b.reserved, b.spent,
                     b.remaining,
                     CASE WHEN b.amount OPERATOR(pg_catalog.>) 0
                          THEN pg_catalog.round(100 OPERATOR(pg_catalog.*) (b.reserved OPERATOR(pg_catalog.+) b.spent)
                                                OPERATOR(pg_catalog./) b.amount, 1) END AS used_percent
              FROM durable.budgets b
              ORDER BY b.name OPERATOR(pg_catalog.~~) 'task:%', b.name LIMIT 200`,
    rateLimits: `SELECT r.name, r.rate, r.per::pg_catalog.text AS per, r.burst, r.keys, r.room, r.deferred
                 FROM durable.rate_limits r ORDER BY r.name`,
    stuck: `SELECT s.task_id, s.queue_name, s.owner, s.progress, s.progress_at,
                   EXTRACT(epoch FROM s.without_progress_for)::pg_catalog.float8 AS without_progress_s,
                   s.progress_timeout, s.alarmed
            FROM durable.stuck_tasks s ORDER BY s.progress_at, s.task_id LIMIT 500`,
    waits: `SELECT w.task_id, w.queue_name, w.wait_name, w.kind, w.since, w.until, w.event, w.event_queue,
                   w.run_at, EXTRACT(epoch FROM (pg_catalog.now() OPERATOR(pg_catalog.-) w.since))::pg_catalog.float8
                     AS waited_s
            FROM durable.waiting_tasks w
            WHERE ($1::pg_catalog.int8 IS NULL OR w.task_id OPERATOR(pg_catalog.>) $1)
            ORDER BY w.task_id, w.wait_name LIMIT $2`,
    workers: `SELECT queue_name, worker, versions, role, first_claim_at, last_claim_at, version_timeout, alive
              FROM durable.workers ORDER BY queue_name, last_claim_at DESC LIMIT 500`,
    package: `SELECT ${api}.durable_recovery_package($1::pg_catalog.int8) AS package,
                     pg_catalog.jsonb_pretty(${api}.durable_recovery_package($1::pg_catalog.int8)) AS text`,
    resolve: `SELECT ${api}.durable_resolve($1::pg_catalog.int8, $2::pg_catalog.text, $3::pg_catalog.text,
                                            $4::pg_catalog.jsonb, $5::pg_catalog.text) AS state`,
    pause: `SELECT ${api}.durable_pause($1::pg_catalog.text, $2::pg_catalog.int4)`,
    resume: `SELECT ${api}.durable_resume($1::pg_catalog.text, $2::pg_catalog.int4)`,
    quarantine: `SELECT ${api}.durable_quarantine($1::pg_catalog.int8, $2::pg_catalog.text)`,
    expire: `SELECT ${api}.durable_expire_lease($1::pg_catalog.int8, $2::pg_catalog.text) AS action`,
    replayChosen: `SELECT task_id, action FROM ${api}.durable_replay_dead_letters($1::pg_catalog.int8[])`,
    emit: `SELECT ${api}.durable_emit($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.jsonb) AS first`,
    migrateQueue: `SELECT task_id, state, from_versions, to_versions, action
                   FROM ${api}.durable_migrate($1::pg_catalog.text, $2::pg_catalog.jsonb, $3::pg_catalog.jsonb,
                                               $4::pg_catalog.text, $5::pg_catalog.jsonb, $6::pg_catalog.bool,
                                               $7::pg_catalog.int4)`,
    cancel: `SELECT ${api}.durable_cancel($1::pg_catalog.int8, $2::pg_catalog.text)`,
    replay: `SELECT task_id, action FROM ${api}.durable_replay_dead_letters($1::pg_catalog.text, $2::pg_catalog.int4,
                                                                           $3::pg_catalog.int4, $4::pg_catalog.text)`,
    migrate: `SELECT task_id, state, from_versions, to_versions, action
              FROM ${api}.durable_migrate($1::pg_catalog.int8, $2::pg_catalog.jsonb, $3::pg_catalog.jsonb,
                                          $4::pg_catalog.text, $5::pg_catalog.jsonb, $6::pg_catalog.bool)`,
    prometheus: `SELECT ${api}.durable_metrics_prometheus() AS text`,
  };
  return s;
}
