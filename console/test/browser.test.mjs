// The console in a real browser: headless Chromium driven by puppeteer-core
// against a console and a throwaway server with the demo workload, as
// tools/console-test sets them up.  Any console error, page error or failed
// request in the browser fails the test it happens in.  Screenshots of every
// page go to $CONSOLE_ARTIFACTS.
//
// Environment: CONSOLE_URL, CONSOLE_OPERATOR_PASSWORD, CONSOLE_MONITOR_PASSWORD,
// CONSOLE_WORKER_PASSWORD, CONSOLE_ARTIFACTS, CHROMIUM, and PGHOST, PGPORT,
// PGUSER for a superuser connection that checks what the pages say.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import puppeteer from 'puppeteer-core';

const URL_ = process.env.CONSOLE_URL;
const ARTIFACTS = process.env.CONSOLE_ARTIFACTS || '/tmp/durable-console-artifacts';
const OPERATOR = ['console_operator', process.env.CONSOLE_OPERATOR_PASSWORD];
const MONITOR = ['console_monitor', process.env.CONSOLE_MONITOR_PASSWORD];
const WORKER = ['console_worker', process.env.CONSOLE_WORKER_PASSWORD];
const XSS = '<script>window.__xss = 1</script><img src="/xss.png" onerror="window.__xss = 2">';

let browser;
let db;
let shot = 0;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function sql(text, params) {
  return (await db.query(text, params)).rows;
}

