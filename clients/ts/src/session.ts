/**
 * One connection to durable, and the statements on it.  Every statement is
 * unnamed (node-postgres prepares a statement only when given a name), so a
 * transaction-mode pooler may hand each transaction another server session.
 * A statement or transaction that the server rolled back for a reason of
 * its own (40001, 40P01, 57014) runs again, a few times, with backoff.
 *
 * Nor does a statement depend on the session's search_path: each resolves
 * only to pg_catalog and durable's objects, whatever the role's search_path
 * and whatever a database owner put in public (an overload such as
 * public.&(bigint, integer) wins over pg_catalog's even when pg_catalog
 * comes first).  durable's API functions are called in the schema the
 * extension is installed in (looked up once per connection; @api in a
 * statement's text), with every argument cast to its parameter's type;
 * built-in functions as pg_catalog.f, operators as OPERATOR(pg_catalog.x),
 * casts to pg_catalog's types.
 */
import pg from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConnectionLost, fromLibraryClient, reaction } from './errors.js';

const RETRIES = 5;

/** What runs a statement: a pg.Client, a pool's client, a pg.Pool. */
export interface Queryable {
  query<R extends pg.QueryResultRow = any>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

/**
 * The library's own connection.  What its queries throw that is no answer of
 * the server's (a socket error, "Connection terminated"), or a class 08 or
 * 57P01..57P03 error, becomes ConnectionLost: the one error the loop
 * reconnects on.  Errors of any other client (the handler's own) never do.
 */
export async function connect(connectionString: string, applicationName: string,
  config: Partial<pg.ClientConfig> = {}): Promise<pg.Client> {
  const client = new pg.Client({ ...config, connectionString, application_name: applicationName });
  client.on('error', () => {}); // a dropped connection surfaces in the next query
  try {
    await client.connect();
  } catch (e) {
    await client.end().catch(() => {});
    throw new ConnectionLost(e);
  }
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as { query: unknown }).query = (...args: unknown[]) => {
    const r = query(...args);
    return r instanceof Promise ? r.catch((e: unknown) => { throw fromLibraryClient(e); }) : r;
  };
  return client;
}

const API_SCHEMA_SQL = `SELECT n.nspname FROM pg_catalog.pg_extension e
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
  WHERE e.extname OPERATOR(pg_catalog.=) 'durable'`;
const apiSchemas = new WeakMap<Queryable, string>();

/** sql with the schema of durable's API, quoted, in place of @api (looked up once per connection). */
export async function apiSql(client: Queryable, sql: string): Promise<string> {
  let schema = apiSchemas.get(client);
  if (schema === undefined) {
    const { rows } = await client.query<{ nspname: string }>(API_SCHEMA_SQL);
    if (rows.length === 0) throw new Error('the extension durable is not installed in this database');
    schema = pg.escapeIdentifier(rows[0].nspname);
    apiSchemas.set(client, schema);
  }
  return sql.replaceAll('@api.', `${schema}.`);
}

/** Run fn (a statement, or a transaction) again while it fails with an error whose reaction is 'retry'. */
export async function retrying<T>(fn: () => Promise<T>, log: (msg: string) => void,
  what: 'statement' | 'transaction' = 'statement'): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (reaction(e) !== 'retry' || attempt >= RETRIES) throw e;
      log(`${(e as Error).message} (${(e as pg.DatabaseError).code}); retrying the ${what}`);
      await sleep(50 * 2 ** attempt);
    }
  }
}

/** One row of a statement (its own transaction), retried as above. */
export async function queryRow<R extends pg.QueryResultRow>(
  client: Queryable, sql: string, params: unknown[], log: (msg: string) => void): Promise<R> {
  return retrying(async () => (await client.query<R>(await apiSql(client, sql), params)).rows[0], log);
}

/** fn inside BEGIN ... COMMIT, the whole transaction retried as above. */
export async function transaction<T>(
  client: pg.Client, fn: (client: pg.Client) => Promise<T>, log: (msg: string) => void): Promise<T> {
  return retrying(async () => {
    await client.query('BEGIN');
    try {
      const value = await fn(client);
      await client.query('COMMIT');
      return value;
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      throw e;
    }
  }, log, 'transaction');
}
