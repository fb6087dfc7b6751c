// The console's pages.  Every page asks what the role may read (ctx.caps,
// from has_*_privilege at login) and offers only what it may do; the
// actions its forms post to are actions.js's.

import { html, raw, fmtTime } from './html.js';
import { lineChart, timelineChart } from './charts.js';
import { storedSamples } from './sampler.js';
import {
  DECISIONS, FINISHED_STATES, LIVE_STATES, PAGE, UserError, age, backField, csrfField, emitForm, intOrNull,
  layout, pgError, pre, reasonField, table, taskId, taskLink,
} from './view.js';

// finished tasks a queue page reads at most per partition (see historyFloor)
const HISTORY_WINDOW = 5000;
const CHEAP_MS = 200;

// ---------------------------------------------------------------- login, errors

export function loginPage({ csrf, error }) {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Log in · durable console</title>
<link rel="stylesheet" href="/static/style.css"></head>
<body><main class="login"><h1>durable console</h1>
<p>Log in as a PostgreSQL role. Everything you do runs as that role, through durable's SQL API.</p>
${error ? html`<div class="flash error" id="login-error">${error}</div>` : ''}
<form method="post" action="/login"><input type="hidden" name="_csrf" value="${csrf}">
<label>Role <input name="role" autocomplete="username" required autofocus></label>
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
<button type="submit">Log in</button></form></main></body></html>`;
}

export function errorPage(status, text) {
  return html`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${status} · durable console</title>
<link rel="stylesheet" href="/static/style.css"></head><body><main><h1>${status}</h1>
<p class="flash error">${text}</p><p><a href="/">Back to the console</a></p></main></body></html>`;
}

// ---------------------------------------------------------------- routes

export function route(pathname) {
  if (pathname === '/') return overview;
  if (pathname === '/review') return review;
  if (pathname === '/schedules') return schedules;
  if (pathname === '/waits') return waits;
  if (pathname === '/search') return search;
  if (pathname === '/stuck') return stuck;
  if (pathname === '/flow') return flow;
  if (pathname === '/reconciler') return reconciler;
  if (pathname === '/workers') return workers;
  if (pathname === '/recovery') return recovery;
  let m = /^\/queue\/([^/]+)$/.exec(pathname);
  if (m) return (ctx) => queue(ctx, decodeURIComponent(m[1]));
  m = /^\/task\/([0-9]+)$/.exec(pathname);
  if (m) return (ctx) => task(ctx, m[1]);
  return null;
}

// ---------------------------------------------------------------- over time

// The charts' ranges beyond the console's own live samples: the
// reconciler's samples (durable.queue_samples, a minute apart, 48 hours),
// a point per bucket.
const RANGES = {
  '6h': { label: '6 hours', interval: '6 hours', bucket: '1 minute' },
  '24h': { label: '24 hours', interval: '24 hours', bucket: '5 minutes' },
  '48h': { label: '48 hours', interval: '48 hours', bucket: '10 minutes' },
};

// The series the charts draw: the range asked for (?range=) from the
// samples, else the console's live ones (the last 30 minutes).
async function overTime(ctx, queue) {
  const key = ctx.url.searchParams.get('range');
  const range = ctx.caps.samples && Object.hasOwn(RANGES, key) ? RANGES[key] : null;
  if (!range) return { series: ctx.sampler, range: null };
  const rows = (await ctx.query(ctx.sql.samples, [range.interval, queue, range.bucket])).rows;
  return { series: storedSamples(rows), range };
}

function rangeLinks(ctx, range) {
  if (!ctx.caps.samples) return '';
  const here = ctx.url.pathname;
  const link = (key, label) => (RANGES[key] === range || (!key && !range)
    ? html`<strong>${label}</strong>`
    : html`<a href="${here}${key ? `?range=${key}` : ''}">${label}</a>`);
  return html`<p class="ranges" id="chart-ranges">${link(null, '30 minutes (live)')} · ${Object.entries(RANGES).map(([k, r], i) => html`${i ? ' · ' : ''}${link(k, r.label)}`)}
<span class="muted">(the last 48 hours from the reconciler's samples, a minute apart)</span></p>`;
}

// ---------------------------------------------------------------- overview

async function overview(ctx) {
  const { caps, sql } = ctx;
  const parts = [];
  if (!caps.overview && !caps.counters) {
    parts.push(html`<p>Role ${ctx.role} may read none of durable's views: grant it pg_monitor or durable_operator.</p>`);
    return layout(ctx, 'Overview', parts);
  }
  let counters = null;
  if (caps.counters) counters = (await ctx.query(sql.counters)).rows;
  if (caps.gauges) parts.push(await gaugesTable(ctx, counters));
  else if (caps.queueStats) parts.push(await queueStatsTable(ctx));
  if (counters) {
    const cols = Object.keys(counters[0] || { queue_name: 1 }).filter((c) => c !== 'stats_reset');
    const reset = counters.find((r) => r.stats_reset)?.stats_reset;
    const labels = Object.fromEntries(cols.map((c) => [c, c === 'queue_name' ? 'queue' : c.replace(/_/g, ' ')]));
    parts.push(html`<h2>Counters since ${reset ? fmtTime(reset) : 'the server started'}</h2>
<p class="muted">durable.queue_counters: monotonic in shared memory, from the server's start or durable_reset_counters().</p>
<div class="wide">${table(cols, counters, { id: 'counters', labels, empty: 'nothing counted: durable.queue_counters is empty unless durable is in shared_preload_libraries' })}</div>`);
  } else {
    parts.push(html`<p class="muted" id="no-counters">${caps.countersPresent ? 'This role may not read durable.queue_counters.' : 'durable.queue_counters does not exist in this version of durable: rates are computed from the differences of the counts above.'}</p>`);
  }
  const { series: s, range } = await overTime(ctx, null);
  parts.push(html`<h2>Over time</h2>${rangeLinks(ctx, range)}<div class="charts">
${lineChart('Ready tasks', s.gauge('ready'))}
${lineChart('Running tasks', s.gauge('running'))}
${lineChart('In review', s.gauge('needs_review'))}
${lineChart('Oldest ready task, seconds (lag)', s.gauge('oldest_ready_s'), { unit: 's' })}
${lineChart('Completed per second', s.rate('completed'), { unit: '/s' })}
${lineChart(caps.counters || range ? 'Failed attempts per second' : 'Failed per second', s.rate('failed'), { unit: '/s' })}
</div>${s.lastError ? html`<p class="flash error">Sampling failed: ${s.lastError}</p>` : ''}`);
  if (caps.metrics || caps.counters) parts.push(html`<p><a href="/recovery">Recovery</a>: expired leases, retries, reviews and refused writes per queue.</p>`);
  if (caps.waitStats) {
    const rows = (await ctx.query(sql.waitStats)).rows;
    parts.push(html`<h2>Waits</h2>${table(['queue_name', 'kind', 'waiting', 'oldest_wait', 'with_timeout'], rows, { id: 'wait-stats', empty: 'no task waits' })}`);
  }
  if (caps.scheduleStats) {
    const rows = (await ctx.query(sql.scheduleStats)).rows;
    parts.push(html`<h2>Schedules</h2>${table(['queue_name', 'schedules', 'due', 'oldest_due_age'], rows, { id: 'schedule-stats', empty: 'no schedules' })}`);
  }
  if (caps.status) {
    const st = (await ctx.query(sql.statusPublic)).rows[0];
    parts.push(html`<h2>Reconciler</h2><p id="reconciler-summary">${st.reconciler}${st.reconciler_pid ? html` (pid ${st.reconciler_pid})` : ''};
      failing parts: <span class="${st.failing_parts > 0 ? 'bad' : ''}">${st.failing_parts}</span>${st.failing_since ? html` since ${fmtTime(st.failing_since)}` : ''}</p>`);
  }
  return layout(ctx, 'Overview', parts);
}

// The queues from durable.queue_gauges (unfinished tasks only, never
// history) and what durable.queue_counters counted since the server
// started: cheap whatever history is kept.
async function gaugesTable(ctx, counters) {
  const { caps, sql } = ctx;
  const rows = (await ctx.query(sql.gauges)).rows;
  const alarms = caps.liveAlarms ? new Map((await ctx.query(sql.liveAlarms)).rows.map((r) => [r.queue_name, r])) : null;
  const counted = counters ? new Map(counters.map((r) => [r.queue_name, r])) : null;
  // a queue that counted nothing since the server started has no row
  const count = (q, f) => (counted ? (counted.get(q)?.[f] ?? 0) : '');
  return html`<h2>Queues</h2>
<div class="wide"><table id="queues"><thead><tr><th>queue</th><th>paused</th><th>ready</th><th>waiting</th><th>scheduled</th><th>running</th><th>in review</th>
<th>oldest ready</th><th>oldest heartbeat</th>${alarms ? html`<th>expired leases</th><th>stuck</th>` : ''}
${counted ? html`<th>completed</th><th>failed attempts</th><th>dead-lettered</th><th>cancelled</th>` : ''}<th>paused partitions</th></tr></thead><tbody>
${rows.map((r) => {
  const a = alarms?.get(r.queue_name);
  return html`<tr data-queue="${r.queue_name}">
<td>${caps.tasks ? html`<a href="/queue/${encodeURIComponent(r.queue_name)}">${r.queue_name}</a>` : r.queue_name}</td>
<td data-field="paused">${r.paused ? 'paused' : ''}</td>
<td data-field="ready">${r.ready}</td><td data-field="waiting">${r.waiting}</td><td data-field="scheduled">${r.scheduled}</td><td data-field="running">${r.running}</td>
<td data-field="needs_review">${caps.review && Number(r.needs_review) > 0 ? html`<a href="/review?queue=${encodeURIComponent(r.queue_name)}">${r.needs_review}</a>` : r.needs_review}</td>
<td data-field="oldest_ready_age">${Number(r.ready) > 0 ? age(r.oldest_due_s) : ''}</td><td data-field="oldest_heartbeat_age">${Number(r.running) > 0 ? age(r.oldest_heartbeat_s) : ''}</td>
${alarms ? html`<td data-field="expired_leases">${a ? a.expired_leases : 0}</td><td data-field="stuck">${a ? a.stuck : 0}</td>` : ''}
${counted ? html`<td data-field="completed">${count(r.queue_name, 'completed')}</td><td data-field="failed">${count(r.queue_name, 'failed')}</td>
<td data-field="dead_lettered">${count(r.queue_name, 'dead_lettered')}</td><td data-field="cancelled">${count(r.queue_name, 'cancelled')}</td>` : ''}
<td data-field="paused_partitions">${(r.paused_partitions || []).join(', ')}</td></tr>`;
})}</tbody></table></div>
<p class="muted">Ready: due now (waiting tasks whose time has come too); waiting: not due yet; scheduled: due later. These count the unfinished tasks (durable.queue_gauges, which reads no history).${counted ? ' Completed, failed attempts, dead-lettered (ended failed) and cancelled are what durable counted since the server started (durable.queue_counters): retention never takes them back.' : ''}</p>`;
}

// A durable without queue_gauges: durable.queue_stats, which counts the
// finished tasks retained.  Read it here only while that is cheap; else
// show the sampler's latest reading.
async function queueStatsTable(ctx) {
  const { caps, sql } = ctx;
  const parts = [];
  const s = ctx.sampler;
  const cached = s && s.queueStats && s.queueStatsMs > CHEAP_MS;
  const rows = cached ? s.queueStats : (await ctx.query(sql.queueStats)).rows;
  if (cached)
    parts.push(html`<p class="muted" id="stats-as-of">As of ${fmtTime(s.queueStatsAt)}: durable.queue_stats took ${s.queueStatsMs} ms (it counts every finished task retained), so the console reads it every ${Math.round(s.nextDelay() / 1000)} s.</p>`);
  parts.push(html`<h2>Queues</h2>
<table id="queues"><thead><tr><th>queue</th><th>paused</th><th>ready</th><th>waiting</th><th>running</th><th>in review</th>
<th>completed</th><th>failed</th><th>cancelled</th><th>oldest ready</th><th>oldest heartbeat</th><th>expired leases</th><th>stuck</th><th>paused partitions</th></tr></thead><tbody>
${rows.map(
  (r) => html`<tr data-queue="${r.queue_name}">
<td>${caps.tasks ? html`<a href="/queue/${encodeURIComponent(r.queue_name)}">${r.queue_name}</a>` : r.queue_name}</td>
<td data-field="paused">${r.paused ? 'paused' : ''}</td>
<td data-field="ready">${r.ready}</td><td data-field="waiting">${r.waiting}</td><td data-field="running">${r.running}</td>
<td data-field="needs_review">${caps.review && Number(r.needs_review) > 0 ? html`<a href="/review?queue=${encodeURIComponent(r.queue_name)}">${r.needs_review}</a>` : r.needs_review}</td>
<td data-field="completed">${r.completed}</td><td data-field="failed">${r.failed}</td><td data-field="cancelled">${r.cancelled}</td>
<td data-field="oldest_ready_age">${age(r.oldest_due_s)}</td><td data-field="oldest_heartbeat_age">${age(r.oldest_heartbeat_s)}</td>
<td data-field="expired_leases">${r.expired_leases}</td><td data-field="stuck">${r.stuck}</td>
<td data-field="paused_partitions">${(r.paused_partitions || []).join(', ')}</td></tr>`,
)}</tbody></table>
<p class="muted">Completed, failed and cancelled count the finished tasks retained (durable.queue_stats); they fall when retention drops a day.</p>`);
  return parts;
}

const METRICS_COLUMNS = ['queue_name', 'finished', 'duplicate_side_effects', 'recoveries', 'recovery_success_rate',
  'mean_recovery_time', 'ambiguous_outcome_rate', 'human_escalation_rate', 'claims_per_task', 'reconciliation_lag', 'since'];

async function recovery(ctx) {
  const { caps, sql } = ctx;
  const parts = [];
  // the counters: since the server started, whatever history is kept
  if (caps.counters) {
    const rows = (await ctx.query(sql.counters)).rows.map((r) => {
      const claimed = Number(r.claimed);
      const resolved = ['mark_committed', 'mark_not_executed', 'mark_failed', 'retry', 'cancel']
        .reduce((n, d) => n + Number(r[`resolved_${d}`]), 0);
      const rate = (n) => (claimed > 0 ? (n / claimed).toFixed(3) : '');
      return {
        queue_name: r.queue_name, claimed, leases_expired: r.leases_expired, retried: r.retried,
        failed_attempts: r.failed, sent_to_review: r.sent_to_review, resolved,
        dead_lettered: r.dead_lettered, stale_writes: r.stale_writes, version_conflicts: r.version_conflicts,
        expiry_rate: rate(Number(r.leases_expired)), escalation_rate: rate(Number(r.sent_to_review)),
      };
    });
    parts.push(html`<h2>Since the server started (durable.queue_counters)</h2>
${table(['queue_name', 'claimed', 'leases_expired', 'retried', 'failed_attempts', 'sent_to_review', 'resolved', 'dead_lettered', 'stale_writes', 'version_conflicts', 'expiry_rate', 'escalation_rate'], rows, { id: 'recovery-counters', empty: 'nothing counted yet' })}
<p class="muted">Expiry and escalation rates are per claim. These read shared memory only.</p>`);
  }
  // durable.metrics is counted: cheap whatever history is kept
  if (caps.metrics) {
    parts.push(html`<h2>Since the counters began (durable.metrics)</h2>
${table(METRICS_COLUMNS, (await ctx.query(sql.metrics)).rows, { id: 'metrics', empty: 'no queue' })}
<p class="muted">Recoveries are tasks that finished after a lease of theirs expired; the success rate is the share of them that completed. Ambiguous outcomes are steps a lost lease left started or unknown, per step started.</p>`);
  }
  // durable.history_metrics reads every task and event retained: on request only
  if (caps.history_metrics && ctx.url.searchParams.get('history') === '1') {
    let body;
    try {
      body = table(['queue_name', 'tasks', ...METRICS_COLUMNS.slice(2, -1)], (await ctx.query(sql.historyMetrics)).rows, { id: 'history-metrics-table' });
    } catch (err) {
      body = html`<p class="flash error">${pgError(err)}</p>`;
    }
    parts.push(html`<h2>Over the history retained (durable.history_metrics)</h2>${body}`);
  } else if (caps.history_metrics) {
    parts.push(html`<p><a href="/recovery?history=1" id="history-metrics">Compute the same over the history retained (durable.history_metrics)</a>. It reads every task and event kept, so it is slow with much history (the console gives up after 10 s).</p>`);
  }
  if (!parts.length) parts.push(html`<p>Role ${ctx.role} may read neither durable.queue_counters nor durable.metrics.</p>`);
  return layout(ctx, 'Recovery', parts);
}

// ---------------------------------------------------------------- a queue

async function queue(ctx, name) {
  const { caps, sql, url } = ctx;
  if (!caps.tasks) return layout(ctx, `Queue ${name}`, html`<p>Role ${ctx.role} may not read the queue's tasks.</p>`);
  const q = (await ctx.query(sql.queue, [name])).rows[0];
  if (!q) return layout(ctx, `Queue ${name}`, html`<p>No queue of that name.</p>`);
  const keys = q.partition_keys.map(Number);
  const stateParam = url.searchParams.get('state') || 'live';
  const states = stateParam === 'live' ? LIVE_STATES : [...LIVE_STATES, ...FINISHED_STATES].includes(stateParam) ? [stateParam] : LIVE_STATES;
  const partition = intOrNull(url.searchParams.get('partition'), { min: 0, max: 32767 });
  const before = taskId(url.searchParams.get('before'));
  const finished = FINISHED_STATES.includes(states[0]);
  let rows;
  let floor = null;
  if (finished) {
    const scanned = partition === null ? keys : keys.filter((k) => k === partition);
    // a queue operator's floor is its queue's (durable.finished_task_ids)
    const args = [scanned, before, HISTORY_WINDOW, ...(caps.tables ? [] : [name])];
    floor = (await ctx.query(sql.historyFloor, args)).rows[0].floor;
    rows = (await ctx.query(sql.historyTasks, [name, states, keys, partition, before, PAGE, floor])).rows;
  } else {
    rows = (await ctx.query(sql.liveTasks, [name, states, keys, partition, before, PAGE])).rows;
  }
  // the next page: before the last task shown, or, when the window ended
  // first, before the window
  const next = rows.length === PAGE ? rows[rows.length - 1].task_id : floor;
  const parts = [];

  parts.push(html`<p>${q.partitions} partition(s): ${keys.join(', ')}; lease ${q.lease}; max attempts ${q.max_attempts}${q.version_timeout ? html`; version timeout ${q.version_timeout}` : ''}${q.concurrency_limit ? html`; concurrency limit ${q.concurrency_limit}` : ''}${q.restricted ? '; restricted to its grants' : ''}.
  ${q.paused ? html`<strong class="bad" id="queue-paused">The queue is paused.</strong>` : ''}
  ${q.paused_partitions.length ? html`<strong class="bad">Paused partitions: ${q.paused_partitions.join(', ')}</strong>` : ''}</p>`);

  if (caps.pause) {
    const back = backField(ctx);
    parts.push(html`<details class="actions" id="pause-actions"><summary>Pause or resume</summary>
<form method="post" action="/action/${q.paused ? 'resume' : 'pause'}">${csrfField(ctx)}${back}
<input type="hidden" name="queue" value="${name}">${reasonField('Reason (for the console\'s audit log: durable_pause takes none)')}
<button>${q.paused ? 'Resume the queue' : 'Pause the queue'}</button></form>
<form method="post" action="/action/pause_partition">${csrfField(ctx)}${back}
<input type="hidden" name="queue" value="${name}">
<label>Partition <select name="partition">${keys.map((k) => html`<option value="${k}">${k}${q.paused_partitions.includes(k) ? ' (paused)' : ''}</option>`)}</select></label>
<label>Do <select name="op"><option value="pause">pause</option><option value="resume">resume</option></select></label>
${reasonField('Reason (for the console\'s audit log: durable_pause takes none)')}
<button>Apply to the partition</button></form></details>`);
  }

  if (caps.fairnessKeys) {
    const fair = (await ctx.query(sql.fairnessKeys, [name])).rows;
    if (fair.length) {
      parts.push(html`<h2>Fairness keys</h2><p class="muted">The 20 keys with the most due work; a key whose oldest due task keeps ageing while the others are served waits more than its share.</p>
${table(
        ['fairness_key', 'weight', 'ready', 'running', 'unadmitted', 'oldest_due'],
        fair.map((r) => ({ ...r, fairness_key: r.fairness_key ?? '(no key)', oldest_due: Number(r.ready) > 0 ? age(r.oldest_due_s) : '' })),
        { id: 'fairness-keys' },
      )}`);
    }
  }

  parts.push(html`<h2>Tasks</h2><form method="get" class="filters">
<label>State <select name="state">${['live', ...LIVE_STATES, ...FINISHED_STATES].map(
    (s) => html`<option value="${s}"${s === stateParam ? raw(' selected') : ''}>${s === 'live' ? 'all unfinished' : s}</option>`,
  )}</select></label>
<label>Partition <select name="partition"><option value="">all</option>${keys.map((k) => html`<option value="${k}"${k === partition ? raw(' selected') : ''}>${k}</option>`)}</select></label>
<button>Filter</button></form>
${table(
    ['task_id', 'state', 'class', 'attempt', 'priority', 'run_at', 'created_at', finished ? 'finished_at' : 'lease_until', 'owner', 'stop_code', 'parent_id'],
    rows.map((r) => ({ ...r, task_id: taskLink(r.task_id), parent_id: taskLink(r.parent_id), attempt: `${r.attempt}/${r.max_attempts}` })),
    { id: 'tasks', empty: floor ? `no task in this state among the newest ${HISTORY_WINDOW} finished tasks of each partition` : 'no task in this state' },
  )}
${next ? html`<p><a id="next-page" href="?state=${stateParam}${partition !== null ? `&partition=${partition}` : ''}&before=${next}">${rows.length === PAGE ? 'Older tasks' : 'Look further back'}</a>${rows.length < PAGE ? html` <span class="muted">(a page reads at most ${HISTORY_WINDOW} finished tasks of each partition)</span>` : ''}</p>` : ''}
${before ? html`<p><a href="?state=${stateParam}${partition !== null ? `&partition=${partition}` : ''}">Newest tasks</a></p>` : ''}`);

  const { series, range } = await overTime(ctx, name);
  parts.push(html`${rangeLinks(ctx, range)}<div class="charts">${lineChart(`Queue ${name}: ready, running, in review`, [
    ...series.gauge('ready', name).map((s) => ({ ...s, name: 'ready' })),
    ...series.gauge('running', name).map((s) => ({ ...s, name: 'running' })),
    ...series.gauge('needs_review', name).map((s) => ({ ...s, name: 'in review' })),
  ])}
${lineChart(`Queue ${name}: completed and failed attempts per second`, [
    ...series.rate('completed', name).map((s) => ({ ...s, name: 'completed' })),
    ...series.rate('failed', name).map((s) => ({ ...s, name: 'failed' })),
  ], { unit: '/s' })}
${lineChart(`Queue ${name}: oldest ready task, seconds (lag)`, series.gauge('oldest_ready_s', name), { unit: 's' })}</div>`);

  if (caps.emit) parts.push(html`<details class="actions" id="emit-actions"><summary>Emit an event of this queue</summary>${emitForm(ctx, name, null, 'emit-event')}</details>`);

  if (caps.deadLetters) {
    const dlParam = url.searchParams.get('dl_before') || '';
    const m = /^([0-9T:.\-+Z ]{10,40}),([0-9]{1,19})$/.exec(dlParam);
    const dl = (await ctx.query(sql.deadLetters, [name, keys, m ? m[1] : null, m ? m[2] : null, PAGE])).rows;
    const replayable = dl.length
      ? new Map((await ctx.query(sql.deadLetterReplayable, [keys, dl.map((d) => d.task_id)])).rows.map((r) => [r.task_id, r.replayable]))
      : new Map();
    const reasons = [...new Set(dl.map((d) => d.reason).filter(Boolean))];
    const choose = caps.replayChosen;
    parts.push(html`<h2>Dead letters</h2>
${table(
      [...(choose ? ['choose'] : []), 'task_id', 'partition_key', 'stop_code', 'reason', 'failed_at', 'attempt', 'replayable'],
      dl.map((d) => ({
        ...d,
        choose: html`<input type="checkbox" name="task_id" value="${d.task_id}" form="replay-chosen" aria-label="choose ${d.task_id}">`,
        task_id: taskLink(d.task_id),
        replayable: replayable.get(d.task_id) ? 'yes' : 'no',
      })),
      { id: 'dead-letters', empty: 'no dead letters retained' },
    )}
${choose && dl.length
      ? html`<form method="post" action="/action/replay_tasks" class="actions" id="replay-chosen">${csrfField(ctx)}${backField(ctx)}
${reasonField('Why replay these now (for the console\'s audit log)', 'note')}
<button>Replay the chosen dead letters</button></form>`
      : ''}
${dl.length === PAGE ? html`<p><a href="?dl_before=${encodeURIComponent(dl[dl.length - 1].failed_at_text)},${dl[dl.length - 1].task_id}">Older dead letters</a></p>` : ''}
${caps.replay && dl.length
      ? html`<form method="post" action="/action/replay" class="actions" id="replay-form">${csrfField(ctx)}${backField(ctx)}
<input type="hidden" name="queue" value="${name}">
<label>Batch <input name="batch" type="number" min="1" max="100" value="10" required></label>
<label>Partition <select name="partition"><option value="">any</option>${keys.map((k) => html`<option value="${k}">${k}</option>`)}</select></label>
<label>Only those that stopped for <input name="filter" list="reasons" placeholder="stop code or quarantine reason"></label>
<datalist id="reasons">${reasons.map((r) => html`<option value="${r}">`)}</datalist>
${reasonField('Why replay now (for the console\'s audit log)', 'note')}
<button>Replay a small batch</button></form>`
      : ''}`);
  }
  return layout(ctx, `Queue ${name}`, parts);
}

// ---------------------------------------------------------------- a task

async function childrenTree(ctx, id, depth, seen) {
  if (depth > 4 || seen.size > 200) return '';
  const kids = (await ctx.query(ctx.sql.spawned, [id])).rows;
  if (!kids.length) return '';
  const items = [];
  for (const k of kids) {
    if (!k.task_id || seen.has(k.task_id)) continue;
    seen.add(k.task_id);
    const t = (await ctx.query(ctx.sql.taskBrief, [k.task_id])).rows[0];
    items.push(html`<li>${k.name}: ${taskLink(k.task_id)} ${t ? html`<span class="state ${t.state}">${t.state}</span> in ${t.queue_name}` : html`<span class="muted">(no longer retained)</span>`}
      ${t ? await childrenTree(ctx, k.task_id, depth + 1, seen) : ''}</li>`);
  }
  return html`<ul class="tree">${items}</ul>`;
}

function packageView(pkg, text) {
  const known = pkg.confirmed_side_effects || [];
  const unknown = pkg.unknown_side_effects || [];
  const rec = pkg.recommended_action || {};
  return html`<div class="package">
<h3>What is known to have happened</h3>
${table(['step', 'state', 'receipt', 'effect_id', 'result'], known.map((e) => ({ ...e, result: e.result === undefined ? '' : JSON.stringify(e.result) })), { empty: 'no side effect is confirmed' })}
<h3>What nobody knows</h3>
${table(['step', 'class', 'state', 'attempt', 'receipt', 'idempotency_key', 'request'], unknown.map((e) => ({ ...e, request: e.request === undefined ? '' : JSON.stringify(e.request) })), { empty: 'nothing is in doubt' })}
<h3>What to ask whom</h3>
<p class="recommended"><strong>${rec.action || ''}</strong>: ${rec.reason || ''}</p>
${pkg.versions ? html`<p>Versions: pinned ${JSON.stringify(pkg.versions.pinned)}; workers alive run ${JSON.stringify(pkg.versions.alive)}</p>` : ''}
<details><summary>The whole recovery package</summary>${pre(text)}</details></div>`;
}

function resolveForm(ctx, id, steps) {
  return html`<form method="post" action="/action/resolve" class="actions resolve-form">${csrfField(ctx)}${backField(ctx)}
<input type="hidden" name="task_id" value="${id}">
<label>Decision <select name="decision" required><option value="" selected disabled>choose what happened</option>${DECISIONS.map((d) => html`<option value="${d}">${d}</option>`)}</select></label>
<label>Step <select name="step"><option value="">(the only step in doubt)</option>${steps.map((s) => html`<option value="${s}">${s}</option>`)}</select></label>
<label>Evidence (JSON object, kept in the event log: what you checked, and what you found) <textarea name="evidence" rows="3" required placeholder='{"checked": "the payments dashboard, by the idempotency key", "found": "charge ch_123"}'></textarea></label>
<button>Resolve as ${ctx.role}</button></form>`;
}

async function task(ctx, idText) {
  const { caps, sql } = ctx;
  const id = taskId(idText);
  if (!id) return layout(ctx, 'Task', html`<p>Not a task id.</p>`);
  if (!caps.tasks) return layout(ctx, `Task ${id}`, html`<p>Role ${ctx.role} may not read tasks.</p>`);
  const t = (await ctx.query(sql.task, [id])).rows[0];
  if (!t) return layout(ctx, `Task ${id}`, html`<p>No such task (or it is no longer retained).</p>`);
  const parts = [];
  const unfinished = LIVE_STATES.includes(t.state);
  parts.push(html`<dl class="facts" id="task-facts" data-live>
<dt>state</dt><dd id="task-state"><span class="state ${t.state}">${t.state}</span>${t.stop_code ? html` (${t.stop_code})` : ''}</dd>
<dt>queue</dt><dd><a href="/queue/${encodeURIComponent(t.queue_name)}">${t.queue_name}</a> partition ${t.partition_key}</dd>
<dt>class</dt><dd>${t.class}</dd><dt>attempt</dt><dd>${t.attempt} of ${t.max_attempts}</dd>
<dt>fence</dt><dd>${t.fence}</dd><dt>version</dt><dd>${t.version}</dd><dt>priority</dt><dd>${t.priority}</dd>
<dt>owner</dt><dd>${t.owner || ''}</dd><dt>progress</dt><dd>${t.progress || ''}</dd>
<dt>progress moved</dt><dd id="progress-at">${fmtTime(t.progress_at)}</dd>
<dt>run at</dt><dd>${fmtTime(t.run_at)}</dd><dt>created</dt><dd>${fmtTime(t.created_at)}</dd>
<dt>lease until</dt><dd>${fmtTime(t.lease_until)}</dd><dt>heartbeat</dt><dd>${fmtTime(t.heartbeat_at)}</dd>
<dt>finished</dt><dd>${fmtTime(t.finished_at)}</dd><dt>idempotency key</dt><dd>${t.idempotency_key || ''}</dd>
<dt>concurrency key</dt><dd>${t.concurrency_key || ''}</dd><dt>steps in doubt</dt><dd>${t.steps_in_doubt}</dd>
<dt>parent</dt><dd>${taskLink(t.parent_id)}</dd>
</dl>`);

  let pkgSteps = [];
  if (t.state === 'needs_review' && caps.package) {
    const p = (await ctx.query(sql.package, [id])).rows[0];
    pkgSteps = (p.package.unknown_side_effects || []).map((u) => u.step);
    parts.push(html`<section id="package"><h2>Recovery package</h2>${packageView(p.package, p.text)}
${caps.resolve ? resolveForm(ctx, id, pkgSteps) : ''}</section>`);
  }

  if (t.state === 'failed' && caps.replayChosen) {
    parts.push(html`<form method="post" action="/action/replay_tasks" class="actions" id="replay-task">${csrfField(ctx)}${backField(ctx)}
<input type="hidden" name="task_id" value="${id}">
${reasonField('Why replay it now (for the console\'s audit log)', 'note')}<button>Replay this task</button></form>`);
  }

  if (unfinished && (caps.quarantine || caps.cancel || caps.migrate || caps.expire)) {
    parts.push(html`<details class="actions" id="task-actions"><summary>Runbook actions</summary>
${caps.expire && t.state === 'running'
      ? html`<form method="post" action="/action/expire_lease">${csrfField(ctx)}${backField(ctx)}<input type="hidden" name="task_id" value="${id}">
${reasonField()}<button>End the lease now (a hung worker)</button></form>`
      : ''}
${caps.quarantine && t.state !== 'needs_review'
      ? html`<form method="post" action="/action/quarantine">${csrfField(ctx)}${backField(ctx)}<input type="hidden" name="task_id" value="${id}">
${reasonField()}<button>Quarantine (to the dead letters)</button></form>`
      : ''}
${caps.cancel && t.state !== 'needs_review'
      ? html`<form method="post" action="/action/cancel">${csrfField(ctx)}${backField(ctx)}<input type="hidden" name="task_id" value="${id}">
${reasonField()}<button>Cancel</button></form>`
      : ''}
${caps.migrate
      ? html`<form method="post" action="/action/migrate">${csrfField(ctx)}${backField(ctx)}<input type="hidden" name="task_id" value="${id}">
<label>From versions <input name="from" value="${t.versions ? JSON.stringify(t.versions) : '{}'}" required></label>
<label>To versions <input name="to" value="{}" required></label>
<label>Evidence (JSON object, kept in the event log: what you checked) <input name="evidence" required placeholder='{"checked": "workers of workflow 2 are deployed", "change": "CHG-1"}'></label>
<label><input type="checkbox" name="dry_run" value="1" checked> dry run</label>
<button>Migrate versions</button></form>`
      : ''}</details>`);
  }

  if (t.waits && Object.keys(t.waits).length) {
    const rows = Object.entries(t.waits).map(([name, w]) => ({
      name,
      kind: w.kind,
      status: w.status,
      since: w.at,
      until: w.until,
      task_id: w.task_id ? taskLink(w.task_id) : '',
      args: w.args === undefined ? '' : JSON.stringify(w.args),
      outcome: w.outcome === undefined ? '' : JSON.stringify(w.outcome),
    }));
    parts.push(html`<h2>Waits</h2>${table(['name', 'kind', 'status', 'since', 'until', 'task_id', 'args', 'outcome'], rows, { id: 'waits' })}`);
    // an event a person gives (an approval): emitted from here
    const awaited = Object.values(t.waits).filter((w) => w.kind === 'event' && w.status === 'waiting' && w.args?.event);
    if (caps.emit)
      for (const w of awaited) parts.push(emitForm(ctx, w.args.queue || t.queue_name, w.args.event, 'emit-awaited'));
  }

  const tree = await childrenTree(ctx, id, 1, new Set([id]));
  if (tree) parts.push(html`<h2>Children</h2><div id="children">${tree}</div>`);

  if (caps.steps) {
    const steps = (await ctx.query(sql.steps, [id])).rows;
    parts.push(html`<h2>Steps</h2>${table(
      ['step', 'state', 'class', 'version', 'attempt', 'idempotency_key', 'receipt', 'effect_id', 'error_class', 'compensates', 'updated_at'],
      steps,
      { id: 'steps', empty: 'no steps' },
    )}`);
  }

  parts.push(html`<h2>Payload</h2><div id="payload">${pre(t.payload)}</div>
<h2>Result</h2>${pre(t.result)}
${t.last_error ? html`<h2>Last error</h2>${pre(t.last_error)}` : ''}
<h2>Checkpoint (version ${t.checkpoint_version})</h2>${pre(t.checkpoint)}
<h2>Versions</h2>${pre(t.versions_text)}${t.workflow_version ? html`<p>workflow version ${t.workflow_version}</p>` : ''}
${t.metadata ? html`<h2>Metadata</h2>${pre(t.metadata)}` : ''}`);

  if (caps.events) {
    const ev = (await ctx.query(sql.events, [id])).rows;
    parts.push(html`<h2>Timeline</h2>${timelineChart(ev, { end: unfinished ? new Date() : null })}
${table(['seq', 'at', 'kind', 'state', 'fence', 'actor', 'role', 'step', 'detail'], ev, { id: 'timeline' })}`);
  }
  return layout(ctx, `Task ${id}`, parts);
}

// ---------------------------------------------------------------- review

async function review(ctx) {
  const { caps, sql, url } = ctx;
  if (!caps.review) return layout(ctx, 'Review', html`<p>Role ${ctx.role} may not read the review queue.</p>`);
  const after = taskId(url.searchParams.get('after'));
  const queueName = url.searchParams.get('queue') || null;
  const rows = (await ctx.query(sql.review, [after, queueName, 200])).rows;
  const byTask = new Map();
  for (const r of rows) {
    if (!byTask.has(r.task_id)) {
      if (byTask.size === 20) break;
      byTask.set(r.task_id, []);
    }
    byTask.get(r.task_id).push(r);
  }
  const parts = [html`<p>${byTask.size ? '' : 'No task needs a person.'}${queueName ? html` Queue ${queueName} only: <a href="/review">all queues</a>.` : ''}</p>`];
  for (const [id, steps] of byTask) {
    const first = steps[0];
    let body = '';
    let stepNames = steps.map((s) => s.step).filter(Boolean);
    if (caps.package) {
      const p = (await ctx.query(sql.package, [id])).rows[0];
      if (p && p.package) {
        stepNames = (p.package.unknown_side_effects || []).map((u) => u.step);
        body = packageView(p.package, p.text);
      }
    }
    parts.push(html`<section class="review-item" data-task="${id}"><h2>${caps.resolve ? html`<input type="checkbox" name="task_id" value="${id}" form="resolve-chosen" aria-label="choose ${id}"> ` : ''}Task ${taskLink(id)} in ${first.queue_name}</h2>
<p>Since ${fmtTime(first.since)}: ${first.reason}${first.decided ? html` (${first.decided})` : ''}; last owner ${first.last_owner || ''}, attempt ${first.attempt}.</p>
${table(['step', 'step_class', 'step_state', 'idempotency_key', 'receipt'], steps.filter((s) => s.step), { empty: 'no step in doubt (the task itself is in review)' })}
${body}${caps.resolve ? resolveForm(ctx, id, stepNames) : ''}</section>`);
  }
  if (caps.resolve && byTask.size > 1)
    parts.splice(1, 0, html`<details class="actions" id="resolve-chosen-actions"><summary>Decide for the chosen tasks at once</summary>
<form method="post" action="/action/resolve_many" id="resolve-chosen">${csrfField(ctx)}${backField(ctx)}
<label>Decision <select name="decision" required><option value="" selected disabled>choose what happened</option>${DECISIONS.map((d) => html`<option value="${d}">${d}</option>`)}</select></label>
<label>Step (empty: each task's only step in doubt) <input name="step" maxlength="52"></label>
<label>Evidence (JSON object, kept in each task's event log: what you checked, and what you found) <textarea name="evidence" rows="3" required placeholder='{"checked": "the mail log of each, by idempotency key", "found": "none sent"}'></textarea></label>
<button>Decide for the chosen tasks</button></form></details>`);
  const ids = [...byTask.keys()];
  if (ids.length === 20) parts.push(html`<p><a href="/review?after=${ids[ids.length - 1]}${queueName ? `&queue=${encodeURIComponent(queueName)}` : ''}">More</a></p>`);
  return layout(ctx, 'Review', parts);
}

// ---------------------------------------------------------------- the rest

async function schedules(ctx) {
  const { caps, sql } = ctx;
  const parts = [];
  if (caps.schedules) {
    const rows = (await ctx.query(sql.schedules)).rows;
    const op = (r, name, label) => html`<form method="post" action="/action/schedule" class="inline">${csrfField(ctx)}${backField(ctx)}
<input type="hidden" name="schedule" value="${r.schedule_name}"><input type="hidden" name="op" value="${name}">
<input name="reason" required maxlength="500" placeholder="why" aria-label="why ${label}"><button>${label}</button></form>`;
    parts.push(table([...(caps.scheduleOps ? ['actions'] : []), 'schedule_name', 'cron', 'timezone', 'queue_name', 'next_run', 'paused_at', 'last_run', 'last_task_id', 'last_error', 'last_error_at', 'payload'],
      rows.map((r) => ({
        ...r,
        last_task_id: taskLink(r.last_task_id),
        actions: html`${r.paused_at ? op(r, 'resume', 'Resume') : op(r, 'pause', 'Pause')}${op(r, 'trigger', 'Run now')}`,
      })), { id: 'schedules', empty: 'no schedules' }));
  } else if (caps.scheduleStats) {
    const rows = (await ctx.query(sql.scheduleStats)).rows;
    parts.push(table(['queue_name', 'schedules', 'due', 'oldest_due_age'], rows, { id: 'schedule-stats', empty: 'no schedules' }));
  }
  return layout(ctx, 'Schedules', parts);
}

// ---------------------------------------------------------------- search

// "customer = 711", "order.id = \"A-1\"": a JSON object holding value at
// that path, for containment (@>); a value that is not JSON is a string
function pathMatch(text, what) {
  if (!text) return null;
  const m = /^\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*=\s*(.+?)\s*$/.exec(text);
  if (!m) throw new UserError(`${what} must read path = value, such as customer = 711`);
  let value;
  try {
    value = JSON.parse(m[2]);
  } catch {
    value = m[2];
  }
  return JSON.stringify(m[1].split('.').reduceRight((inner, key) => ({ [key]: inner }), value));
}

// a time of the form given, in UTC
function utcArg(text, what) {
  if (!text) return null;
  if (!/^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?)?$/.test(text)) throw new UserError(`${what} must be a date and time (UTC)`);
  return `${text.replace('T', ' ')}+00`;
}

