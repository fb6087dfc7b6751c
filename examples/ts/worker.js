// @ts-check
/**
 * A durable worker in JavaScript (Node.js 18+, node-postgres): copy it to
 * start your own.  Plain modern JavaScript with JSDoc types: no build step,
 * and `// @ts-check` lets TypeScript's checker and editors check it as is.
 *
 * It claims tasks in batches, keeps every held lease alive from a heartbeat
 * timer, runs each task's steps through durable's state machine, looks up
 * queryable steps whose outcome a crash left unknown, reconnects after a
 * lost connection, and on SIGTERM gives back at once the tasks it has not
 * finished.  The external service is the stand-in of examples/service.sql,
 * which counts effects.  A task's payload names its steps, e.g.
 * {"steps": [["reserve", "idempotent"], ["charge", "queryable"], ["email", "unsafe"]]}
 * and its waits among them: ["paid", "await", "payment:7", "3 days"],
 * ["labels", "spawn", "labels", "2"], ["labels", "join"],
 * ["reminder", "sleep", "1 day"].  A wait that has not ended ends the
 * lease: the worker drops the task, and the claim that wakes it runs the
 * workflow from the top, where every step and wait done before returns as
 * it was.
 *
 *   node examples/ts/worker.js --db postgres:///app --service postgres:///service \
 *       --queue orders --name js-1
 */
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

// durable's own SQLSTATEs, in err.code (the class, 55, says "not in prerequisite state")
const STALE_FENCE = '55U01'; // another worker holds the task now: drop it
const VERSION_CONFLICT = '55U02'; // the step changed under us: read it again
const INVALID_TRANSITION = '55U04'; // not allowed now, e.g. a step is in doubt

/** We no longer hold the task: stop working on it, someone else has it. */
class TaskLost extends Error {}
/** Only the recovery table (or a person) may decide now: leave the task. */
class LeaveToRecovery extends Error {}
/** SIGTERM came: stop at this step boundary. */
class Stopping extends Error {}

/** @param {any} e  a lost connection: a socket error, or SQLSTATE class 08 / 57P0x */
const connectionLost = (e) => e instanceof pg.DatabaseError
  ? /^(08|57P0[123])/.test(e.code ?? '')
  : typeof e?.syscall === 'string' || /connection/i.test(e?.message ?? '');

/** Test-only fault injection: DURABLE_CRASH_AT=after_call:queryable.
 * @param {string} point @param {string} [cls] */
function fault(point, cls) {
  const spec = process.env.DURABLE_CRASH_AT;
  if (spec === point || spec === `${point}:${cls}`) process.kill(process.pid, 'SIGKILL');
}

/** @param {string} connectionString */
async function connect(connectionString, name = 'durable worker') {
  const client = new pg.Client({ connectionString, application_name: name });
  client.on('error', () => {}); // a dropped connection surfaces in the next query
  await client.connect();
  return client;
}

const { values: opt } = parseArgs({
  options: {
    db: { type: 'string' }, service: { type: 'string' }, queue: { type: 'string' },
    name: { type: 'string' }, lease: { type: 'string', default: '30' },
    batch: { type: 'string', default: '10' }, 'idle-exit': { type: 'string', default: '-1' },
  },
});
if (!opt.db || !opt.service || !opt.queue || !opt.name) {
  console.error('usage: worker.js --db URL --service URL --queue NAME --name WORKER ' +
    '[--lease SECONDS] [--batch N] [--idle-exit SECONDS]');
  process.exit(1);
}
const lease = `${Number(opt.lease)} seconds`;
const callMs = Number(process.env.DURABLE_CALL_MS ?? 0); // a slow service, for tests
const log = (/** @type {string} */ msg) => console.error(`${new Date().toISOString()} [${opt.name}] ${msg}`);
const stats = { completed: 0, steps_run: 0, steps_skipped: 0, looked_up: 0, released: 0, lost: 0, left_waiting: 0 };

// Task ids and fences are 64-bit: node-postgres hands int8 out as strings,
// and they stay strings here (a JavaScript number cannot hold them).
/** @type {Map<string, string>} task id -> fence of every task held */
const held = new Map();
/** @type {Set<string>} held tasks the heartbeat found gone */
const lost = new Set();
let stopping = false;
process.on('SIGTERM', () => { stopping = true; });
process.on('SIGINT', () => { stopping = true; });

