#!/usr/bin/env node
// durable-console [--database URL] [--host H] [--port N] [--secure-cookies]
//                 [--allow-superuser] [--allow-empty-password]
//                 [--sample-interval SECONDS] [--log-requests]
//
// The operator console of durable.  It has no users of its own: log in with a
// PostgreSQL role; every action runs as that role through durable's SQL API.
import { createConsole } from '../lib/server.js';

function usage(code) {
  process.stderr.write(`usage: durable-console [--database URL] [--host H] [--port N] [--secure-cookies]
                       [--allow-superuser] [--allow-empty-password]
                       [--sample-interval SECONDS] [--log-requests]
  --database URL     the database durable is installed in (user and password are the login's);
                     default: $DATABASE_URL, else postgresql:///postgres (local socket)
  --host H           address to listen on (default 127.0.0.1: only this machine)
  --port N           port to listen on (default 8080; 0 picks a free one)
  --secure-cookies   mark the session cookie Secure: set it behind a TLS proxy
  --allow-superuser  let superusers log in (refused by default)
  --allow-empty-password
                     let a role log in without a password, for peer or trust authentication
                     on a local socket (refused by default, whatever the server would accept)
`);
  process.exit(code);
}

const opts = { databaseUrl: process.env.DATABASE_URL, host: '127.0.0.1', port: 8080 };
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const value = () => {
    if (i + 1 >= args.length) usage(2);
    return args[++i];
  };
  if (a === '--database') opts.databaseUrl = value();
  else if (a === '--host') opts.host = value();
  else if (a === '--port') opts.port = Number(value());
  else if (a === '--secure-cookies') opts.secureCookies = true;
  else if (a === '--allow-superuser') opts.allowSuperuser = true;
  else if (a === '--allow-empty-password') opts.allowEmptyPassword = true;
  else if (a === '--sample-interval') opts.sampleIntervalMs = Number(value()) * 1000;
  else if (a === '--log-requests') opts.logRequests = (line) => process.stderr.write(`${line}\n`);
  else if (a === '--help' || a === '-h') usage(0);
  else usage(2);
}
if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) usage(2);

const app = createConsole(opts);
const address = await app.listen();
const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
process.stderr.write(`durable console listening on http://${shown}:${address.port}/\n`);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, async () => {
    await app.close();
    process.exit(0);
  });
}