const SEARCH_FIELDS = ['queue', 'state', 'key', 'worker', 'payload', 'metadata', 'error', 'from', 'to'];

async function search(ctx) {
  const { caps, sql, url } = ctx;
  if (!caps.tasks) return layout(ctx, 'Search', html`<p>Role ${ctx.role} may not read tasks.</p>`);
  const q = Object.fromEntries(SEARCH_FIELDS.map((f) => [f, (url.searchParams.get(f) || '').trim()]));
  const id = (url.searchParams.get('id') || '').trim();
  const form = html`<form method="get" action="/search" class="search" id="search-form">
<label>Task id <input name="id" value="${id}" inputmode="numeric"></label>
<label>Queue <input name="queue" value="${q.queue}"></label>
<label>State <select name="state"><option value="">any</option>${[...LIVE_STATES, ...FINISHED_STATES].map((st) => html`<option value="${st}"${st === q.state ? raw(' selected') : ''}>${st}</option>`)}</select></label>
<label>Idempotency key <input name="key" value="${q.key}"></label>
<label>Worker <input name="worker" value="${q.worker}"></label>
<label>Payload <input name="payload" value="${q.payload}" placeholder="customer = 711"></label>
<label>Metadata <input name="metadata" value="${q.metadata}" placeholder="tenant = &quot;acme&quot;"></label>
<label>Error text <input name="error" value="${q.error}"></label>
<label>Created from (UTC) <input name="from" type="datetime-local" value="${q.from}"></label>
<label>to <input name="to" type="datetime-local" value="${q.to}"></label>
<button>Search</button></form>`;
  if (id) {
    if (!taskId(id)) return layout(ctx, 'Search', [html`<p class="flash error" id="search-error">not a task id</p>`, form]);
    return layout(ctx, 'Search', [form, html`<p><a href="/task/${id}" id="search-task">Task ${id}</a></p>`]);
  }
  if (!SEARCH_FIELDS.some((f) => q[f])) return layout(ctx, 'Search', form);
  let params;
  try {
    if (q.state && ![...LIVE_STATES, ...FINISHED_STATES].includes(q.state)) throw new UserError(`no state ${q.state}`);
    const before = /^([0-9T:.\-+Z ]{10,40}),([0-9]{1,19})$/.exec(url.searchParams.get('before') || '');
    params = [q.queue || null, q.state || null, q.key || null, q.worker || null,
      pathMatch(q.payload, 'the payload'), pathMatch(q.metadata, 'the metadata'), q.error || null,
      utcArg(q.from, 'from'), utcArg(q.to, 'to'), before ? before[1] : null, before ? before[2] : null, PAGE];
  } catch (err) {
    if (!(err instanceof UserError)) throw err;
    return layout(ctx, 'Search', [html`<p class="flash error" id="search-error">${err.message}</p>`, form]);
  }
  const rows = (await ctx.query(q.key && sql.searchByKey ? sql.searchByKey : sql.search, params)).rows;
  const next = new URLSearchParams(SEARCH_FIELDS.filter((f) => q[f]).map((f) => [f, q[f]]));
  if (rows.length === PAGE) next.set('before', `${rows[rows.length - 1].created_at_text},${rows[rows.length - 1].task_id}`);
  const choose = caps.cancel && rows.some((r) => LIVE_STATES.includes(r.state));
  return layout(ctx, 'Search', [form, html`<h2>Tasks found</h2>
${table([...(choose ? ['choose'] : []), 'task_id', 'queue_name', 'state', 'attempt', 'idempotency_key', 'owner', 'payload', 'last_error', 'created_at'],
    rows.map((r) => ({
      ...r,
      choose: LIVE_STATES.includes(r.state) ? html`<input type="checkbox" name="task_id" value="${r.task_id}" form="cancel-chosen" aria-label="choose ${r.task_id}">` : '',
      task_id: taskLink(r.task_id),
    })), { id: 'search-results', empty: 'no task retained matches' })}
${choose ? html`<form method="post" action="/action/cancel_many" class="actions" id="cancel-chosen">${csrfField(ctx)}${backField(ctx)}
${reasonField()}<button>Cancel the chosen tasks</button></form>` : ''}
${rows.length === PAGE ? html`<p><a href="/search?${next.toString()}" id="search-older">Older</a></p>` : ''}`]);
}

