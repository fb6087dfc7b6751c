// Line charts as plain SVG, drawn on the server: no script, nothing inline
// that the Content-Security-Policy would have to allow.

import { html } from './html.js';

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];

function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function fmt(v) {
  if (v >= 100 || Number.isInteger(v)) return String(Math.round(v));
  return v.toFixed(v >= 10 ? 1 : 2);
}

export function lineChart(title, series, { width = 560, height = 180, unit = '' } = {}) {
  const left = 48;
  const right = 8;
  const top = 22;
  const bottom = 22;
  const pts = series.flatMap((s) => s.points);
  if (pts.length < 2) {
    return html`<figure class="chart"><figcaption>${title}</figcaption>
      <p class="muted">Collecting samples: the chart fills as the queues are sampled.</p></figure>`;
  }
  const t0 = Math.min(...pts.map((p) => p[0]));
  const t1 = Math.max(...pts.map((p) => p[0]));
  const ymax = niceMax(Math.max(...pts.map((p) => p[1])));
  const w = width - left - right;
  const h = height - top - bottom;
  const x = (t) => left + (t1 === t0 ? 0 : ((t - t0) / (t1 - t0)) * w);
  const y = (v) => top + h - (v / ymax) * h;
  const lines = series
    .filter((s) => s.points.length > 0)
    .map((s, i) => {
      const d = s.points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ');
      return html`<polyline fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="1.5" points="${d}"><title>${s.name}</title></polyline>`;
    });
  const legend = series
    .filter((s) => s.points.length > 0)
    .map((s, i) => html`<span class="legend"><span class="swatch c${i % COLORS.length}"></span>${s.name}</span>`);
  // the span the x axis covers, up to its last point
  const span = t1 - t0 > 2 * 3600000 ? `${((t1 - t0) / 3600000).toFixed(1)} h` : `${((t1 - t0) / 60000).toFixed(1)} min`;
  return html`<figure class="chart"><figcaption>${title}</figcaption>
<svg viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${title}">
  <line x1="${left}" y1="${top + h}" x2="${left + w}" y2="${top + h}" stroke="#999"/>
  <line x1="${left}" y1="${top}" x2="${left}" y2="${top + h}" stroke="#999"/>
  <line x1="${left}" y1="${top}" x2="${left + w}" y2="${top}" stroke="#eee"/>
  <text x="${left - 4}" y="${top + 4}" text-anchor="end" font-size="10">${fmt(ymax)}${unit}</text>
  <text x="${left - 4}" y="${top + h}" text-anchor="end" font-size="10">0</text>
  <text x="${left}" y="${height - 6}" font-size="10">-${span}</text>
  <text x="${left + w}" y="${height - 6}" text-anchor="end" font-size="10">now</text>
  ${lines}
</svg>
<div class="legends">${legend}</div></figure>`;
}

// A task's timeline drawn on a time axis from its events: a lane for the
// task, colored by the state each event left it in, then a lane for each
// step and each wait, with a mark at each of its events.  The title of
// every shape says what it is (a browser shows it on hover).
const STATE_COLORS = {
  ready: '#9e9e9e', running: '#1f77b4', waiting: '#ff7f0e', needs_review: '#d62728',
  completed: '#2ca02c', failed: '#7f0000', cancelled: '#333333',
};
const MARK_COLORS = {
  step_planned: '#9e9e9e', step_started: '#1f77b4', step_committed: '#2ca02c', receipt_recorded: '#17becf',
  step_unknown: '#ff7f0e', step_failed: '#d62728', step_replanned: '#9467bd', step_compensated: '#8c564b',
};

// an event's detail, as an object (the page reads it pretty-printed)
function detailOf(e) {
  if (!e.detail || typeof e.detail === 'object') return e.detail;
  try {
    return JSON.parse(e.detail);
  } catch {
    return null;
  }
}

export function timelineChart(events, { end, width = 900 } = {}) {
  if (!events.length) return '';
  const left = 150;
  const right = 12;
  const lane = 18;
  const at = (e) => new Date(e.at).getTime();
  const t0 = at(events[0]);
  const t1 = Math.max(end ? end.getTime() : 0, ...events.map(at), t0 + 1);
  const w = width - left - right;
  const x = (t) => left + ((t - t0) / (t1 - t0)) * w;
  const lanes = [];
  const laneOf = new Map();
  const laneFor = (name) => {
    if (!laneOf.has(name)) {
      laneOf.set(name, lanes.length);
      lanes.push(name);
    }
    return laneOf.get(name);
  };
  laneFor('task');
  const segments = events.map((e, i) => {
    const from = at(e);
    const to = i + 1 < events.length ? at(events[i + 1]) : t1;
    return html`<rect class="state ${e.state}" x="${x(from).toFixed(1)}" y="4" width="${Math.max(1, x(to) - x(from)).toFixed(1)}" height="${lane - 6}" fill="${STATE_COLORS[e.state] || '#ccc'}"><title>${e.state} after ${e.kind} (event ${e.seq}, ${new Date(from).toISOString()})</title></rect>`;
  });
  const marks = [];
  for (const e of events) {
    const detail = detailOf(e);
    const wait = detail ? detail.wait || detail.child : null;
    const name = e.step ? `step ${e.step}` : wait ? `wait ${wait}` : null;
    if (!name) continue;
    const y = laneFor(name) * lane + lane / 2;
    marks.push(html`<circle class="${e.step ? 'step-event' : 'wait-event'}" cx="${x(at(e)).toFixed(1)}" cy="${y}" r="4" fill="${MARK_COLORS[e.kind] || '#555'}"><title>${name}: ${e.kind} (event ${e.seq}, ${new Date(at(e)).toISOString()})</title></circle>`);
  }
  const height = lanes.length * lane + 24;
  const seconds = (t1 - t0) / 1000;
  const span = seconds < 120 ? `${seconds.toFixed(1)} s` : seconds < 7200 ? `${(seconds / 60).toFixed(1)} min` : `${(seconds / 3600).toFixed(1)} h`;
  return html`<figure class="chart timeline" id="timeline-chart" data-live><figcaption>Timeline: ${events.length} events over ${span}</figcaption>
<svg viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="the task's timeline">
  ${lanes.map((name, i) => html`<text x="${left - 6}" y="${i * lane + lane / 2 + 4}" text-anchor="end" font-size="11">${name}</text>
  <line x1="${left}" y1="${(i + 1) * lane}" x2="${left + w}" y2="${(i + 1) * lane}" stroke="#eee"/>`)}
  ${segments}${marks}
  <text x="${left}" y="${height - 6}" font-size="10">${new Date(t0).toISOString().replace('T', ' ').slice(0, 19)} UTC</text>
  <text x="${left + w}" y="${height - 6}" text-anchor="end" font-size="10">+${span}</text>
</svg></figure>`;
}
