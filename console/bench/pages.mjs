// The server time of every console page, and of durable_metrics_prometheus(),
// with much history (tools/console-bench sets it up).  Logs in as the
// operator, as the pg_monitor login and as a queue operator (whose views
// filter by its queues) with node's fetch, times each page
// CONSOLE_BENCH_ROUNDS times after a warm-up, prints the medians and the
// 95th percentiles (nearest rank).
//
// Environment: CONSOLE_URL, CONSOLE_OPERATOR_PASSWORD, CONSOLE_MONITOR_PASSWORD,
// CONSOLE_SHIPPING_PASSWORD,
// CONSOLE_BENCH_ROUNDS (20), CONSOLE_BENCH_HISTORY (for the heading), and
// PGHOST, PGPORT, PGUSER for a superuser connection that picks the tasks to
// open and times the scrape.
import pg from 'pg';

const URL_ = process.env.CONSOLE_URL;
const ROUNDS = Number(process.env.CONSOLE_BENCH_ROUNDS || 20);
const PAGE_MS = 200;
const SCRAPE_MS = 50;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// the 95th percentile, by nearest rank
const p95 = (xs) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(0.95 * xs.length) - 1)];

async function login(role, password) {
  const r = await fetch(`${URL_}/login`);
  const nonce = r.headers.getSetCookie().find((c) => c.startsWith('durable_console_login='));
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await r.text())[1];
  const p = await fetch(`${URL_}/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: nonce.split(';')[0], 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: csrf, role, password }),
  });
  const session = p.headers.getSetCookie().find((c) => c.startsWith('durable_console_session='));
  if (p.status !== 303 || !session) throw new Error(`login as ${role} failed: ${p.status} ${p.headers.get('location')}`);
  return session.split(';')[0];
}

async function timePage(cookie, path) {
  const t0 = process.hrtime.bigint();
  const r = await fetch(`${URL_}${path}`, { headers: { cookie }, redirect: 'manual' });
  const body = await r.text();
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 200) throw new Error(`${path} answered ${r.status}: ${body.slice(0, 300)}`);
  // a page that shows a database error (a statement timeout) is no answer
  const error = /<p class="flash error"[^>]*>([^<]*)</.exec(body);
  return { ms, error: error ? error[1] : null };
}

const db = new pg.Client({ application_name: 'console bench' });
await db.connect();
const one = async (text) => (await db.query(text)).rows[0];

// the tasks and cursors to open: from history (days before today), in review,
// a parent with children, the middle of a queue's history
// (days back when there are several days of history, else yesterday)
const back = `date_trunc('day', now(), 'UTC') - interval '${Number(process.env.CONSOLE_BENCH_HISTORY) > 4000000 ? 3 : 0} days'`;
const old = await one(`SELECT task_id FROM durable.task_history
                       WHERE finished_at < ${back} AND queue_name = 'orders' AND state = 'completed' LIMIT 1`);
const middle = await one(`SELECT task_id, finished_at::text AS at FROM durable.task_history
                          WHERE finished_at < ${back} AND queue_name = 'orders' AND state = 'failed' LIMIT 1`);
const review = await one('SELECT task_id FROM durable.review_queue ORDER BY task_id LIMIT 1');
const parent = await one(`SELECT task_id FROM durable.task_history
                          WHERE finished_at > now() - interval '1 hour' AND queue_name = 'shipments' AND state = 'completed' LIMIT 1`);

const email = await one(`SELECT task_id FROM durable.task_history
                         WHERE finished_at < ${back} AND queue_name = 'emails' AND state = 'completed' LIMIT 1`);
const keyed = await one(`SELECT idempotency_key FROM durable.live_tasks WHERE idempotency_key IS NOT NULL LIMIT 1`);
const hourAgo = await one(`SELECT to_char(now() AT TIME ZONE 'UTC' - interval '1 hour', 'YYYY-MM-DD"T"HH24:MI') AS at`);

const pages = [
  ['operator', '/', 'overview'],
  ['operator', '/queue/orders', 'queue: unfinished tasks, dead letters'],
  ['operator', '/queue/orders?state=completed', 'queue: completed'],
  ['operator', `/queue/orders?state=completed&before=${middle.task_id}`, 'queue: completed, a page days back'],
  ['operator', '/queue/orders?state=failed', 'queue: failed'],
  ['operator', '/queue/orders?state=cancelled', 'queue: cancelled'],
  ['operator', `/queue/orders?dl_before=${encodeURIComponent(middle.at)},${middle.task_id}`, 'queue: dead letters days back'],
  ['operator', '/queue/emails?state=completed', 'queue emails: completed'],
  ['operator', '/queue/emails?state=failed', 'queue emails: failed (it has none)'],
  ['operator', '/queue/emails?state=cancelled', 'queue emails: cancelled (it has none)'],
  ['operator', `/task/${old.task_id}`, 'task, finished days ago'],
  ...(review ? [['operator', `/task/${review.task_id}`, 'task in review']] : []),
  ...(parent ? [['operator', `/task/${parent.task_id}`, 'task with children']] : []),
  ['operator', '/review', 'review'],
  ['operator', `/search?key=${encodeURIComponent(keyed?.idempotency_key || 'none')}`, 'search: an idempotency key'],
  ['operator', `/search?${new URLSearchParams({ queue: 'orders', payload: 'customer = "customer-711@example.com"' })}`, 'search: a payload path in a queue'],
  ['operator', `/search?${new URLSearchParams({ queue: 'orders', from: hourAgo.at, payload: 'customer = "customer-711@example.com"' })}`, 'search: a payload path, the last hour'],
  ['operator', '/search?queue=orders&error=504', 'search: error text in a queue'],
  ['operator', '/search?queue=orders&state=failed', 'search: a queue\'s failed tasks'],
  ['operator', '/stuck', 'stuck tasks'],
  ['operator', '/schedules', 'schedules'],
  ['operator', '/waits', 'waits'],
  ['operator', '/reconciler', 'reconciler'],
  ['operator', '/workers', 'workers and versions'],
  ['operator', '/recovery', 'recovery (the counters and durable.metrics)'],
  // a report over all history, on an operator's request: not a page
  ['operator', '/recovery?history=1', 'report: durable.history_metrics', true],
  ['operator', '/metrics', '/metrics (Prometheus)'],
  ['monitor', '/', 'overview, as pg_monitor'],
  ['monitor', '/metrics', '/metrics, as pg_monitor'],
  ['shipping', '/', 'overview, as a queue operator'],
  ['shipping', '/queue/emails?state=completed', 'queue emails: completed, as a queue operator'],
  ['shipping', `/task/${email.task_id}`, 'task, finished days ago, as a queue operator'],
  ['shipping', '/search?queue=emails&state=completed', "search: a queue's completed tasks, as a queue operator"],
  ['shipping', '/review', 'review, as a queue operator'],
];

const cookies = {
  operator: await login('console_operator', process.env.CONSOLE_OPERATOR_PASSWORD),
  monitor: await login('console_monitor', process.env.CONSOLE_MONITOR_PASSWORD),
  shipping: await login('console_shipping', process.env.CONSOLE_SHIPPING_PASSWORD),
};

const results = [];
for (const [role, path, name, report = false] of pages) {
  const warm = await timePage(cookies[role], path);
  // a page past the statement timeout (10 s) is timed 3 times, not 10
  const rounds = warm.ms > 2000 ? 3 : ROUNDS;
  const times = [];
  let error = warm.error;
  for (let i = 0; i < rounds; i++) {
    const r = await timePage(cookies[role], path);
    times.push(r.ms);
    error ||= r.error;
  }
  results.push({ name, path, rounds, median: median(times), p95: p95(times), error, report });
}

// a statement's times over the rounds, after one to warm it
async function timeQuery(text) {
  const times = [];
  await db.query(text);
  for (let i = 0; i < ROUNDS; i++) {
    const t0 = process.hrtime.bigint();
    await db.query(text);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return times;
}
const scrape = await timeQuery('SELECT durable_metrics_prometheus()');
// durable.metrics, as any SQL client reads it
const METRICS_SQL = 'SELECT * FROM durable.metrics';
const metrics = await timeQuery(METRICS_SQL);
const counts = await one('SELECT count(*) AS live FROM durable.live_tasks');
await db.end();

const history = Number(process.env.CONSOLE_BENCH_HISTORY || 0).toLocaleString('en-US');
console.log(`\nconsole pages with ${history} finished tasks retained (and ${counts.live} unfinished), ${new Date().toISOString().slice(0, 10)}`);
console.log('time at the client (node fetch on loopback): median and 95th percentile of the rounds; ms\n');
const w = Math.max(...results.map((r) => r.name.length), 'SELECT durable_metrics_prometheus()'.length);
console.log(`${'page'.padEnd(w)}  ${'median'.padStart(8)}  ${'p95'.padStart(8)}  rounds  under`);
for (const r of results) {
  const ok = r.p95 < PAGE_MS && !r.error;
  const verdict = r.report ? 'report' : ok ? 'yes' : 'NO';
  console.log(`${r.name.padEnd(w)}  ${r.median.toFixed(1).padStart(8)}  ${r.p95.toFixed(1).padStart(8)}  ${String(r.rounds).padStart(6)}  ${verdict}${r.error ? `  (${r.error.slice(0, 80)})` : ''}`);
}
const sm = median(scrape);
console.log(`${'SELECT durable_metrics_prometheus()'.padEnd(w)}  ${sm.toFixed(1).padStart(8)}  ${p95(scrape).toFixed(1).padStart(8)}  ${String(ROUNDS).padStart(6)}  ${sm < SCRAPE_MS ? 'yes' : 'NO'}`);
console.log(`${METRICS_SQL.padEnd(w)}  ${median(metrics).toFixed(1).padStart(8)}  ${p95(metrics).toFixed(1).padStart(8)}  ${String(ROUNDS).padStart(6)}  ${p95(metrics) < PAGE_MS ? 'yes' : 'NO'}`);
const slow = results.filter((r) => !r.report && !(r.p95 < PAGE_MS && !r.error));
console.log(`\nevery page's p95 under ${PAGE_MS} ms: ${slow.length ? `no (${slow.map((r) => r.name).join('; ')})` : 'yes'}`);
console.log(`the scrape under ${SCRAPE_MS} ms: ${sm < SCRAPE_MS ? 'yes' : 'no'} (median ${sm.toFixed(1)} ms)`);
console.log(`durable.metrics under ${PAGE_MS} ms: ${p95(metrics) < PAGE_MS ? 'yes' : 'no'} (p95 ${p95(metrics).toFixed(1)} ms)`);
