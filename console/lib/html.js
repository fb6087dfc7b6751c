// HTML built by one tagged template that escapes every value it is given.
// Only fragments made by html`` itself (or raw(), for nothing but constant
// markup) pass through unescaped, so a payload holding <script> is text.

const SAFE = Symbol('safe html');

class Safe {
  constructor(text) {
    this[SAFE] = text;
  }
  toString() {
    return this[SAFE];
  }
}

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

export function escape(value) {
  return String(value).replace(/[&<>"'`]/g, (c) => ESCAPES[c]);
}

function render(value) {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Safe) return value[SAFE];
  if (Array.isArray(value)) return value.map(render).join('');
  if (value instanceof Date) return escape(fmtTime(value));
  return escape(value);
}

export function html(strings, ...values) {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1];
  return new Safe(out);
}

// constant markup only: never pass a value that came from a user or the database
export function raw(text) {
  return new Safe(text);
}

export function isSafe(value) {
  return value instanceof Safe;
}

// jsonb with integers beyond 2^53 (task ids are 64-bit) parsed without losing
// digits: such integers become strings.  Strings are matched first, so a
// number inside a string is never touched.
export function parseJson(text) {
  if (text === null || text === undefined) return null;
  const safe = text.replace(/"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g, (tok) =>
    tok[0] !== '"' && /^-?\d+$/.test(tok) && !Number.isSafeInteger(Number(tok)) ? `"${tok}"` : tok,
  );
  return JSON.parse(safe);
}

export function fmtJson(value) {
  if (value === null || value === undefined) return '';
  return JSON.stringify(value, null, 2);
}

// an interval as node-postgres returns it (postgres-interval), or a number of seconds
export function fmtInterval(iv) {
  if (iv === null || iv === undefined) return '';
  if (typeof iv === 'number') return `${iv.toFixed(1)} s`;
  if (typeof iv.toPostgres === 'function') {
    const s = iv.toPostgres();
    return s === '0' ? '0 s' : s;
  }
  return String(iv);
}

export function fmtTime(t) {
  if (!t) return '';
  if (t === Infinity) return 'infinity';
  if (t === -Infinity) return '-infinity';
  const d = t instanceof Date ? t : new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}
