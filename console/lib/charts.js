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
      <p class="muted">Collecting samples: the chart fills as the console samples the queues.</p></figure>`;
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
  const minutes = ((t1 - t0) / 60000).toFixed(1);
  return html`<figure class="chart"><figcaption>${title}</figcaption>
<svg viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${title}">
  <line x1="${left}" y1="${top + h}" x2="${left + w}" y2="${top + h}" stroke="#999"/>
  <line x1="${left}" y1="${top}" x2="${left}" y2="${top + h}" stroke="#999"/>
  <line x1="${left}" y1="${top}" x2="${left + w}" y2="${top}" stroke="#eee"/>
  <text x="${left - 4}" y="${top + 4}" text-anchor="end" font-size="10">${fmt(ymax)}${unit}</text>
  <text x="${left - 4}" y="${top + h}" text-anchor="end" font-size="10">0</text>
  <text x="${left}" y="${height - 6}" font-size="10">-${minutes} min</text>
  <text x="${left + w}" y="${height - 6}" text-anchor="end" font-size="10">now</text>
  ${lines}
</svg>
<div class="legends">${legend}</div></figure>`;
}
