// @ts-check
/**
 * A durable worker on pgdurable (clients/ts): the library does the claims,
 * heartbeats, step protocol, waits, reconnects and SIGTERM; this file is the
 * application.  A task's payload names its steps, e.g.
 * {"steps": [["reserve", "idempotent"], ["charge", "queryable"], ["email", "unsafe"]]},
 * and its waits: ["paid", "await", "payment:7", "3 days"], ["labels", "spawn",
 * "labels", "2"], ["labels", "join"], ["reminder", "sleep", "1 day"].  The
 * external service is the stand-in of examples/service.sql, which counts effects.
 *
 *   node examples/ts/worker.js --db postgres:///app --service postgres:///service \
 *       --queue orders --name js-1 [--lease SECONDS] [--batch N] [--concurrency N] \
 *       [--idle-exit SECONDS] [--pooled]
 *
 * --pooled (or DURABLE_POOLED=1): behind a transaction-mode pooler; without
 * it the worker finds out for itself at start.  Tests only:
 * DURABLE_CRASH_AT=POINT[:CLASS] makes it SIGKILL itself there,
 * DURABLE_CALL_MS makes each service call take that long.
 */
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { Worker } from 'pgdurable';

const { values: opt } = parseArgs({
  options: {
    db: { type: 'string' }, service: { type: 'string' }, queue: { type: 'string' }, name: { type: 'string' },
    lease: { type: 'string' }, batch: { type: 'string', default: '10' }, concurrency: { type: 'string', default: '1' },
    'idle-exit': { type: 'string', default: '-1' }, pooled: { type: 'boolean', default: false },
  },
});
if (!opt.db || !opt.service || !opt.queue || !opt.name) {
  console.error('usage: worker.js --db URL --service URL --queue NAME --name WORKER ' +
    '[--lease SECONDS] [--batch N] [--concurrency N] [--idle-exit SECONDS] [--pooled]');
  process.exit(1);
}
const callMs = Number(process.env.DURABLE_CALL_MS ?? 0);

/**
 * The stand-in service, a connection for each handler running at once
 * (--concurrency); a connection the server closed is replaced.
 */
const service = new pg.Pool({ connectionString: opt.service, application_name: opt.name,
  max: Number(opt.concurrency) });
service.on('error', () => {}); // an idle connection lost: the next query opens another
async function serviceQuery(/** @type {string} */ sql, /** @type {any[]} */ params) {
  return (await service.query(sql, params)).rows;
}
/** Perform an effect under its key (the service deduplicates idempotent ones). */
async function perform(/** @type {string} */ cls, /** @type {string} */ key) {
  await sleep(callMs);
  const [row] = await serviceQuery(`INSERT INTO effects (key, kind) VALUES ($1, $2)
    ON CONFLICT (key) WHERE kind = 'idempotent' DO UPDATE SET key = excluded.key RETURNING id`, [key, cls]);
  return { effect: `e-${row.id}` };
}
/** Did an operation under this key happen?  Its effect, or null. */
async function lookup(/** @type {string} */ _step, /** @type {string} */ key) {
  const rows = await serviceQuery('SELECT id FROM effects WHERE key = $1 ORDER BY id LIMIT 1', [key]);
  return rows.length ? { effect: `e-${rows[0].id}` } : null;
}

const worker = new Worker({
  connectionString: opt.db, queue: opt.queue, name: opt.name,
  lease: opt.lease === undefined ? undefined : Number(opt.lease), // else the queue's
  batch: Number(opt.batch), concurrency: Number(opt.concurrency), idleExit: Number(opt['idle-exit']),
  // not given: the worker finds out at start whether a transaction-mode pooler is in the way
  pooled: opt.pooled || process.env.DURABLE_POOLED === '1' ? true : undefined,
  lookup,
  onPoint(point, kind) { // test-only fault injection
    const at = process.env.DURABLE_CRASH_AT;
    if (at === point || at === `${point}:${kind}`) process.kill(process.pid, 'SIGKILL');
  },
});

await worker.run(async (task) => {
  /** @type {Record<string, unknown>} */
  const results = {};
  for (const [name, cls, ...args] of task.payload.steps) {
    if (cls === 'sleep') await task.sleep(name, args[0]);
    else if (cls === 'await') await task.await(name, args[0], { timeout: args[1] });
    else if (cls === 'join') await task.join(name);
    else if (cls === 'spawn') {
      for (let i = 1; i <= Number(args[1] ?? 1); i++)
        await task.spawn(`${name}-${i}`, args[0], { steps: [[`${name}-${i}`, 'idempotent']] });
    } else {
      results[name] = await task.step(name, cls, { step: name },
        async (key) => (cls === 'pure' ? { computed: name } : perform(cls, key)),
        { effectId: (r) => ('effect' in r ? r.effect : null) }); // the service's id of it, kept with the receipt
    }
  }
  return { by: opt.name, steps: results };
});
await service.end().catch(() => {});
const said = Object.entries(worker.stats).map(([k, v]) => `${k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)} ${v}`);
console.error(`${new Date().toISOString()} [${opt.name}] stopped: ${said.join(', ')}`);