async function stuck(ctx) {
  const { caps, sql } = ctx;
  if (!caps.stuck) return layout(ctx, 'Stuck tasks', html`<p>Role ${ctx.role} may not read durable.stuck_tasks.</p>`);
  const rows = (await ctx.query(sql.stuck)).rows;
  return layout(ctx, 'Stuck tasks', html`<p>Running tasks whose lease is renewed while their progress has not moved
for longer than their queue's progress_timeout. Open one to end its lease.</p>
${table(['task_id', 'queue_name', 'owner', 'progress', 'progress_at', 'without_progress', 'progress_timeout', 'alarmed'],
    rows.map((r) => ({ ...r, task_id: taskLink(r.task_id), without_progress: age(r.without_progress_s) })),
    { id: 'stuck', empty: 'no task is stuck' })}`);
}

// spend budgets and rate limits: what is left of each, and what waits for room
async function flow(ctx) {
  const { caps, sql } = ctx;
  const parts = [];
  if (caps.budgets) {
    const rows = (await ctx.query(sql.budgets)).rows;
    parts.push(html`<h2>Spend budgets</h2><p class="muted">Reserved is what started steps hold and have not settled;
a reservation that stays while nothing runs is a step left in doubt. A task's own limit is named task:&lt;id&gt;.</p>
${table(['name', 'amount', 'period', 'period_start', 'reserved', 'spent', 'remaining', 'used_percent'], rows, { id: 'budgets', empty: 'no spend budget' })}`);
  }
  if (caps.rateLimits) {
    const rows = (await ctx.query(sql.rateLimits)).rows;
    parts.push(html`<h2>Rate limits</h2><p class="muted">Room is what the most used key's bucket can take now; deferred, the tasks
a claim put off for want of room that are not due yet.</p>
${table(['name', 'rate', 'per', 'burst', 'keys', 'room', 'deferred'], rows, { id: 'rate-limits', empty: 'no rate limit' })}`);
  }
  if (!parts.length) parts.push(html`<p>Role ${ctx.role} may read neither durable.budgets nor durable.rate_limits.</p>`);
  return layout(ctx, 'Budgets and limits', parts);
}