// The heartbeat: every lease/3, one statement renews every held lease, on
// its own connection; a task that comes back without a lease is lost.
/** @type {pg.Client | null} */
let beatClient = null;
let beating = false;
const heartbeat = setInterval(async () => {
  if (beating || held.size === 0) return;
  beating = true;
  const ids = [...held.keys()];
  try {
    beatClient ??= await connect(/** @type {string} */ (opt.db), `${opt.name} heartbeat`);
    const { rows } = await beatClient.query(
      'SELECT task_id, lease_until FROM durable_heartbeat_batch($1::bigint[], $2::bigint[])',
      [ids, ids.map((id) => held.get(id))]);
    for (const r of rows) if (r.lease_until === null && held.has(r.task_id)) lost.add(r.task_id);
  } catch (e) {
    log(`heartbeat: ${e}; reconnecting`);
    beatClient?.end().catch(() => {});
    beatClient = null;
  } finally {
    beating = false;
  }
}, (Number(opt.lease) * 1000) / 3);

/** The stand-in external service (examples/service.sql). */
class Service {
  /** @param {pg.Client} client */
  constructor(client) { this.client = client; }

  /** Perform the effect; the service deduplicates idempotent calls by key. */
  async call(/** @type {string} */ cls, /** @type {string} */ key) {
    await sleep(callMs);
    const { rows } = await this.client.query(
      `INSERT INTO effects (key, kind) VALUES ($1, $2)
       ON CONFLICT (key) WHERE kind = 'idempotent' DO UPDATE SET key = excluded.key
       RETURNING id`, [key, cls]);
    return { effect: `e-${rows[0].id}` };
  }

  /** Did an operation with this key happen? Its effect id, or null. */
  async lookup(/** @type {string} */ key) {
    const { rows } = await this.client.query(
      'SELECT id FROM effects WHERE key = $1 ORDER BY id LIMIT 1', [key]);
    return rows.length ? `e-${rows[0].id}` : null;
  }
}

/** One task we hold under its fence. */
class Task {
  /** @param {pg.Client} db @param {Service} service @param {string} id @param {string} fence */
  constructor(db, service, id, fence) {
    this.db = db; this.service = service; this.id = id; this.fence = fence;
  }

  /** One durable call for this task; 55U01 means it is no longer ours. */
  async call(/** @type {string} */ sql, /** @type {any[]} */ params) {
    if (lost.has(this.id)) throw new TaskLost('the heartbeat found it gone');
    try {
      return (await this.db.query(sql, [this.id, this.fence, ...params])).rows[0];
    } catch (e) {
      if (e instanceof pg.DatabaseError && e.code === STALE_FENCE) throw new TaskLost(e.message);
      if (e instanceof pg.DatabaseError && e.code === INVALID_TRANSITION) throw new LeaveToRecovery(e.message);
      throw e;
    }
  }

  /**
   * A wait of the workflow: true when it has ended, false when the task now
   * waits (durable ended the lease; drop the task).
   * @param {string} name @param {string} kind @param {string[]} args
   */
  async wait(name, kind, args) {
    fault('before_wait', kind);
    let row;
    if (kind === 'spawn') {
      const n = args[1] ? Number(args[1]) : 1;
      for (let i = 1; i <= n; i++) {
        const child = `${name}-${i}`;
        await this.call('SELECT durable_spawn($1, $2, $3, $4, $5)',
          [child, args[0], JSON.stringify({ steps: [[child, 'idempotent']] })]);
      }
      return true;
    }
    if (kind === 'sleep') {
      row = await this.call('SELECT durable_sleep($1, $2, $3, duration => $4::interval) AS status', [name, args[0]]);
    } else if (kind === 'await') {
      row = await this.call('SELECT status FROM durable_await($1, $2, $3, $4, $5::interval)', [name, args[0], args[1] ?? null]);
    } else {
      row = await this.call('SELECT status FROM durable_join($1, $2, $3)', [name]);
    }
    log(`${kind} ${name} of task ${this.id}: ${row.status}`);
    if (row.status === 'sleeping' || row.status === 'waiting') {
      fault('after_wait', kind);
      return false;
    }
    return true;
  }

