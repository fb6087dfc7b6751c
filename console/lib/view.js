// What every page and action of the console shares: the states and
// decisions it knows, reading a form's arguments, the errors it shows, and
// the layout, tables and forms every page is made of.

import { html, raw, isSafe, fmtJson, fmtTime } from './html.js';

export const LIVE_STATES = ['ready', 'waiting', 'running', 'needs_review'];

export const FINISHED_STATES = ['completed', 'failed', 'cancelled'];

export const PAGE = 50;

export const DECISIONS = ['mark_committed', 'mark_not_executed', 'mark_failed', 'retry', 'cancel'];

const ID_RE = /^[0-9]{1,19}$/;

export function taskId(value) {
  if (typeof value !== 'string' || !ID_RE.test(value)) return null;
  return BigInt(value) <= 9223372036854775807n ? value : null;
}

export function intOrNull(value, { min = -2147483648, max = 2147483647 } = {}) {
  if (value === null || value === undefined || value === '') return null;
  if (!/^-?[0-9]{1,10}$/.test(value)) throw new UserError(`"${value}" is not a whole number`);
  const n = Number(value);
  if (n < min || n > max) throw new UserError(`${n} is outside ${min}..${max}`);
  return n;
}

export class UserError extends Error {}

export function jsonArg(text, what, { object = true } = {}) {
  let v;
  try {
    v = JSON.parse(text);
  } catch {
    throw new UserError(`${what} is not valid JSON`);
  }
  if (object && (v === null || typeof v !== 'object' || Array.isArray(v)))
    throw new UserError(`${what} must be a JSON object`);
  return text;
}

export function pgError(err) {
  if (err instanceof UserError) return err.message;
  let text = err.message || String(err);
  if (err.code) text = `${err.code}: ${text}`;
  if (err.detail) text += ` (${err.detail})`;
  if (err.hint) text += ` Hint: ${err.hint}`;
  return text;
}

export function safeBack(value) {
  // only a path of this console, never another site
  if (typeof value === 'string' && /^\/[A-Za-z0-9_\-/?=&%.:+,]*$/.test(value) && !value.startsWith('//')) return value;
  return '/';
}

function nav(ctx) {
  const c = ctx.caps;
  const items = [
    ['/', 'Overview', c.overview || c.counters],
    ['/review', 'Review', c.review],
    ['/schedules', 'Schedules', c.schedules || c.scheduleStats],
    ['/search', 'Search', c.tasks],
    ['/stuck', 'Stuck', c.stuck],
    ['/flow', 'Budgets and limits', c.budgets || c.rateLimits],
    ['/waits', 'Waits', c.waits || c.waitStats],
    ['/reconciler', 'Reconciler', c.status],
    ['/workers', 'Workers and versions', c.workers],
    ['/metrics', 'Metrics', c.prometheus],
  ];
  return items.filter((i) => i[2]).map((i) => html`<a href="${i[0]}">${i[1]}</a>`);
}

export function csrfField(ctx) {
  return html`<input type="hidden" name="_csrf" value="${ctx.session.csrf}">`;
}

export function backField(ctx) {
  return html`<input type="hidden" name="back" value="${ctx.url.pathname + ctx.url.search}">`;
}

function flash(ctx) {
  const f = ctx.session.flash;
  if (!f) return '';
  return html`<div class="flash ${f.kind}" role="status" id="flash">${f.text}${f.rows ? table(f.rows.columns, f.rows.rows) : ''}</div>`;
}

export function layout(ctx, title, body, { live = true } = {}) {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title} · durable console</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/static/style.css"><script src="/static/app.js" defer></script></head>
<body${live ? raw(' data-live="5"') : ''}>
<header><span class="brand">durable</span> <nav>${nav(ctx)}</nav>
<form method="post" action="/logout" class="logout">${csrfField(ctx)}<span class="who">${ctx.role}</span> <button>Log out</button></form></header>
<main><h1>${title}</h1>${flash(ctx)}${body}</main></body></html>`;
}

export function cell(v) {
  if (v === null || v === undefined) return '';
  if (v instanceof Date || v === Infinity || v === -Infinity) return fmtTime(v);
  if (isSafe(v)) return v;
  if (Array.isArray(v)) return v.map((x) => (typeof x === 'object' ? JSON.stringify(x) : String(x))).join(', ');
  if (typeof v === 'object') return JSON.stringify(v);
  return v;
}

// a table; with an id it is a region the page updates by itself (app.js)
export function table(columns, rows, { id, empty = 'none', labels = {} } = {}) {
  const live = id ? html` id="${id}" data-live` : '';
  if (!rows.length) return html`<p class="muted"${live}>${empty}</p>`;
  return html`<table${live}><thead><tr>${columns.map((c) => html`<th>${labels[c] ?? c}</th>`)}</tr></thead>
<tbody>${rows.map((r) => html`<tr>${columns.map((c) => html`<td data-field="${c}">${cell(r[c])}</td>`)}</tr>`)}</tbody></table>`;
}

export function pre(text, cls = 'json') {
  if (text === null || text === undefined) return html`<span class="muted">null</span>`;
  return html`<pre class="${cls}">${typeof text === 'string' ? text : fmtJson(text)}</pre>`;
}

export function taskLink(id) {
  return id ? html`<a href="/task/${id}">${id}</a>` : '';
}

export function age(seconds) {
  if (seconds === null || seconds === undefined) return '';
  const s = Number(seconds);
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

export function reasonField(label = 'Reason (kept in the event log)', name = 'reason', required = true) {
  return html`<label>${label} <input name="${name}" ${required ? raw('required') : ''} maxlength="500"></label>`;
}

// an event of a queue, for a person to give (an approval, a webhook that
// never came); event NULL lets the operator name it
export function emitForm(ctx, queue, event, id) {
  return html`<form method="post" action="/action/emit" class="actions" id="${id}">${csrfField(ctx)}${backField(ctx)}
<input type="hidden" name="queue" value="${queue}">
${event ? html`<input type="hidden" name="event" value="${event}"><span>Emit event <code>${event}</code> of queue ${queue}</span>`
    : html`<label>Event <input name="event" required maxlength="255"></label>`}
<label>Payload (JSON) <input name="payload" required placeholder='{"approved": true, "by": "ann"}'></label>
${reasonField('Why (for the console\'s audit log)', 'note')}<button>Emit</button></form>`;
}
