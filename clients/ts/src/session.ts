/**
 * One connection to durable, and the statements on it.  Every statement is
 * unnamed (node-postgres prepares a statement only when given a name), so a
 * transaction-mode pooler may hand each transaction another server session.
 * A statement or transaction that the server rolled back for a reason of
 * its own (40001, 40P01, 57014) runs again, a few times, with backoff.
 */
import pg from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import { reaction } from './errors.js';

const RETRIES = 5;

export type Queryable = Pick<pg.Client, 'query'>;

export async function connect(connectionString: string, applicationName: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString, application_name: applicationName });
  client.on('error', () => {}); // a dropped connection surfaces in the next query
  await client.connect();
  return client;
}

/** Run fn again while it fails with an error whose reaction is 'retry'. */
export async function retrying<T>(fn: () => Promise<T>, log: (msg: string) => void): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (reaction(e) !== 'retry' || attempt >= RETRIES) throw e;
      log(`${(e as Error).message} (${(e as pg.DatabaseError).code}); retrying the transaction`);
      await sleep(50 * 2 ** attempt);
    }
  }
}

/** One row of a statement (its own transaction), retried as above. */
export async function queryRow<R extends pg.QueryResultRow>(
  client: Queryable, sql: string, params: unknown[], log: (msg: string) => void): Promise<R> {
  return retrying(async () => (await client.query<R>(sql, params)).rows[0], log);
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
  }, log);
}
