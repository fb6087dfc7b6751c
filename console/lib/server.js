// The console's HTTP server: sessions, CSRF, security headers, routing.
// No users of its own: a login is a PostgreSQL role, whose credentials stay
// in this process's memory (in the pool that connects as it) and nowhere else.

import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pools } from './db.js';
import { html } from './html.js';
import { Sampler } from './sampler.js';
import { action, confirmPage } from './actions.js';
import * as pages from './pages.js';
import { pgError, safeBack } from './view.js';

const STATIC_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'static');
const STATIC = {
  '/static/app.js': 'text/javascript; charset=utf-8',
  '/static/style.css': 'text/css; charset=utf-8',
};

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

// What the login page may say: a code in its URL names one of these, and
// every refusal is the same one, whatever refused it (a wrong password, a
// superuser, a role that does not exist), so that the page tells nobody
// which roles exist.  The reason goes to the audit log.
const LOGIN_ERRORS = {
  refused: 'could not log in: the role or its password was refused',
  locked: 'too many failed logins from this address: wait a while before the next try',
  expired: 'the login form expired: log in again',
};
// failed logins allowed per client address in a window, and the lockout after
const LOGIN_FAILURES = 5;
const LOGIN_WINDOW_MS = 15 * 60 * 1000;
const LOGIN_LOCK_MS = 15 * 60 * 1000;

const SESSION_COOKIE = 'durable_console_session';
const LOGIN_COOKIE = 'durable_console_login';
const MAX_BODY = 256 * 1024;

