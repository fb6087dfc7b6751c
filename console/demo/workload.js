#!/usr/bin/env node
// A live workload for the console to show: a producer and a few workers on
// durable's SQL API, as the roles demo_producer and demo_worker.
//
//   orders     reserve (idempotent), charge (queryable), e-mail (unsafe);
//              some fail and retry, a few fail for good (dead letters), and
//              the "flaky" ones lose their worker in the middle of the e-mail
//              the first time, so they wait in review for a person
//   emails     one step, quick
//   shipments  await a payment webhook, spawn two label children, join them
//   agents     pinned to workflow 1 now and then, which no worker runs: after
//              the queue's version_timeout they go to review
//
// Usage: workload.js --database URL      (URL without a user; the roles connect as themselves)
// Stops on SIGTERM or SIGINT.
import pg from 'pg';
import { parse } from 'pg-connection-string';

const args = process.argv.slice(2);
const url = args[args.indexOf('--database') + 1] || process.env.DATABASE_URL || 'postgresql:///postgres';
const base = parse(url);
const conn = (user) =>
  new pg.Pool({
    host: base.host || undefined,
    port: base.port ? Number(base.port) : undefined,
    database: base.database || undefined,
    user,
    max: 3,
    application_name: `durable demo ${user}`,
  });
const producer = conn('demo_producer');
const worker = conn('demo_worker');
for (const p of [producer, worker]) p.on('error', () => {});

let stopping = false;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rand = () => Math.random();
let n = 0;
const pendingWebhooks = [];

async function step(c, task, fence, name, cls, request) {
  const r = await c.query('SELECT state, version, attempt FROM durable_step($1, $2, $3, $4, $5)', [task, fence, name, cls, request]);
  return r.rows[0];
}

async function runStep(c, task, fence, name, cls, request, result) {
  const s = await step(c, task, fence, name, cls, request);
  if (s.state === 'committed') return s;
  const v = (await c.query('SELECT durable_step_start($1, $2, $3, $4) AS v', [task, fence, name, s.version])).rows[0].v;
  await c.query('SELECT durable_commit($1, $2, $3, step => $4, expected_version => $5)', [task, fence, result, name, v]);
  return s;
}

async function order(c, t) {
  const p = t.payload;
  await runStep(c, t.task_id, t.fence, 'reserve', 'idempotent', { sku: p.sku }, { reservation: `r-${p.order}` });
  // the flaky ones do not fail here: they go to review, and once a person
  // resolves them they complete (the browser test waits for that)
  const r = p.flaky ? 1 : rand();
  if (r < 0.1) {
    await c.query('SELECT durable_fail($1, $2, $3, $4)', [t.task_id, t.fence, 'transient', { error: 'payments answered 503' }]);
    return;
  }
  if (r < 0.13) {
    await c.query('SELECT durable_fail($1, $2, $3, $4)', [t.task_id, t.fence, 'permanent', { error: 'card declined' }]);
    return;
  }
  await runStep(c, t.task_id, t.fence, 'charge', 'queryable', { amount: p.amount }, { charge: `ch_${p.order}` });
  const e = await step(c, t.task_id, t.fence, 'email', 'unsafe', { to: p.email });
  if (e.state !== 'committed') {
    const v = (await c.query('SELECT durable_step_start($1, $2, $3, $4) AS v', [t.task_id, t.fence, 'email', e.version])).rows[0].v;
    // the worker "dies" in the middle of the e-mail: nobody knows whether it went out
    if (p.flaky && e.attempt === 0) return;
    await c.query('SELECT durable_commit($1, $2, $3, step => $4, expected_version => $5)', [t.task_id, t.fence, { message_id: `m-${p.order}` }, 'email', v]);
  }
  await c.query('SELECT durable_commit($1, $2, $3)', [t.task_id, t.fence, { status: 'confirmed' }]);
}

async function shipment(c, t) {
  const p = t.payload;
  const a = (await c.query('SELECT status FROM durable_await($1, $2, $3, $4, timeout => $5)', [t.task_id, t.fence, 'paid', `payment:${p.shipment}`, '10 minutes'])).rows[0];
  if (a.status === 'waiting') {
    pendingWebhooks.push({ at: Date.now() + 3000, event: `payment:${p.shipment}` });
    return;
  }
  for (const i of [1, 2])
    await c.query('SELECT durable_spawn($1, $2, $3, $4, $5)', [t.task_id, t.fence, `label-${i}`, 'labels', { shipment: p.shipment, parcel: i }]);
  const j = (await c.query('SELECT status FROM durable_join($1, $2, $3)', [t.task_id, t.fence, 'labels'])).rows[0];
  if (j.status === 'waiting') return;
  await c.query('SELECT durable_commit($1, $2, $3)', [t.task_id, t.fence, { shipped: true }]);
}

async function work(queue, name, handler, { batch = 3, versions = null } = {}) {
  while (!stopping) {
    let rows = [];
    const c = await worker.connect().catch(() => null);
    if (!c) {
      await sleep(1000);
      continue;
    }
    try {
      rows = (await c.query('SELECT task_id, fence, payload FROM durable_claim($1, $2, batch => $3, versions => $4)', [queue, name, batch, versions])).rows;
      for (const t of rows) {
        try {
          if (handler) await handler(c, t);
          else await c.query('SELECT durable_commit($1, $2, $3)', [t.task_id, t.fence, { ok: true }]);
        } catch (err) {
          if (!stopping) process.stderr.write(`${name}: ${err.message}\n`);
        }
        await sleep(50 + rand() * 150);
      }
    } catch (err) {
      if (!stopping) process.stderr.write(`${name}: ${err.message}\n`);
    } finally {
      c.release();
    }
    await sleep(rows.length ? 100 : 700);
  }
}

async function produce() {
  while (!stopping) {
    try {
      n++;
      await producer.query('SELECT durable_enqueue($1, $2)', [
        'orders',
        { order: n, sku: `A${n % 7}`, amount: 100 + (n % 50) * 10, email: `customer-${n}@example.com`, flaky: n % 9 === 0 },
      ]);
      if (n % 2 === 0) await producer.query('SELECT durable_enqueue($1, $2)', ['emails', { to: `user-${n}@example.com`, template: 'welcome' }]);
      if (n % 6 === 0) await producer.query('SELECT durable_enqueue($1, $2)', ['shipments', { shipment: n }]);
      if (n % 40 === 0)
        await producer.query('SELECT durable_enqueue($1, $2, workflow_version => $3)', ['agents', { ticket: n, note: 'pinned to workflow 1, which no worker runs' }, '1']);
      else if (n % 5 === 0) await producer.query('SELECT durable_enqueue($1, $2, workflow_version => $3)', ['agents', { ticket: n }, '2']);
      const now = Date.now();
      while (pendingWebhooks.length && pendingWebhooks[0].at <= now) {
        const w = pendingWebhooks.shift();
        await producer.query('SELECT durable_emit($1, $2, $3)', ['shipments', w.event, { status: 'succeeded' }]);
      }
    } catch (err) {
      if (!stopping) process.stderr.write(`producer: ${err.message}\n`);
    }
    await sleep(600);
  }
}

for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => (stopping = true));

await Promise.all([
  produce(),
  work('orders', 'orders-1', order),
  work('orders', 'orders-2', order),
  work('emails', 'mailer'),
  work('shipments', 'shipper', shipment),
  work('labels', 'printer'),
  work('agents', 'agent-v2', null, { versions: { workflow: ['2'] } }),
]);
await Promise.all([producer.end(), worker.end()]);
