// The console in a real browser: headless Chromium driven by puppeteer-core
// against a console and a throwaway server with the demo workload, as
// tools/console-test sets them up.  Any console error, page error or failed
// request in the browser fails the test it happens in.  Screenshots of every
// page go to $CONSOLE_ARTIFACTS.
//
// Environment: CONSOLE_URL, CONSOLE_OPERATOR_PASSWORD, CONSOLE_MONITOR_PASSWORD,
// CONSOLE_WORKER_PASSWORD, CONSOLE_SHIPPING_PASSWORD, CONSOLE_ARTIFACTS, CHROMIUM, and PGHOST, PGPORT,
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
// an operator of some queues (durable_queue_operator): shipments, labels and team
const SHIPPING = ['console_shipping', process.env.CONSOLE_SHIPPING_PASSWORD];
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
  // tasks to find: by payload, metadata, key, error text
  await sql("SELECT durable_create_queue('findme')");
  await sql(`SELECT durable_enqueue('findme', '{"customer": 711, "order": {"id": "A-1"}}', idempotency_key => 'order-711',
                                    metadata => '{"tenant": "acme"}')`);
  await sql(`SELECT durable_enqueue('findme', '{"customer": 712, "order": {"id": "A-2"}}', idempotency_key => 'order-712')`);
  const [{ id: declined }] = await sql(`SELECT durable_enqueue('findme', '{"customer": 713}') AS id`);
  await sql("SELECT durable_quarantine($1, 'card declined for customer 713')", [declined]);
  // a budget half used, and a rate limit
  await sql("SELECT durable_create_budget('console-tenant', 200)");
  await sql("SELECT durable_create_queue('spends', lease => '1 hour')");
  await sql("SELECT durable_enqueue('spends', '{}', budgets => ARRAY['console-tenant'])");
  await sql(`SELECT durable_step_start(c.task_id, c.fence, 'llm',
               (SELECT version FROM durable_step(c.task_id, c.fence, 'llm', 'pure')), reserve => 100)
             FROM durable_claim('spends', 'spender') c`);
  await sql("SELECT durable_set_rate_limit('console-api', 5, '1 second', 5)");
  // a task that runs and never moves on: stuck after a second
  await sql("SELECT durable_create_queue('slowpoke', lease => '1 hour', progress_timeout => '1 second')");
  await sql("SELECT durable_enqueue('slowpoke', '{}')");
  await sql("SELECT count(*) FROM durable_claim('slowpoke', 'slow-worker')");
  // three tasks in review, each with an unsafe step whose outcome nobody knows
  await sql("SELECT durable_create_queue('bulkrev', lease => '1 hour')");
  await sql("SELECT durable_enqueue('bulkrev', jsonb_build_object('n', n)) FROM generate_series(1, 3) n");
  await sql(`SELECT pg_catalog.count(durable_step_start(c.task_id, c.fence, 'notify',
               (SELECT version FROM durable_step(c.task_id, c.fence, 'notify', 'unsafe'))))
             FROM durable_claim('bulkrev', 'gone', batch => 3) c`);
  await sql("SELECT durable_expire_lease(task_id, 'its worker is gone') FROM durable.live_tasks WHERE queue_name = 'bulkrev'");
  // a task that waits for a person's approval
  await sql("SELECT durable_create_queue('approvals')");
  await sql("SELECT durable_enqueue('approvals', '{\"refund\": 15}')");
  await sql(`SELECT status FROM durable_claim('approvals', 'approver') c,
             durable_await(c.task_id, c.fence, 'approval', 'approval:refund-15', '1 day')`);
  // a task whose worker hangs once it began: held for an hour, its progress never moves
  await sql("SELECT durable_create_queue('hung', lease => '1 hour')");
  await sql("SELECT durable_enqueue('hung', '{}')");
  await sql("SELECT count(*) FROM durable_claim('hung', 'hung-worker') c, durable_begin(c.task_id, c.fence) b");
  // six hours of the reconciler's samples of queue audit, a minute apart:
  // 5 ready tasks, then 9 for the last two hours, and completions at 2 a
  // second (the reconciler adds its own as the test runs)
  await sql(`INSERT INTO durable.samples (at, queue_name, ready, running, waiting, needs_review,
                                          oldest_ready_age_seconds, completed, failed, counters_since)
             SELECT date_trunc('minute', now()) - m * interval '1 minute', 'audit',
                    CASE WHEN m < 120 THEN 9 ELSE 5 END, 0, 0, 0, 30, (360 - m) * 120, 0,
                    now() - interval '1 day'
             FROM generate_series(3, 360) m ON CONFLICT DO NOTHING`);
  // the shipping team's queue, and a vault nobody but the demo's worker may use
  await sql("SELECT durable_create_queue('team')");
  await sql("SELECT durable_grant_queue('team', 'console_shipping', 'all')");
  await sql("SELECT durable_enqueue('team', jsonb_build_object('parcel', 'team-parcel-' || n)) FROM generate_series(1, 2) n");
  await sql("SELECT durable_create_queue('vault', max_attempts => 1)");
  await sql("SELECT durable_grant_queue('vault', 'demo_worker', 'all')");
  await sql("SELECT durable_enqueue('vault', '{\"secret\": \"vault-only-failed\"}')");
  await sql(`SELECT durable_fail(c.task_id, c.fence, 'permanent', '{"message": "vault-only error"}')
             FROM durable_claim('vault', 'vault-worker') c`);
  await sql(`SELECT durable_enqueue('vault', '{"secret": "vault-only"}', idempotency_key => 'vault-key',
                                    metadata => '{"note": "vault-only"}')`);
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
    // nothing is chosen for the operator: no decision, no evidence
    assert.equal(await s.page.$eval('#package select[name=decision]', (e) => e.value), '');
    assert.equal(await s.page.$eval('#package textarea[name=evidence]', (e) => e.value), '');
    const submit = async (decision, evidence) => {
      await s.page.$eval('#package form', (f, d, ev) => {
        for (const e of f.querySelectorAll('[required]')) e.removeAttribute('required'); // what a crafted request sends
        f.querySelector('select[name=decision]').value = d;
        f.querySelector('select[name=step]').value = 'email';
        f.querySelector('textarea[name=evidence]').value = ev;
      }, decision, evidence);
      await Promise.all([s.page.waitForNavigation(), s.page.click('#package button')]);
    };
    await submit('', '{"checked": "the mail log"}');
    assert.match(await s.page.$eval('#flash', (e) => e.innerText), /choose a decision/);
    await submit('mark_not_executed', '{"checked": ""}');
    assert.match(await s.page.$eval('#flash', (e) => e.innerText), /the evidence must say what was checked/);
    // a decision is restated before it is made; going back changes nothing
    await submit('mark_not_executed', '{"checked": "the mail log, searched by idempotency key", "found": null}');
    const effect = await s.page.$eval('#confirm', (e) => e.innerText);
    assert.match(effect, new RegExp(`Record step email of task ${id} as not executed: it will be called again`));
    await s.screenshot('resolve-confirm');
    await Promise.all([s.page.waitForNavigation(), s.page.click('#confirm a')]);
    assert.equal(new URL(s.page.url()).pathname, `/task/${id}`);
    assert.equal((await sql("SELECT count(*)::int AS n FROM durable.events WHERE task_id = $1 AND kind = 'resolved'", [id]))[0].n, 0,
      'going back from the confirmation resolved the task');
    await submit('mark_not_executed', '{"checked": "the mail log, searched by idempotency key", "found": null}');
    await Promise.all([s.page.waitForNavigation(), s.page.click('#confirm button')]);
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
    assert.match(await s.page.$eval('#confirm', (e) => e.innerText), new RegExp(`Quarantine task ${id}: it fails now`));
    await Promise.all([s.page.waitForNavigation(), s.page.click('#confirm button')]);
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
    assert.match(await s.page.$eval('#confirm', (e) => e.innerText), /Replay up to 5 failed task\(s\) of queue audit that stopped for INC-1: hold for the fix/);
    await Promise.all([s.page.waitForNavigation(), s.page.click('#confirm button')]);
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

  test('chosen dead letters replayed, and one from its page', async (t) => {
    await sql("SELECT durable_create_queue('chosen')");
    const ids = (await sql("SELECT durable_enqueue('chosen', jsonb_build_object('n', n)) AS id FROM generate_series(1, 3) n")).map((r) => r.id);
    for (const id of ids) await sql("SELECT durable_quarantine($1, 'INC-3: bad rows')", [id]);
    const s = await login(OPERATOR, t);
    await s.goto('/queue/chosen');
    for (const id of ids.slice(0, 2)) await s.page.click(`#dead-letters input[name=task_id][value="${id}"]`);
    await s.page.type('#replay-chosen input[name=note]', 'INC-3 fixed');
    await Promise.all([s.page.waitForNavigation(), s.page.click('#replay-chosen button')]);
    const effect = await s.page.$eval('#confirm', (e) => e.innerText);
    assert.match(effect, /Replay 2 chosen failed task\(s\) \(\d+, \d+\): each runs again from where it stopped/);
    assert.ok(effect.includes(ids[0]) && effect.includes(ids[1]) && !effect.includes(ids[2]), effect);
    await s.screenshot('replay-chosen-confirm');
    await Promise.all([s.page.waitForNavigation(), s.page.click('#confirm button')]);
    assert.match(await s.page.$eval('#flash', (e) => e.innerText), /Replayed 2 of 2 chosen task/);
    const states = await sql('SELECT task_id, state FROM durable.tasks WHERE task_id = ANY ($1) ORDER BY task_id', [ids]);
    assert.deepEqual(states.map((r) => r.state), ['ready', 'ready', 'failed']);
    const ev = await sql("SELECT actor FROM durable.events WHERE task_id = ANY ($1) AND kind = 'replayed'", [ids]);
    assert.deepEqual(ev.map((r) => r.actor), ['console_operator', 'console_operator']);
    await s.goto(`/task/${ids[2]}`);
    await s.page.type('#replay-task input[name=note]', 'INC-3 fixed, the last one');
    await Promise.all([s.page.waitForNavigation(), s.page.click('#replay-task button')]);
    await Promise.all([s.page.waitForNavigation(), s.page.click('#confirm button')]);
    assert.match(await s.page.$eval('#flash', (e) => e.innerText), /Replayed 1 of 1 chosen task/);
    assert.equal((await sql('SELECT state FROM durable.tasks WHERE task_id = $1', [ids[2]]))[0].state, 'ready');
    await s.close();
  });

  test('tasks found by payload, metadata, key, error text, state and time; stuck tasks listed', async (t) => {
    const s = await login(OPERATOR, t);
    const found = async (query) => {
      await s.goto(`/search?${new URLSearchParams(query)}`);
      if (await s.page.$('#search-error')) return s.page.$eval('#search-error', (e) => `error: ${e.innerText}`);
      if (!(await s.page.$('#search-results'))) return [];
      return s.page.$$eval('#search-results tbody tr', (rows) => rows.map((r) => r.querySelector('[data-field=payload]').innerText));
    };
    assert.deepEqual(await found({ payload: 'customer = 711' }), ['{"order": {"id": "A-1"}, "customer": 711}']);
    await s.screenshot('search');
    assert.deepEqual(await found({ payload: 'order.id = "A-2"', queue: 'findme' }), ['{"order": {"id": "A-2"}, "customer": 712}']);
    assert.deepEqual(await found({ metadata: 'tenant = acme' }), ['{"order": {"id": "A-1"}, "customer": 711}']);
    assert.deepEqual(await found({ key: 'order-712' }), ['{"order": {"id": "A-2"}, "customer": 712}']);
    // a finished task by its key (durable.task_keys), the other filters still applied
    await sql("SELECT durable_create_queue('findkey')");
    await sql(`SELECT durable_enqueue('findkey', '{"customer": 714}', idempotency_key => 'done-714')`);
    await sql("SELECT durable_commit(task_id, fence) FROM durable_claim('findkey', 'test')");
    assert.deepEqual(await found({ key: 'done-714' }), ['{"customer": 714}']);
    assert.deepEqual(await found({ key: 'done-714', state: 'completed', queue: 'findkey' }), ['{"customer": 714}']);
    assert.deepEqual(await found({ key: 'done-714', queue: 'findme' }), []);
    assert.deepEqual(await found({ key: 'done-714', state: 'failed' }), []);
    assert.deepEqual(await found({ error: 'card declined', state: 'failed', queue: 'findme' }), ['{"customer": 713}']);
    assert.ok((await found({ error: 'card declined for customer 713' })).length === 1, 'error text across every queue');
    assert.deepEqual(await found({ queue: 'findme', to: '2000-01-01T00:00' }), []);
    assert.equal((await found({ queue: 'findme', from: '2000-01-01T00:00' })).length, 3);
    assert.match(String(await found({ payload: 'customer 711' })), /^error: the payload must read path = value/);
    assert.match(String(await found({ state: 'bogus' })), /^error: no state bogus/);
    await s.goto('/search?id=12345');
    assert.equal(await s.page.$eval('#search-task', (e) => e.getAttribute('href')), '/task/12345');

    const [{ task_id: slow }] = await sql("SELECT task_id FROM durable.tasks WHERE queue_name = 'slowpoke'");
    await s.goto('/stuck');
    await s.screenshot('stuck');
    const stuck = await s.page.$eval('#stuck', (e) => e.innerText);
    assert.match(stuck, new RegExp(`${slow}\\s+slowpoke\\s+slow-worker`));
    await s.close();
  });

  test('budgets and rate limits: what is left of each', async (t) => {
    const s = await login(OPERATOR, t);
    await s.goto('/flow');
    await s.screenshot('flow');
    const budget = await s.page.$$eval('#budgets tbody tr', (rows) => rows.map((r) => r.innerText.split('\t')).find((c) => c[0] === 'console-tenant'));
    assert.deepEqual([budget[1], budget[4], budget[6], budget[7]], ['200', '100', '100', '50.0'], budget.join(' | '));
    assert.match(await s.page.$eval('#rate-limits', (e) => e.innerText), /console-api\s+5\s+00:00:01\s+5\s+0\s+5\s+0/);
    await s.close();
  });

  test('a schedule paused, run now, and resumed', async (t) => {
    await sql("SELECT durable_create_queue('ticks')");
    await sql("SELECT durable_schedule('tick-hourly', '0 * * * *', 'ticks', '{\"tick\": true}')");
    const s = await login(OPERATOR, t);
    const act = async (label, why) => {
      await s.goto('/schedules');
      const row = await s.page.$$('#schedules tbody tr');
      let form = null;
      for (const r of row) if ((await r.evaluate((e) => e.innerText)).includes('tick-hourly')) form = r;
      assert.ok(form, 'the schedule is not listed');
      let button = null;
      for (const b of await form.$$('button')) if ((await b.evaluate((e) => e.innerText)) === label) button = b;
      assert.ok(button, `no ${label} button`);
      const input = await button.evaluateHandle((b) => b.form.querySelector('input[name=reason]'));
      await input.type(why);
      await Promise.all([s.page.waitForNavigation(), button.click()]);
      const effect = await s.page.$eval('#confirm', (e) => e.innerText);
      await Promise.all([s.page.waitForNavigation(), s.page.click('#confirm button')]);
      return { effect, flash: await s.page.$eval('#flash', (e) => e.innerText) };
    };
    let r = await act('Pause', 'INC-5: the export floods the queue');
    assert.match(r.effect, /Pause schedule tick-hourly: it enqueues nothing until it is resumed/);
    assert.match(r.flash, /Schedule tick-hourly paused/);
    assert.equal((await sql("SELECT paused_at IS NOT NULL AS p FROM durable.schedule_list WHERE schedule_name = 'tick-hourly'"))[0].p, true);
    r = await act('Run now', 'one run for the report');
    assert.match(r.flash, /Schedule tick-hourly run now: task \d+/);
    const [{ n }] = await sql("SELECT count(*)::int AS n FROM durable.tasks WHERE queue_name = 'ticks' AND metadata ->> 'triggered_by' = 'console_operator'");
    assert.equal(n, 1);
    r = await act('Resume', 'INC-5 fixed');
    assert.match(r.flash, /Schedule tick-hourly resumed: next run/);
    assert.equal((await sql("SELECT paused_at IS NULL AS p FROM durable.schedule_list WHERE schedule_name = 'tick-hourly'"))[0].p, true);
    await s.close();
  });

  test("a person's approval emitted from the waiting task's page", async (t) => {
    const [{ task_id: id }] = await sql("SELECT task_id FROM durable.tasks WHERE queue_name = 'approvals'");
    const s = await login(OPERATOR, t);
    await s.goto(`/task/${id}`);
    assert.match(await s.page.$eval('#emit-awaited', (e) => e.innerText), /Emit event approval:refund-15 of queue approvals/);
    await s.page.type('#emit-awaited input[name=payload]', '{"approved": true, "by": "ann"}');
    await s.page.type('#emit-awaited input[name=note]', 'refund approved on the phone');
    await Promise.all([s.page.waitForNavigation(), s.page.click('#emit-awaited button')]);
    assert.match(await s.page.$eval('#confirm', (e) => e.innerText),
      /Emit event approval:refund-15 of queue approvals with payload \{"approved": true, "by": "ann"\}: every task/);
    await Promise.all([s.page.waitForNavigation(), s.page.click('#confirm button')]);
    assert.match(await s.page.$eval('#flash', (e) => e.innerText), /Event approval:refund-15 of queue approvals emitted/);
    // the wait has its event: the task is due, its next claim returns the payload
    const [task] = await sql('SELECT waits, run_at <= now() AS due FROM durable.tasks WHERE task_id = $1', [id]);
    assert.equal(task.waits.approval.status, 'received', 'the awaiting task did not get its event');
    assert.deepEqual(task.waits.approval.payload, { approved: true, by: 'ann' });
    assert.equal(task.due, true);
    await s.close();
  });

  test('a task page updates itself without a reload', async (t) => {
    const [{ task_id: id, fence }] = await sql("SELECT task_id, fence FROM durable.tasks WHERE queue_name = 'slowpoke'");
    const s = await login(OPERATOR, t);
    await s.goto(`/task/${id}`);
    await s.page.evaluate(() => { window.__loaded = 'once'; });
    await sql("SELECT durable_heartbeat($1, $2, 'phase 2 of 3')", [id, fence]);
    await s.page.waitForFunction(() => document.getElementById('task-facts').innerText.includes('phase 2 of 3'), { timeout: 20000 });
    assert.equal(await s.page.evaluate(() => window.__loaded), 'once', 'the page was reloaded');
    const timeline = await s.page.$eval('#timeline', (e) => e.innerText);
    assert.match(timeline, /claimed/);
    await s.close();
  });

  test("a hung worker's lease ended from the task page", async (t) => {
    const [{ task_id: id, fence }] = await sql("SELECT task_id, fence FROM durable.tasks WHERE queue_name = 'hung'");
    const s = await login(OPERATOR, t);
    await s.goto(`/task/${id}`);
    assert.ok(await s.page.$eval('#progress-at', (e) => e.innerText.length > 0), 'the task page shows when progress last moved');
    await s.page.$eval('#task-actions', (d) => d.setAttribute('open', ''));
    await s.page.type('form[action="/action/expire_lease"] input[name=reason]', 'INC-2: the import hangs');
    await Promise.all([s.page.waitForNavigation(), s.page.click('form[action="/action/expire_lease"] button')]);
    assert.match(await s.page.$eval('#confirm', (e) => e.innerText), new RegExp(`End the lease of task ${id} now`));
    await Promise.all([s.page.waitForNavigation(), s.page.click('#confirm button')]);
    assert.match(await s.page.$eval('#flash', (e) => e.innerText), new RegExp(`The lease of task ${id} ended: retry_same_activity`));
    const [after] = await sql('SELECT state, fence FROM durable.tasks WHERE task_id = $1', [id]);
    assert.notEqual(after.state, 'running');
    assert.ok(BigInt(after.fence) > BigInt(fence), 'the hung worker still holds the fence');
    const ev = await sql("SELECT role FROM durable.events WHERE task_id = $1 AND kind = 'lease_expired'", [id]);
    assert.equal(ev[0]?.role, 'console_operator');
    await s.close();
  });

  test('chosen reviews decided at once, chosen tasks cancelled from a search, a queue migrated', async (t) => {
    const ids = (await sql("SELECT task_id FROM durable.tasks WHERE queue_name = 'bulkrev' AND state = 'needs_review' ORDER BY task_id")).map((r) => r.task_id);
    assert.equal(ids.length, 3, 'the three tasks are not in review');
    const s = await login(OPERATOR, t);
    await s.goto('/review?queue=bulkrev');
    for (const id of ids.slice(0, 2)) await s.page.click(`input[name=task_id][value="${id}"]`);
    await s.page.$eval('#resolve-chosen-actions', (d) => d.setAttribute('open', ''));
    await s.page.select('#resolve-chosen select[name=decision]', 'mark_not_executed');
    await s.page.type('#resolve-chosen input[name=step]', 'notify');
    await s.page.type('#resolve-chosen textarea[name=evidence]', '{"checked": "the notification log of each", "found": "nothing sent"}');
    await Promise.all([s.page.waitForNavigation(), s.page.click('#resolve-chosen button')]);
    const effect = await s.page.$eval('#confirm', (e) => e.innerText);
    assert.match(effect, /Record step notify of each of the 2 chosen tasks \(\d+, \d+\) as not executed/);
    await s.screenshot('resolve-chosen-confirm');
    await Promise.all([s.page.waitForNavigation(), s.page.click('#confirm button')]);
    assert.match(await s.page.$eval('#flash', (e) => e.innerText), /Resolved 2 of 2 chosen task\(s\) \(mark_not_executed\)/);
    const states = await sql('SELECT task_id, state FROM durable.tasks WHERE task_id = ANY ($1) ORDER BY task_id', [ids]);
    assert.deepEqual(states.map((r) => r.state !== 'needs_review'), [true, true, false]);
    const ev = await sql("SELECT count(*)::int AS n FROM durable.events WHERE task_id = ANY ($1) AND kind = 'resolved' AND actor = 'console_operator'", [ids]);
    assert.equal(ev[0].n, 2, 'each decision is in its task\'s event log');
    // a resolved task's timeline, drawn: its states, a mark per event of its step
    await s.goto(`/task/${ids[0]}`);
    const drawn = await s.page.$eval('#timeline-chart svg', (svg) => ({
      states: [...svg.querySelectorAll('rect.state')].map((r) => r.getAttribute('class').split(' ')[1]),
      marks: svg.querySelectorAll('circle.step-event').length,
    }));
    const [{ events, step_events: stepEvents }] = await sql(`SELECT count(*)::int AS events, count(step)::int AS step_events
                                                            FROM durable.events WHERE task_id = $1`, [ids[0]]);
    assert.equal(drawn.states.length, events, 'a state segment per event');
    assert.ok(drawn.states.includes('needs_review') && drawn.states.includes('running'), drawn.states.join(' '));
    assert.equal(drawn.marks, stepEvents, 'a mark per event of a step');
    await s.screenshot('task-timeline');

    await s.goto(`/search?${new URLSearchParams({ queue: 'findme', state: 'ready' })}`);
    const ready = await s.page.$$eval('#search-results input[name=task_id]', (boxes) => boxes.map((b) => b.value));
    assert.equal(ready.length, 2);
    for (const id of ready) await s.page.click(`#search-results input[name=task_id][value="${id}"]`);
    await s.page.type('#cancel-chosen input[name=reason]', 'INC-4: test orders');
    await Promise.all([s.page.waitForNavigation(), s.page.click('#cancel-chosen button')]);
    assert.match(await s.page.$eval('#confirm', (e) => e.innerText), /Cancel each of the 2 chosen tasks/);
    await Promise.all([s.page.waitForNavigation(), s.page.click('#confirm button')]);
    assert.match(await s.page.$eval('#flash', (e) => e.innerText), /Cancelled 2 of 2 chosen task\(s\)/);
    const cancelled = await sql("SELECT count(*)::int AS n FROM durable.tasks WHERE task_id = ANY ($1) AND state = 'cancelled'", [ready]);
    assert.equal(cancelled[0].n, 2);

    // the runbook test left a task of agents in review for versions no worker runs
    await s.goto('/workers');
    assert.ok(await s.page.$('#migrate-queue'), 'no queue to migrate is offered');
    {
      await s.page.$eval('#migrate-queue-actions', (d) => d.setAttribute('open', ''));
      await s.page.type('#migrate-queue input[name=from]', '{"workflow": "1"}');
      await s.page.type('#migrate-queue input[name=to]', '{"workflow": "2"}');
      await s.page.type('#migrate-queue input[name=evidence]', '{"checked": "agent-v2 workers are up", "change": "CHG-2"}');
      await Promise.all([s.page.waitForNavigation(), s.page.click('#migrate-queue button')]);
      assert.match(await s.page.$eval('#flash', (e) => e.innerText), /Dry run: \d+ task\(s\) of agents would move; nothing changed/);
      await s.page.$eval('#migrate-queue-actions', (d) => d.setAttribute('open', ''));
      await s.page.type('#migrate-queue input[name=from]', '{"workflow": "1"}');
      await s.page.type('#migrate-queue input[name=to]', '{"workflow": "2"}');
      await s.page.type('#migrate-queue input[name=evidence]', '{"checked": "agent-v2 workers are up", "change": "CHG-2"}');
      await s.page.click('#migrate-queue input[name=dry_run]');
      const [{ now: before }] = await sql('SELECT clock_timestamp() AS now');
      await Promise.all([s.page.waitForNavigation(), s.page.click('#migrate-queue button')]);
      assert.match(await s.page.$eval('#confirm', (e) => e.innerText), /Migrate up to 1000 unfinished tasks of queue agents/);
      await Promise.all([s.page.waitForNavigation(), s.page.click('#confirm button')]);
      assert.match(await s.page.$eval('#flash', (e) => e.innerText), /Migrated \d+ task\(s\) of agents/);
      const left = await sql(`SELECT count(*)::int AS n FROM durable.live_tasks WHERE queue_name = 'agents'
                                AND versions ->> 'workflow' = '1' AND steps_in_doubt = 0 AND created_at < $1`, [before]);
      assert.equal(left[0].n, 0, 'tasks pinned to workflow 1 before the migration are left');
    }
    await s.close();
  });

  test('charts over hours from the reconciler\'s samples', async (t) => {
    const s = await login(OPERATOR, t);
    await s.goto('/');
    await Promise.all([s.page.waitForNavigation(), s.page.click('#chart-ranges a[href="/?range=6h"]')]);
    const chart = async (label) => s.page.$eval(`svg[aria-label="${label}"]`, (svg) => ({
      lines: [...svg.querySelectorAll('polyline')].map((p) => p.querySelector('title').textContent),
      labels: [...svg.querySelectorAll('text')].map((x) => x.textContent),
    }));
    const ready = await chart('Ready tasks');
    assert.ok(ready.lines.includes('audit'), `no line of queue audit: ${ready.lines}`);
    assert.ok(ready.labels.includes('10'), `the ready tasks' axis should end at 10: ${ready.labels}`);
    assert.match(ready.labels.find((l) => l.startsWith('-')), /^-(5\.\d|6\.0) h$/, 'the chart spans the six hours sampled');
    const completed = await chart('Completed per second');
    assert.ok(completed.lines.includes('audit'));
    assert.ok(completed.labels.includes('2/s'), `completions at 2 a second: ${completed.labels}`);
    await s.screenshot('overview-6h');
    // the charts alone, as docs/console-hours.png shows them
    await (await s.page.$('.charts')).screenshot({ path: path.join(ARTIFACTS, 'console-hours.png') });
    await s.goto('/queue/audit?range=24h');
    const lag = await chart('Queue audit: oldest ready task, seconds (lag)');
    assert.ok(lag.lines.length > 0, 'the queue page draws its lag over hours');
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
    // the recovery page shows durable.metrics, a row per queue, and
    // computes the history's only on request
    await s.goto('/recovery');
    const queues = (await sql('SELECT queue_name FROM durable.metrics ORDER BY 1')).map((r) => r.queue_name);
    assert.deepEqual(await s.page.$$eval('#metrics td[data-field="queue_name"]', (td) => td.map((c) => c.innerText)), queues);
    assert.ok((await s.page.$$eval('#metrics thead th', (th) => th.map((h) => h.innerText))).includes('duplicate_side_effects'));
    assert.equal(await s.page.$('#history-metrics-table'), null);
    await s.page.click('#history-metrics');
    await s.page.waitForSelector('#history-metrics-table');
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

describe('a queue operator', () => {
  test('sees and acts on the queues in its scope only, in its pages and their endpoints', async (t) => {
    const s = await login(SHIPPING, t);
    await s.goto('/');
    await s.screenshot('overview');
    const shown = await s.page.$$eval('#queues tbody tr td:first-child', (tds) => tds.map((td) => td.innerText.trim()));
    for (const q of ['shipments', 'labels', 'team', 'audit']) assert.ok(shown.includes(q), `the overview shows ${q}: ${shown}`);
    for (const q of ['orders', 'vault']) assert.ok(!shown.includes(q), `the overview shows ${q}, out of its scope`);
    // its queues alone, as docs/console-queue-operator.png shows them
    await (await s.page.$('#queues')).screenshot({ path: path.join(ARTIFACTS, 'console-queue-operator.png') });
    // the vault's ready task first, then its dead letter
    const vault = (await sql("SELECT task_id FROM durable.tasks WHERE queue_name = 'vault' ORDER BY state = 'failed', task_id")).map((r) => r.task_id);
    const [{ task_id: order }] = await sql("SELECT task_id FROM durable.tasks WHERE queue_name = 'orders' ORDER BY task_id LIMIT 1");
    const pagesOut = ['/queue/vault', '/queue/orders', '/search?queue=vault', '/search?key=vault-key', '/search?error=vault-only',
      '/search?payload=secret%20%3D%20%22vault-only%22', '/review', '/stuck', '/waits', ...vault.map((id) => `/task/${id}`),
      `/task/${order}`];
    for (const p of pagesOut) {
      await s.goto(p);
      const text = await s.text();
      assert.ok(!text.includes('vault-only'), `${p} shows a vault's task`);
      for (const id of vault) assert.ok(!text.includes(String(id)) || p.includes(String(id)), `${p} names a vault's task`);
    }
    // the endpoints the live pages poll answer the same
    for (const p of ['/', '/search?queue=vault', `/task/${vault[0]}`, '/review']) {
      const body = await s.page.evaluate(async (u) => (await fetch(u, { headers: { 'x-durable-live': '1' } })).text(), p);
      assert.ok(!body.includes('vault-only'), `${p}, polled live, shows a vault's task`);
    }
    for (const p of [`/task/${vault[0]}`, `/task/${order}`]) {
      await s.goto(p);
      assert.match(await s.text(), /No such task/, `${p}: a task out of its scope is no task`);
    }
    await s.goto('/queue/vault');
    assert.match(await s.text(), /No queue of that name/);
    await s.screenshot('queue-out-of-scope');
    // its own queue: the payloads, and a cancel through the confirmation
    const [{ task_id: mine }] = await sql("SELECT task_id FROM durable.tasks WHERE queue_name = 'team' ORDER BY task_id LIMIT 1");
    await s.goto('/queue/team');
    assert.match(await s.text(), new RegExp(String(mine)));
    await s.goto(`/task/${mine}`);
    assert.match(await s.text(), /team-parcel-1/);
    await s.page.$eval('#task-actions', (d) => d.setAttribute('open', ''));
    await s.page.type('form[action="/action/cancel"] input[name=reason]', 'INC-3: the parcel went by hand');
    await Promise.all([s.page.waitForNavigation(), s.page.click('form[action="/action/cancel"] button')]);
    await Promise.all([s.page.waitForNavigation(), s.page.click('#confirm button')]);
    assert.match(await s.page.$eval('#flash', (e) => e.innerText), new RegExp(`Task ${mine} cancelled`));
    const [ev] = await sql("SELECT role FROM durable.events WHERE task_id = $1 AND kind = 'cancelled'", [mine]);
    assert.equal(ev?.role, 'console_shipping');
    // its queue's history, found by durable.finished_task_ids through the view
    await s.goto('/queue/team?state=cancelled');
    const listed = await s.page.$$eval('#tasks td[data-field="task_id"]', (tds) => tds.map((td) => td.innerText.trim()));
    const cancelled = (await sql("SELECT task_id FROM durable.tasks WHERE queue_name = 'team' AND state = 'cancelled' ORDER BY task_id DESC LIMIT 50")).map((r) => String(r.task_id));
    assert.deepEqual(listed, cancelled, 'the queue operator lists its queue\'s cancelled tasks, newest first');
    // and an open queue's dead letters, found by durable.dead_letter_ids
    await sql("SELECT durable_create_queue('shipdead', max_attempts => 1)");
    for (let i = 0; i < 3; i++) {
      await sql("SELECT durable_enqueue('shipdead', '{}')");
      await sql("SELECT durable_fail(task_id, fence, 'permanent') FROM durable_claim('shipdead', 'test')");
    }
    await s.goto('/queue/shipdead');
    const dead = await s.page.$$eval('#dead-letters td[data-field="task_id"]', (tds) => tds.map((td) => td.innerText.trim()));
    const failed = (await sql("SELECT task_id FROM durable.tasks WHERE queue_name = 'shipdead' AND state = 'failed' ORDER BY finished_at DESC, task_id DESC")).map((r) => String(r.task_id));
    assert.equal(failed.length, 3);
    assert.deepEqual(dead, failed, 'the queue operator lists an open queue\'s dead letters, newest failure first');
    // a forged cancel of a vault's task, with this session's own token: the
    // same refusal as for a task that does not exist, and nothing changed
    const refusals = [];
    for (const id of [vault[0], '1']) {
      await s.goto(`/task/${mine}`);
      await Promise.all([
        s.page.waitForNavigation(),
        s.page.evaluate((taskId) => {
          const forged = document.createElement('form');
          forged.method = 'POST';
          forged.action = '/action/cancel';
          for (const [k, v] of Object.entries({ _csrf: document.querySelector('input[name=_csrf]').value, task_id: taskId,
            reason: 'forged', confirm: '1', back: `/task/${taskId}` })) {
            const i = document.createElement('input');
            i.name = k;
            i.value = v;
            forged.appendChild(i);
          }
          document.body.appendChild(forged);
          forged.submit();
        }, String(id)),
      ]);
      refusals.push((await s.page.$eval('#flash', (e) => e.innerText)).replace(`task ${id}`, 'task N'));
    }
    assert.match(refusals[0], /permission denied for task N/);
    assert.equal(refusals[0], refusals[1], 'a vault task is refused as a task that does not exist is');
    const [{ state }] = await sql('SELECT state FROM durable.tasks WHERE task_id = $1', [vault[0]]);
    assert.equal(state, 'ready', 'the forged cancel changed nothing');
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
    for (const who of [OPERATOR, MONITOR, WORKER, SHIPPING]) {
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

// Logging in: a password always, one answer for every refusal, an error
// text from a fixed set, and a client that fails too often locked out even
// with the right password.  Last: the lockout holds this address.
describe('logging in', () => {
  const REFUSED = 'could not log in: the role or its password was refused';
  async function tryLogin(context, role, password) {
    const page = await context.newPage();
    await page.goto(`${URL_}/login`);
    await page.type('input[name=role]', role);
    if (password) await page.type('input[name=password]', password);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    const error = await page.$('#login-error') ? await page.$eval('#login-error', (e) => e.innerText) : null;
    const at = new URL(page.url()).pathname;
    await page.close();
    return { at, error };
  }

  test('a password is required, every refusal says the same, the login page says nothing it is given', async () => {
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    await page.goto(`${URL_}/login`);
    const login = await page.$eval('main', (e) => e.innerText);
    assert.doesNotMatch(login, /empty|trust|peer/i, 'the login page advertises a way in without a password');
    await page.goto(`${URL_}/login?error=${encodeURIComponent('<b>your session expired, call 555-0100</b>')}`);
    assert.equal(await page.$('#login-error'), null, 'the login page showed a text from its URL');
    await page.goto(`${URL_}/login?error=locked`);
    assert.match(await page.$eval('#login-error', (e) => e.innerText), /too many failed logins/);
    await page.close();
    assert.deepEqual(await tryLogin(context, OPERATOR[0], ''), { at: '/login', error: REFUSED }, 'an empty password');
    assert.deepEqual(await tryLogin(context, OPERATOR[0], 'wrong'), { at: '/login', error: REFUSED }, 'a wrong password');
    assert.deepEqual(await tryLogin(context, 'no_such_role', 'wrong'), { at: '/login', error: REFUSED }, 'no such role');
    const metrics = await fetch(`${URL_}/metrics`, { headers: { Authorization: `Basic ${Buffer.from(`${OPERATOR[0]}:`).toString('base64')}` } });
    assert.equal(metrics.status, 401, 'a scrape without a password');
    // a success forgives this address its failures
    assert.equal((await tryLogin(context, ...OPERATOR)).at, '/');
    const audit = fs.readFileSync(path.join(ARTIFACTS, 'console-audit.log'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const failed = audit.filter((e) => e.action === 'login_failed');
    assert.ok(failed.some((e) => e.role === 'no_such_role' && e.client && e.reason), 'a failed login is logged with its client and reason');
    assert.ok(failed.some((e) => e.role === OPERATOR[0] && e.reason === 'no password given'));
    await context.close();
  });

  test('a client that fails five times is locked out, even with the right password', async () => {
    const context = await browser.createBrowserContext();
    for (let i = 0; i < 4; i++) assert.equal((await tryLogin(context, OPERATOR[0], `wrong-${i}`)).error, REFUSED);
    assert.match((await tryLogin(context, OPERATOR[0], 'wrong-5')).error, /too many failed logins/);
    const right = await tryLogin(context, ...OPERATOR);
    assert.equal(right.at, '/login', 'the right password got in during a lockout');
    assert.match(right.error, /too many failed logins/);
    await context.close();
  });
});