export class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function parseCookies(header) {
  const out = {};
  for (const part of (header || '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0) out[part.slice(0, i).trim()] = decodeURIComponent(part.slice(i + 1).trim());
  }
  return out;
}

function sameToken(a, b) {
  if (typeof a !== 'string' || typeof b !== 'string' || a.length !== b.length || a.length === 0) return false;
  return crypto.timingSafeEqual(Buffer.from(a), Buffer.from(b));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks = [];
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new HttpError(413, 'request too large'));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function createConsole(options = {}) {
  const opts = {
    host: '127.0.0.1',
    port: 8080,
    secureCookies: false,
    allowSuperuser: false,
    sampleIntervalMs: 5000,
    sessionIdleMs: 8 * 3600 * 1000,
    audit: (entry) => process.stdout.write(`${JSON.stringify(entry)}\n`),
    ...options,
  };
  const secret = crypto.randomBytes(32);
  const pools = new Pools(opts.databaseUrl);
  const sessions = new Map();
  const failures = new Map(); // client address -> { times: [ms], lockedUntil: ms }

  function lockedOut(client) {
    const f = failures.get(client);
    return f !== undefined && f.lockedUntil > Date.now();
  }

  // a failed login: logged with the client's address, counted against it
  function loginFailed(client, user, why, via) {
    const now = Date.now();
    const f = failures.get(client) ?? { times: [], lockedUntil: 0 };
    f.times = f.times.filter((t) => now - t < LOGIN_WINDOW_MS);
    f.times.push(now);
    if (f.times.length >= LOGIN_FAILURES) f.lockedUntil = now + LOGIN_LOCK_MS;
    failures.set(client, f);
    opts.audit({ at: new Date(now).toISOString(), action: 'login_failed', via, client, role: user, reason: why,
      locked: f.lockedUntil > now });
  }

  // a role's pool for a login or a scrape, with the same refusal for every cause
  async function logIn(req, user, password, via, openOptions) {
    const client = req.socket.remoteAddress || 'unknown';
    if (lockedOut(client)) {
      opts.audit({ at: new Date().toISOString(), action: 'login_locked_out', via, client, role: user });
      throw new HttpError(429, 'locked');
    }
    let why = null;
    if (!user) why = 'no role given';
    else if (!password && !opts.allowEmptyPassword) why = 'no password given';
    if (why === null) {
      try {
        const entry = await openRole(user, password, openOptions);
        failures.delete(client);
        return entry;
      } catch (err) {
        why = err.message;
      }
    }
    loginFailed(client, user, why, via);
    await new Promise((r) => setTimeout(r, 300));
    throw new HttpError(401, lockedOut(client) ? 'locked' : 'refused');
  }

  function cookie(name, value, maxAge) {
    const parts = [`${name}=${encodeURIComponent(value)}`, 'Path=/', 'HttpOnly', 'SameSite=Strict'];
    if (opts.secureCookies) parts.push('Secure');
    if (maxAge !== undefined) parts.push(`Max-Age=${maxAge}`);
    return parts.join('; ');
  }

  function loginToken(nonce) {
    return crypto.createHmac('sha256', secret).update(`login:${nonce}`).digest('hex');
  }

  async function endSession(id) {
    const s = sessions.get(id);
    if (!s) return;
    sessions.delete(id);
    await pools.release(s.entry);
  }

  const sweeper = setInterval(() => {
    const now = Date.now();
    for (const [id, s] of sessions) if (now - s.lastSeen > opts.sessionIdleMs) endSession(id);
    // an address's failures are kept only as long as they can count
    for (const [client, f] of failures)
      if (f.lockedUntil <= now && f.times.every((t) => now - t >= LOGIN_WINDOW_MS)) failures.delete(client);
  }, 60000);
  sweeper.unref();

  // a role's pool, opened by a login (form) or by HTTP Basic on /metrics
  async function openRole(user, password, { sample = true } = {}) {
    const entry = await pools.open(user, password);
    if (entry.ext.superuser && !opts.allowSuperuser) {
      await pools.release(entry);
      throw new HttpError(
        403,
        `role "${user}" is a superuser: log in with a role that holds durable_operator, durable_worker or pg_monitor (or start the console with --allow-superuser)`,
      );
    }
    if (sample && !entry.sampler) {
      entry.sampler = new Sampler(entry, { intervalMs: opts.sampleIntervalMs });
      entry.sampler.start();
    }
    return entry;
  }

  function send(res, status, body, type = 'text/html; charset=utf-8', extra = {}) {
    res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store', ...extra });
    res.end(body);
  }

  function redirect(res, location, extra = {}) {
    res.writeHead(303, { Location: location, 'Cache-Control': 'no-store', ...extra });
    res.end();
  }

  async function handle(req, res) {
    res.setHeader('Content-Security-Policy', CSP);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('Referrer-Policy', 'no-referrer');
    const url = new URL(req.url, 'http://console.invalid');
    const cookies = parseCookies(req.headers.cookie);

    if (req.method === 'GET' && STATIC[url.pathname]) {
      const body = fs.readFileSync(path.join(STATIC_DIR, path.basename(url.pathname)));
      res.writeHead(200, { 'Content-Type': STATIC[url.pathname], 'Cache-Control': 'max-age=300' });
      return res.end(body);
    }
    if (req.method === 'GET' && url.pathname === '/favicon.ico') {
      res.writeHead(204);
      return res.end();
    }

    // a POST must come from the console's own pages
    if (req.method === 'POST') {
      const origin = req.headers.origin;
      if (origin && origin !== 'null' && new URL(origin).host !== req.headers.host)
        throw new HttpError(403, 'cross-origin request refused');
    } else if (req.method !== 'GET' && req.method !== 'HEAD') {
      throw new HttpError(405, 'method not allowed');
    }

    if (url.pathname === '/login') {
      if (req.method === 'GET') {
        const nonce = crypto.randomBytes(24).toString('hex');
        return send(res, 200, String(pages.loginPage({ csrf: loginToken(nonce), error: LOGIN_ERRORS[url.searchParams.get('error')] })), undefined, {
          'Set-Cookie': cookie(LOGIN_COOKIE, nonce),
        });
      }
      const form = new URLSearchParams(await readBody(req));
      if (!cookies[LOGIN_COOKIE] || !sameToken(form.get('_csrf'), loginToken(cookies[LOGIN_COOKIE])))
        return redirect(res, '/login?error=expired');
      const user = (form.get('role') || '').trim();
      const password = form.get('password') || '';
      let entry;
      try {
        entry = await logIn(req, user, password, 'form');
      } catch (err) {
        if (!(err instanceof HttpError)) throw err;
        return redirect(res, `/login?error=${err.message}`);
      }
      const id = crypto.randomBytes(32).toString('hex');
      sessions.set(id, {
        id,
        role: entry.user,
        entry,
        csrf: crypto.randomBytes(32).toString('hex'),
        lastSeen: Date.now(),
        flash: null,
      });
      opts.audit({ at: new Date().toISOString(), role: entry.user, action: 'login' });
      return redirect(res, '/', { 'Set-Cookie': [cookie(SESSION_COOKIE, id), cookie(LOGIN_COOKIE, '', 0)] });
    }

    const session = cookies[SESSION_COOKIE] ? sessions.get(cookies[SESSION_COOKIE]) : undefined;

    if (url.pathname === '/metrics' && req.method === 'GET') {
      let entry = session?.entry;
      if (!entry) {
        const m = /^Basic (.+)$/i.exec(req.headers.authorization || '');
        const challenge = { 'WWW-Authenticate': 'Basic realm="durable console"' };
        if (!m) return send(res, 401, 'log in, or scrape with HTTP Basic authentication as a PostgreSQL role\n', 'text/plain; charset=utf-8', challenge);
        const decoded = Buffer.from(m[1], 'base64').toString('utf8');
        const i = decoded.indexOf(':');
        const user = i < 0 ? decoded : decoded.slice(0, i);
        const password = i < 0 ? '' : decoded.slice(i + 1);
        // a scraper's pool is kept for its next scrape, without a sampler
        entry = password || opts.allowEmptyPassword ? pools.peek(user, password) : undefined;
        if (!entry) {
          try {
            entry = await logIn(req, user, password, 'metrics', { sample: false });
          } catch (err) {
            if (!(err instanceof HttpError)) throw err;
            return send(res, err.status, `${LOGIN_ERRORS[err.message]}\n`, 'text/plain; charset=utf-8', challenge);
          }
        }
      }
      const { status, body, type } = await pages.metrics(entry);
      return send(res, status, body, type);
    }

    if (!session) {
      if (req.method === 'GET') return redirect(res, '/login');
      throw new HttpError(403, 'not logged in');
    }
    // a page reading itself again (app.js) keeps no session open by itself
    const live = req.method === 'GET' && req.headers['x-durable-live'] === '1';
    if (!live) session.lastSeen = Date.now();

    if (req.method === 'POST') {
      const form = new URLSearchParams(await readBody(req));
      if (!sameToken(form.get('_csrf'), session.csrf)) throw new HttpError(403, 'invalid CSRF token: reload the page');
      if (url.pathname === '/logout') {
        await endSession(session.id);
        return redirect(res, '/login', { 'Set-Cookie': cookie(SESSION_COOKIE, '', 0) });
      }
      const m = /^\/action\/([a-z_]+)$/.exec(url.pathname);
      if (!m) throw new HttpError(404, 'no such action');
      const back = safeBack(form.get('back'));
      const ctx = ctxOf(session, req, url);
      try {
        const done = await action(m[1], form, ctx);
        if (done.kind === 'confirm') return send(res, 200, String(confirmPage(ctx, m[1], done.text, form)));
        session.flash = done;
      } catch (err) {
        if (err instanceof HttpError) throw err;
        session.flash = { kind: 'error', text: pgError(err) };
      }
      return redirect(res, back);
    }

    const ctx = ctxOf(session, req, url);
    const page = pages.route(url.pathname);
    if (!page) throw new HttpError(404, 'no such page');
    const body = await page(ctx);
    if (!live) session.flash = null;
    return send(res, 200, String(body));
  }

  function ctxOf(session, req, url) {
    const entry = session.entry;
    return {
      req,
      url,
      session,
      role: session.role,
      caps: entry.caps,
      sql: entry.sql,
      ext: entry.ext,
      sampler: entry.sampler,
      query: (text, params) => entry.pool.query(text, params),
      audit: (e) => opts.audit({ at: new Date().toISOString(), role: session.role, ...e }),
    };
  }

  const server = http.createServer((req, res) => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      if (opts.logRequests)
        opts.logRequests(`${req.method} ${req.url} ${res.statusCode} ${Number(process.hrtime.bigint() - started) / 1e6} ms`);
    });
    handle(req, res).catch((err) => {
      const status = err instanceof HttpError ? err.status : 500;
      const text = err instanceof HttpError ? err.message : pgError(err);
      if (status === 500) console.error(err);
      if (res.headersSent) return res.end();
      send(res, status, String(pages.errorPage(status, text)));
    });
  });

  return {
    server,
    listen() {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(opts.port, opts.host, () => resolve(server.address()));
      });
    },
    async close() {
      clearInterval(sweeper);
      for (const id of [...sessions.keys()]) await endSession(id);
      await pools.closeAll();
      await new Promise((r) => server.close(r));
    },
  };
}

export { html };