  /**
   * Run a step once, whoever dies when: returns its result.
   * @param {string} name @param {string} cls @param {object} request
   * @param {(key: string) => Promise<any>} action  the external call, given the step's key
   */
  async step(name, cls, request, action) {
    if (stopping) throw new Stopping();
    for (let tries = 0; tries < 3; tries++) {
      try {
        return await this.tryStep(name, cls, request, action);
      } catch (e) {
        if (!(e instanceof pg.DatabaseError && e.code === VERSION_CONFLICT)) throw e;
        log(`step ${name} of task ${this.id} changed under us; reading it again`);
      }
    }
    throw new LeaveToRecovery(`step ${name} keeps changing`);
  }

  /**
   * @param {string} name @param {string} cls @param {object} request
   * @param {(key: string) => Promise<any>} action @returns {Promise<any>}
   */
  async tryStep(name, cls, request, action) {
    let { state, version, idempotency_key: key, result } = await this.call(
      'SELECT state, version, idempotency_key, result FROM durable_step($1, $2, $3, $4, $5)',
      [name, cls, JSON.stringify(request)]);
    if (state === 'committed' || state === 'compensated') {
      stats.steps_skipped++;
      return result; // done before, by us or by a worker that died: skip it
    }
    let found = null;
    if (state === 'planned') {
      // commit "started" before the call: a crash after it leaves a step
      // that recovery knows may have taken effect
      ({ v: version } = await this.call('SELECT durable_step_start($1, $2, $3, $4) AS v', [name, version]));
    } else if (cls === 'queryable') {
      // started or unknown: a call under this key may have happened.  A fresh
      // claim never sees this (recovery settles such steps before a task is
      // handed out again); a worker sees it when it comes back to a task it
      // still holds, e.g. after its step commit failed.  Never resend blindly:
      found = await this.service.lookup(key); // ask the service
      if (found === null) { // it did not happen: planned again, run it
        await this.call(`SELECT durable_record_receipt($1, $2, $3, 'not_executed', NULL, '{"lookup": null}')`, [name]);
        return this.tryStep(name, cls, request, action);
      }
    } else if (cls === 'unsafe') { // nobody can know: the lease runs out, a person decides
      throw new LeaveToRecovery(`step ${name} is ${state} and unsafe to resend`);
    } // (pure and idempotent: resending under the same key is safe)
    if (found) {
      result = { effect: found };
    } else {
      fault('before_call', cls);
      result = await action(key); // the external call, with the step's idempotency key
      fault('after_call', cls);
    }
    if (cls !== 'pure') {
      // the receipt is evidence: had we died before the commit, recovery
      // would complete the step instead of resending or asking a person
      ({ state } = await this.call(
        `SELECT durable_record_receipt($1, $2, $3, 'succeeded', $4, $5) AS state`,
        [name, result.effect, JSON.stringify(result)]));
      version += 1; // a receipt is a change of the step
      fault('after_receipt', cls);
    }
    if (state !== 'committed') { // a receipt for an unknown step commits it
      await this.call('SELECT durable_commit($1, $2, $3, step => $4, expected_version => $5)',
        [JSON.stringify(result), name, version]);
    }
    stats.steps_run++;
    await this.call('SELECT durable_heartbeat($1, $2, $3)', [`${name} done`]);
    return result;
  }
}

/** The kinds of wait a payload's steps may name. */
const WAITS = ['sleep', 'await', 'spawn', 'join'];

/** What a step does, given its idempotency key; a pure one calls nobody. */
const action = (/** @type {Service} */ service, /** @type {string} */ name, /** @type {string} */ cls) =>
  cls === 'pure' ? async () => ({ computed: name }) : (/** @type {string} */ key) => service.call(cls, key);

/** @param {pg.Client} db @param {Service} service @param {{task_id: string, fence: string, payload: any}} t */
async function runTask(db, service, { task_id, fence, payload }) {
  const task = new Task(db, service, task_id, fence);
  try {
    // the application's code: one task.step() per side effect
    /** @type {Record<string, any>} */
    const results = {};
    for (const [name, cls, ...args] of payload.steps) {
      if (WAITS.includes(cls)) {
        if (!(await task.wait(name, cls, args))) {
          stats.left_waiting++;
          held.delete(task_id); // the lease is over
          lost.delete(task_id);
          return;
        }
        continue;
      }
      results[name] = await task.step(name, cls, { step: name }, action(service, name, cls));
    }
    await db.query('BEGIN');
    try {
      // ... the application's own writes for this task go here ...
      await task.call('SELECT durable_commit($1, $2, $3)', [JSON.stringify({ by: opt.name, steps: results })]);
      await db.query('COMMIT');
    } catch (e) {
      await db.query('ROLLBACK').catch(() => {});
      throw e;
    }
    stats.completed++;
    fault('after_commit');
  } catch (e) {
    if (e instanceof Stopping) return; // still held: given back at the step boundary
    if (e instanceof TaskLost) { stats.lost++; log(`task ${task_id} lost: ${e.message}`); }
    else if (e instanceof LeaveToRecovery) log(`task ${task_id} left to recovery: ${e.message}`);
    else if (connectionLost(e)) throw e; // reconnect
    else log(`task ${task_id} abandoned (${/** @type {any} */ (e).code}): ${e}`); // its lease runs out
  }
  held.delete(task_id);
  lost.delete(task_id);
}