async function waits(ctx) {
  const { caps, sql, url } = ctx;
  const parts = [];
  if (caps.waitStats) {
    const rows = (await ctx.query(sql.waitStats)).rows;
    parts.push(html`<h2>Per queue</h2>${table(['queue_name', 'kind', 'waiting', 'oldest_wait', 'with_timeout'], rows, { id: 'wait-stats', empty: 'no task waits' })}`);
  }
  if (caps.waits) {
    const after = taskId(url.searchParams.get('after'));
    const rows = (await ctx.query(sql.waits, [after, 200])).rows;
    parts.push(html`<h2>Waiting tasks</h2>${table(['task_id', 'queue_name', 'wait_name', 'kind', 'event', 'event_queue', 'since', 'until', 'waited'],
      rows.map((r) => ({ ...r, task_id: taskLink(r.task_id), waited: age(r.waited_s) })), { id: 'waits', empty: 'no task waits' })}
${rows.length === 200 ? html`<p><a href="/waits?after=${rows[rows.length - 1].task_id}">More</a></p>` : ''}`);
  }
  return layout(ctx, 'Waits', parts);
}

async function reconciler(ctx) {
  const { caps, sql } = ctx;
  if (!caps.status) return layout(ctx, 'Reconciler', html`<p>Role ${ctx.role} may not read durable.status.</p>`);
  const st = (await ctx.query(caps.statusFailures ? sql.statusFull : sql.statusPublic)).rows[0];
  const parts = [html`<dl class="facts" id="status" data-live>
<dt>preloaded</dt><dd>${String(st.preloaded)}</dd><dt>reconciler</dt><dd>${st.reconciler}</dd>
<dt>pid</dt><dd>${st.reconciler_pid || ''}</dd><dt>database</dt><dd>${st.reconciler_database || ''}</dd>
<dt>node</dt><dd>${st.node_id}</dd><dt>failing parts</dt><dd>${st.failing_parts}</dd><dt>failing since</dt><dd>${fmtTime(st.failing_since)}</dd></dl>`];
  if (caps.statusFailures) {
    parts.push(html`<h2>Failing parts</h2>${table(['part', 'sqlstate', 'error', 'failures', 'failing_since', 'last_failed_at'], st.failures || [], { id: 'failures', empty: 'every part of the tick runs' })}`);
  }
  return layout(ctx, 'Reconciler', parts);
}