// A browser context of its own (its own cookies) for one login, recording
// every console error, page error and failed request.
async function login([role, password], t) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  await page.setViewport({ width: 1400, height: 900 });
  const problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => {
    // a reload that interrupts a request is not a failure of the console
    if (r.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`);
  });
  await page.goto(`${URL_}/login`);
  await page.type('input[name=role]', role);
  await page.type('input[name=password]', password);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  assert.equal(new URL(page.url()).pathname, '/', `login as ${role} failed: ${await page.$eval('body', (b) => b.innerText)}`);
  const s = {
    page,
    problems,
    async goto(p) {
      await page.goto(`${URL_}${p}`, { waitUntil: 'load' });
    },
    async screenshot(name) {
      shot++;
      await page.screenshot({ path: path.join(ARTIFACTS, `${String(shot).padStart(2, '0')}-${role}-${name}.png`), fullPage: true });
    },
    text: () => page.$eval('body', (b) => b.innerText),
    async close() {
      await context.close();
      assert.deepEqual(problems, [], `the browser saw problems as ${role}`);
    },
  };
  t.after?.(() => {});
  return s;
}

before(async () => {
  assert.ok(URL_, 'CONSOLE_URL is not set: run tools/console-test');
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  db = new pg.Client({ application_name: 'console browser test' });
  await db.connect();
  browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  // a queue nobody works, with a known content, and a payload holding markup
  await sql("SELECT durable_create_queue('audit')");
  await sql("SELECT durable_enqueue('audit', jsonb_build_object('n', n)) FROM generate_series(1, 3) n");
  await sql("SELECT durable_enqueue('audit', jsonb_build_object('note', $1::text), metadata => jsonb_build_object('html', $1::text))", [XSS]);
  // a fair queue nobody works: two tenants and the tasks without a key
  await sql("SELECT durable_create_queue('tenants')");
  await sql("SELECT durable_set_fairness('tenants', 'tenant-b', 2)");
  await sql("SELECT durable_enqueue('tenants', '{}', fairness_key => k) FROM unnest(ARRAY['tenant-a', 'tenant-a', 'tenant-a', 'tenant-b']) k");
  await sql("SELECT durable_enqueue('tenants', '{}')");
});

after(async () => {
  await browser?.close();
  await db?.end();
});

describe('operator', () => {
  test("the overview's counts equal SQL's: durable.queue_gauges and durable.queue_counters", async (t) => {
    const s = await login(OPERATOR, t);
    const gauges = ['ready', 'waiting', 'scheduled', 'running', 'needs_review'];
    const counters = ['completed', 'failed', 'dead_lettered', 'cancelled'];
    const readPage = (fields) =>
      s.page.$$eval(
        '#queues tbody tr',
        (rows, fields) =>
          Object.fromEntries(
            rows.map((r) => [r.dataset.queue, fields.map((f) => r.querySelector(`[data-field=${f}]`).innerText.trim())]),
          ),
        fields,
      );
    const readGauges = async () =>
      Object.fromEntries(
        (await sql(`SELECT queue_name, ${gauges.join(', ')} FROM durable.queue_gauges ORDER BY queue_name`)).map((r) => [
          r.queue_name,
          gauges.map((f) => String(r[f])),
        ]),
      );
    // a queue that counted nothing since the server started has no row: 0
    const readCounters = async () =>
      Object.fromEntries(
        (
          await sql(`SELECT g.queue_name, ${counters.map((f) => `coalesce(c.${f}, 0) AS ${f}`).join(', ')}
                     FROM durable.queue_gauges g LEFT JOIN durable.queue_counters c USING (queue_name)`)
        ).map((r) => [r.queue_name, counters.map((f) => Number(r[f]))]),
      );
    await s.goto('/');
    // the queue nobody works: exactly
    assert.deepEqual((await readPage(gauges)).audit, (await readGauges()).audit);
    assert.deepEqual((await readPage(gauges)).audit, ['4', '0', '0', '0', '0']);
    assert.deepEqual((await readPage(counters)).audit, ['0', '0', '0', '0']);
    assert.deepEqual((await readCounters()).audit, [0, 0, 0, 0]);
    // the live ones: the gauges on the page and SQL's agree at some moment
    // (the workload moves on); the counters only grow, so each on the page
    // lies between SQL's reading before the page and after it
    let same = false;
    let last;
    for (let i = 0; i < 15 && !same; i++) {
      const countersBefore = await readCounters();
      const before = await readGauges();
      await s.goto('/');
      const afterLoad = await readGauges();
      const countersAfter = await readCounters();
      const onPage = await readPage(gauges);
      const countedOnPage = await readPage(counters);
      last = { before, onPage, afterLoad };
      for (const [q, values] of Object.entries(countedOnPage)) {
        values.forEach((v, k) => {
          const n = Number(v);
          assert.ok(
            n >= countersBefore[q][k] && n <= countersAfter[q][k],
            `${q}'s ${counters[k]} on the page (${v}) is not between SQL's ${countersBefore[q][k]} and ${countersAfter[q][k]}`,
          );
        });
      }
      assert.ok(Object.values(countersAfter).some((v) => v[0] > 0), 'durable.queue_counters counted no completion');
      same = JSON.stringify(onPage) === JSON.stringify(before) || JSON.stringify(onPage) === JSON.stringify(afterLoad);
      if (!same) await sleep(300);
    }
    assert.ok(same, `the overview never matched durable.queue_gauges: ${JSON.stringify(last)}`);
    // the charts fill after a few samples
    await sleep(6000);
    await s.goto('/');
    assert.ok((await s.page.$$('figure.chart polyline')).length > 0, 'no chart has a line');
    await s.screenshot('overview');
    await s.close();
  });

  test('a review resolved with evidence goes back to work and completes', async (t) => {
    let id;
    for (let i = 0; i < 90 && !id; i++) {
      const r = await sql("SELECT task_id FROM durable.review_queue WHERE queue_name = 'orders' AND step = 'email' ORDER BY task_id LIMIT 1");
      if (r.length) id = r[0].task_id;
      else await sleep(1000);
    }
    assert.ok(id, 'no order went to review within 90 s');
    const s = await login(OPERATOR, t);
    await s.goto('/review');
    await s.screenshot('review');
    const section = `section.review-item[data-task="${id}"]`;
    assert.ok(await s.page.$(section), `task ${id} is not on the review page`);
    const pkg = await s.page.$eval(section, (e) => e.innerText);
    assert.match(pkg, /What is known to have happened/);
    assert.match(pkg, /reserve/); // the committed steps
    assert.match(pkg, /What nobody knows/);
    assert.match(pkg, /email/); // the unsafe step in doubt
    assert.match(pkg, /What to ask whom/);
    await s.goto(`/task/${id}`);
    await s.screenshot('task-in-review');
    assert.ok(await s.page.$('#package'), 'the task page lays out its recovery package');
    await s.page.select('#package select[name=decision]', 'mark_not_executed');
    await s.page.select('#package select[name=step]', 'email');
    await s.page.$eval('#package textarea[name=evidence]', (e) => {
      e.value = '{"mail_log": "searched by idempotency key", "found": null}';
    });
    await Promise.all([s.page.waitForNavigation(), s.page.click('#package button')]);
    const flash = await s.page.$eval('#flash', (e) => e.innerText);
    assert.match(flash, /resolved \(mark_not_executed of step email\)/);
    let state;
    for (let i = 0; i < 60; i++) {
      state = (await sql('SELECT state FROM durable.tasks WHERE task_id = $1', [id]))[0].state;
      if (state === 'completed') break;
      await sleep(500);
    }
    assert.equal(state, 'completed', 'the resolved task did not complete');
    await s.goto(`/task/${id}`);
    assert.equal(await s.page.$eval('#task-state .state', (e) => e.innerText), 'completed');
    const timeline = await s.page.$eval('#timeline', (e) => e.innerText);
    assert.match(timeline, /resolved/);
    assert.match(timeline, /console_operator/);
    assert.match(timeline, /searched by idempotency key/);
    const ev = await sql("SELECT actor, role, detail FROM durable.events WHERE task_id = $1 AND kind = 'resolved'", [id]);
    assert.equal(ev.length, 1);
    assert.equal(ev[0].actor, 'console_operator');
    assert.equal(ev[0].role, 'console_operator');
    await s.screenshot('task-completed-after-review');
    await s.close();
  });

  test('a payload holding <script> shows as text', async (t) => {
    const [{ task_id: id }] = await sql("SELECT task_id FROM durable.live_tasks WHERE queue_name = 'audit' AND payload ? 'note'");
    const s = await login(OPERATOR, t);
    await s.goto(`/task/${id}`);
    await s.screenshot('task-with-markup');
    const payload = await s.page.$eval('#payload', (e) => e.innerText);
    assert.equal(JSON.parse(payload).note, XSS, `the payload is not shown as text: ${payload}`);
    assert.equal(await s.page.$$eval('#payload script, #payload img', (e) => e.length), 0);
    assert.equal(await s.page.evaluate(() => window.__xss), undefined);
    assert.match(await s.text(), /window\.__xss = 2/); // the metadata too, as text
    await s.close();
  });

  test('the runbook: pause a partition, quarantine, replay a small batch, migrate (dry run)', async (t) => {
    const s = await login(OPERATOR, t);
    await s.goto('/queue/audit');
    await s.screenshot('queue-audit');
    const [{ partition_key: part }] = await sql("SELECT partition_base AS partition_key FROM durable.queues WHERE queue_name = 'audit'");
    await s.page.$eval('#pause-actions', (d) => d.setAttribute('open', ''));
    await s.page.select('form[action="/action/pause_partition"] select[name=partition]', String(part));
    await s.page.type('form[action="/action/pause_partition"] input[name=reason]', 'INC-1: audit partition');
    await Promise.all([s.page.waitForNavigation(), s.page.click('form[action="/action/pause_partition"] button')]);
    assert.match(await s.page.$eval('#flash', (e) => e.innerText), /paused/);
    assert.deepEqual((await sql("SELECT paused_partitions FROM durable.queue_gauges WHERE queue_name = 'audit'"))[0].paused_partitions, [part]);

    const [{ task_id: id }] = await sql("SELECT task_id FROM durable.live_tasks WHERE queue_name = 'audit' AND payload = '{\"n\": 1}'");
    await s.goto(`/task/${id}`);
    await s.page.$eval('#task-actions', (d) => d.setAttribute('open', ''));
    await s.page.type('form[action="/action/quarantine"] input[name=reason]', 'INC-1: hold for the fix');
    await Promise.all([s.page.waitForNavigation(), s.page.click('form[action="/action/quarantine"] button')]);
    assert.match(await s.page.$eval('#flash', (e) => e.innerText), /quarantined/);
    const q = await sql("SELECT role, detail FROM durable.events WHERE task_id = $1 AND kind = 'quarantined'", [id]);
    assert.equal(q[0].role, 'console_operator');
    assert.match(JSON.stringify(q[0].detail), /INC-1: hold for the fix/);

    await s.goto('/queue/audit');
    assert.match(await s.page.$eval('#dead-letters', (e) => e.innerText), /INC-1: hold for the fix/);
    await s.screenshot('queue-audit-dead-letters');
    await s.page.$eval('#replay-form input[name=batch]', (e) => (e.value = '5'));
    await s.page.type('#replay-form input[name=filter]', 'INC-1: hold for the fix');
    await s.page.type('#replay-form input[name=note]', 'INC-1 fixed');
    await Promise.all([s.page.waitForNavigation(), s.page.click('#replay-form button')]);
    assert.match(await s.page.$eval('#flash', (e) => e.innerText), /Replayed 1 task/);
    assert.equal((await sql('SELECT state FROM durable.tasks WHERE task_id = $1', [id]))[0].state, 'ready');

    await s.page.$eval('#pause-actions', (d) => d.setAttribute('open', ''));
    await s.page.select('form[action="/action/pause_partition"] select[name=op]', 'resume');
    await s.page.type('form[action="/action/pause_partition"] input[name=reason]', 'INC-1 over');
    await Promise.all([s.page.waitForNavigation(), s.page.click('form[action="/action/pause_partition"] button')]);
    assert.deepEqual((await sql("SELECT paused_partitions FROM durable.queue_gauges WHERE queue_name = 'audit'"))[0].paused_partitions, []);

    // a task pinned to a workflow nobody runs goes to review; migrate it, dry run
    let vid;
    for (let i = 0; i < 60 && !vid; i++) {
      const r = await sql("SELECT task_id FROM durable.live_tasks WHERE stop_code = 'version_unavailable' LIMIT 1");
      if (r.length) vid = r[0].task_id;
      else await sleep(1000);
    }
    assert.ok(vid, 'no task went to review for its versions');
    await s.goto('/workers');
    assert.match(await s.page.$eval('#version-unavailable', (e) => e.innerText), new RegExp(vid));
    await s.screenshot('workers');
    await s.goto(`/task/${vid}`);
    await s.page.$eval('#task-actions', (d) => d.setAttribute('open', ''));
    await s.page.$eval('form[action="/action/migrate"] input[name=from]', (e) => (e.value = '{"workflow": "1"}'));
    await s.page.$eval('form[action="/action/migrate"] input[name=to]', (e) => (e.value = '{"workflow": "2"}'));
    await s.page.$eval('form[action="/action/migrate"] input[name=evidence]', (e) => (e.value = '{"change": "CHG-1"}'));
    await Promise.all([s.page.waitForNavigation(), s.page.click('form[action="/action/migrate"] button')]);
    assert.match(await s.page.$eval('#flash', (e) => e.innerText), /Dry run[\s\S]*would_migrate/);
    await s.screenshot('migrate-dry-run');
    await s.close();
  });

  test('every page opens', async (t) => {
    const s = await login(OPERATOR, t);
    for (const [p, name] of [
      ['/queue/orders', 'queue-orders'],
      ['/queue/orders?state=completed', 'queue-orders-completed'],
      ['/queue/orders?state=failed', 'queue-orders-failed'],
      ['/schedules', 'schedules'],
      ['/waits', 'waits'],
      ['/reconciler', 'reconciler'],
      ['/recovery', 'recovery-metrics'],
    ]) {
      await s.goto(p);
      await s.screenshot(name);
    }
    const [{ task_id: parent }] = await sql("SELECT task_id FROM durable.tasks WHERE queue_name = 'shipments' AND state = 'completed' LIMIT 1");
    await s.goto(`/task/${parent}`);
    assert.match(await s.page.$eval('#children', (e) => e.innerText), /label-1[\s\S]*label-2/);
    await s.screenshot('task-with-children');
    const r = await s.page.goto(`${URL_}/metrics`);
    const body = await r.text();
    if (r.status() === 200) {
      assert.match(r.headers()['content-type'], /^text\/plain; version=0\.0\.4/);
      assert.match(body, /^# HELP durable_/m);
    } else assert.fail(`/metrics answered ${r.status()}: ${body}`);
    await s.close();
  });
});

describe('fairness', () => {
  test("a fair queue's page shows its keys as durable.fairness_keys has them", async (t) => {
    const s = await login(OPERATOR, t);
    await s.goto('/queue/tenants');
    const shown = await s.page.$$eval('#fairness-keys tbody tr', (rows) =>
      rows.map((r) => [...r.querySelectorAll('td')].slice(0, 5).map((c) => c.innerText.trim())));
    const want = (await sql(`SELECT coalesce(fairness_key, '(no key)') AS k, weight, ready, running, unadmitted
                              FROM durable.fairness_keys WHERE queue_name = 'tenants'
                              ORDER BY ready DESC, oldest_ready_age_seconds DESC, fairness_key`))
      .map((r) => [r.k, String(r.weight), String(r.ready), String(r.running), String(r.unadmitted)]);
    assert.equal(want.length, 3);
    assert.deepEqual(shown, want);
    await s.screenshot('queue-fairness-keys');
    await s.close();
  });
});

describe('least privilege', () => {
  test('a pg_monitor login sees counts, no payload and no action', async (t) => {
    const s = await login(MONITOR, t);
    await s.goto('/');
    await s.screenshot('overview');
    assert.ok((await s.page.$$('#queues tbody tr')).length >= 6, 'the monitor sees the queues');
    assert.equal(await s.page.$$eval('#queues a', (a) => a.length), 0, 'no link to tasks');
    const [{ task_id: id }] = await sql("SELECT task_id FROM durable.live_tasks WHERE queue_name = 'audit' AND payload ? 'note'");
    for (const p of ['/', '/queue/audit', `/task/${id}`, '/review', '/waits', '/schedules', '/workers', '/reconciler']) {
      await s.goto(p);
      await s.screenshot(p.replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') || 'home');
      const text = await s.text();
      assert.ok(!text.includes('window.__xss'), `${p} shows a payload`);
      assert.ok(!/customer-\d+@example\.com/.test(text), `${p} shows a payload`);
      assert.equal(await s.page.$$eval('form[action^="/action/"]', (f) => f.length), 0, `${p} offers an action`);
    }
    await s.close();
  });

  test('a worker login cannot resolve', async (t) => {
    const s = await login(WORKER, t);
    await s.goto('/review');
    await s.screenshot('review');
    assert.equal(await s.page.$$eval('form[action="/action/resolve"]', (f) => f.length), 0);
    // and a forged POST with the session's cookie but without the form's token is refused
    const [, status] = await Promise.all([
      // the page's fetch can return before the browser reports the response
      // to the listener that records problems: wait for that report too
      s.page.waitForResponse((r) => new URL(r.url()).pathname === '/action/resolve'),
      s.page.evaluate(async () => {
        const r = await fetch('/action/resolve', { method: 'POST', body: new URLSearchParams({ task_id: '1', decision: 'retry', evidence: '{}' }) });
        return r.status;
      }),
    ]);
    assert.equal(status, 403);
    s.problems.splice(0); // that refusal was the point
    await s.close();
  });
});

// tools/console-test planted, in schema hostile (first in these roles'
// search_path) and in public, a copy or an exact-match overload of every
// operator, function and type a statement could name unqualified
// (test/t/data/hostile_path.sql), each recording that it ran: no page,
// action, scrape or sample of the console may have run one.
describe('a hostile search_path', () => {
  test("no page, action or sample ran code planted in the roles' search_path", async (t) => {
    const [{ task_id: id }] = await sql("SELECT task_id FROM durable.live_tasks WHERE queue_name = 'audit' ORDER BY task_id LIMIT 1");
    const sessions = [];
    for (const who of [OPERATOR, MONITOR, WORKER]) {
      const s = await login(who, t);
      sessions.push(s);
      const pages = who === WORKER ? ['/', '/review'] : ['/', '/queue/audit', '/queue/audit?state=completed',
        '/queue/audit?state=failed', `/task/${id}`, '/review', '/waits', '/schedules', '/workers', '/reconciler', '/recovery'];
      for (const p of pages) {
        await s.goto(p);
      }
      if (who === OPERATOR) await s.page.goto(`${URL_}/metrics`);
    }
    const [{ report }] = await sql('SELECT hostile.report() AS report');
    assert.match(report, /^0 shadowing/, report);
    for (const s of sessions) await s.close();
  });
});