/** Release every task still held: ready again now, its attempt unused. */
async function giveBack(/** @type {pg.Client} */ db, /** @type {string} */ reason) {
  for (const [id, fence] of [...held]) {
    try {
      await db.query('SELECT durable_release($1, $2, $3)', [id, fence, reason]);
      stats.released++;
      log(`gave task ${id} back (${reason})`);
    } catch (e) {
      if (!(e instanceof pg.DatabaseError && (e.code === STALE_FENCE || e.code === INVALID_TRANSITION))) throw e;
      // not ours any more, or a step in doubt: the recovery table judges it
      log(`task ${id} stays with recovery: ${e.message}`);
    }
    held.delete(id);
    lost.delete(id);
  }
}

/** As a reconcile handler: look up queryable steps left unknown by a crash. */
async function reconcile(/** @type {pg.Client} */ db, /** @type {Service} */ service) {
  const { rows } = await db.query(
    'SELECT task_id, fence, step, idempotency_key FROM durable_claim_reconcile($1, $2, $3)',
    [opt.queue, opt.name, lease]);
  for (const { task_id, fence, step, idempotency_key } of rows) {
    const effect = await service.lookup(idempotency_key);
    try {
      await db.query('SELECT durable_record_receipt($1, $2, $3, $4, $5, $6)',
        [task_id, fence, step, effect ? 'succeeded' : 'not_executed', effect, JSON.stringify({ lookup: effect })]);
      stats.looked_up++;
    } catch (e) {
      if (!(e instanceof pg.DatabaseError && e.code === STALE_FENCE)) throw e;
    }
  }
  return rows.length > 0;
}

/** @param {pg.Client} db @param {Service} service */
async function loop(db, service) {
  let idleSince = Date.now();
  while (!stopping) {
    // one short transaction: lease up to --batch tasks
    const { rows: tasks } = await db.query(
      'SELECT task_id, fence, payload FROM durable_claim($1, $2, $3, $4)',
      [opt.queue, opt.name, lease, Number(opt.batch)]);
    if (tasks.length === 0 && !(await reconcile(db, service))) {
      const idleExit = Number(opt['idle-exit']);
      if (idleExit >= 0 && Date.now() - idleSince > idleExit * 1000) return;
      await sleep(200); // or LISTEN durable_ready
      continue;
    }
    idleSince = Date.now();
    for (const t of tasks) held.set(t.task_id, t.fence);
    for (const t of tasks) {
      if (stopping) break; // the rest are given back at once, unstarted
      await runTask(db, service, t);
    }
  }
}

let backoff = 1;
for (;;) {
  /** @type {pg.Client | null} */
  let db = null;
  /** @type {pg.Client | null} */
  let svc = null;
  try {
    db = await connect(opt.db, opt.name);
    await giveBack(db, 'reconnected'); // what a lost connection left held
    svc = await connect(opt.service, opt.name);
    backoff = 1;
    await loop(db, new Service(svc));
    await giveBack(db, 'shutdown');
    break;
  } catch (e) {
    if (!connectionLost(e)) throw e;
    if (stopping) break; // leases run out; recovery takes over
    log(`connection lost (${e}); reconnecting in ${backoff} s`);
    await sleep(backoff * 1000);
    backoff = Math.min(backoff * 2, 30);
  } finally {
    await db?.end().catch(() => {});
    await svc?.end().catch(() => {});
  }
}
clearInterval(heartbeat);
await /** @type {pg.Client | null} */ (beatClient)?.end().catch(() => {});
log(`stopped: ${Object.entries(stats).map(([k, v]) => `${k} ${v}`).join(', ')}`);