async function workers(ctx) {
  const { caps, sql } = ctx;
  if (!caps.workers) return layout(ctx, 'Workers and versions', html`<p>Role ${ctx.role} may not read durable.workers.</p>`);
  const rows = (await ctx.query(sql.workers)).rows;
  const parts = [html`<h2>Workers</h2>${table(['queue_name', 'worker', 'versions', 'role', 'first_claim_at', 'last_claim_at', 'version_timeout', 'alive'],
    rows.map((r) => ({ ...r, versions: r.versions ? JSON.stringify(r.versions) : 'any (did not say)', alive: r.alive ? 'yes' : 'no' })), { id: 'workers', empty: 'no worker has claimed yet' })}`];
  if (caps.tasks) {
    const vu = (await ctx.query(sql.versionUnavailable)).rows;
    parts.push(html`<h2>Tasks waiting for versions no worker runs</h2>
${table(['task_id', 'queue_name', 'partition_key', 'versions', 'run_at'], vu.map((r) => ({ ...r, task_id: taskLink(r.task_id), versions: JSON.stringify(r.versions) })), { id: 'version-unavailable', empty: 'none' })}
${caps.migrate && vu.length ? html`<p class="muted">Open a task to migrate it to versions a worker runs (dry run first), or deploy a worker that runs its versions and resolve it with retry.</p>` : ''}
${caps.migrateQueue && vu.length ? html`<details class="actions" id="migrate-queue-actions"><summary>Migrate a queue's tasks at once</summary>
<form method="post" action="/action/migrate_queue" id="migrate-queue">${csrfField(ctx)}${backField(ctx)}
<label>Queue <select name="queue">${[...new Set(vu.map((r) => r.queue_name))].map((q) => html`<option value="${q}">${q}</option>`)}</select></label>
<label>From versions <input name="from" required placeholder='{"workflow": "1"}'></label>
<label>To versions <input name="to" required placeholder='{"workflow": "2"}'></label>
<label>Evidence (JSON object: what you checked) <input name="evidence" required placeholder='{"checked": "workers of workflow 2 are deployed", "change": "CHG-1"}'></label>
<label><input type="checkbox" name="dry_run" value="1" checked> dry run</label>
<button>Migrate the queue's tasks</button></form></details>` : ''}`);
  }
  return layout(ctx, 'Workers and versions', parts);
}

// ---------------------------------------------------------------- /metrics

export async function metrics(entry) {
  if (!entry.caps.prometheusPresent)
    return {
      status: 404,
      type: 'text/plain; charset=utf-8',
      body: `durable_metrics_prometheus() does not exist in this database (durable ${entry.ext.version}): it comes with the release of issue 24's counters. Until then scrape durable.queue_stats with postgres_exporter.\n`,
    };
  if (!entry.caps.prometheus)
    return { status: 403, type: 'text/plain; charset=utf-8', body: `role "${entry.user}" may not execute durable_metrics_prometheus()\n` };
  const r = await entry.pool.query(entry.sql.prometheus);
  return { status: 200, type: 'text/plain; version=0.0.4; charset=utf-8', body: r.rows[0].text || '' };
}
