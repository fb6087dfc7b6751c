/**
 * Reading a task's stream as it is written (durable_stream_read):
 *
 *   for await (const c of readStream(url, taskId, 'tokens')) process.stdout.write(c.chunk);
 *
 * A reader keeps the position of the last chunk it saw (c.seq) and, to
 * resume after either side crashed, starts again after it: readStream(...,
 * { after: seq }) never yields a chunk twice or out of order.  The iterator
 * ends at the stream's end: its close, or its task's finish.  It waits for
 * the next chunk on LISTEN durable_stream and reads again at least every
 * poll milliseconds; behind a transaction-mode pooler (pooled) it only
 * polls.
 */
import pg from 'pg';
import { apiSql } from './session.js';

/** The channel appends notify (DURABLE_STREAM_CHANNEL in src/core/core.h). */
const STREAM_CHANNEL = 'durable_stream';

export interface Chunk {
  seq: number; // its position in the stream: 1, 2, ...
  chunk: unknown; // the JSON value appended
  at: Date; // when it was appended
}

export interface ReadStreamOptions {
  after?: number;
  batch?: number;
  poll?: number;
  pooled?: boolean;
}

export async function* readStream(connectionString: string, taskId: string | bigint | number,
  stream: string, options: ReadStreamOptions = {}): AsyncGenerator<Chunk> {
  const { batch = 1000, poll = 5000, pooled = false } = options;
  let after = options.after ?? 0;
  const client = new pg.Client({ connectionString });
  client.on('error', () => {}); // a dropped connection surfaces in the next query
  await client.connect();
  let wake: (() => void) | null = null;
  let woken = false;
  try {
    const read = await apiSql(client, 'SELECT seq, chunk, at FROM @api.durable_stream_read('
      + '$1::pg_catalog.int8, $2::pg_catalog.text, $3::pg_catalog.int8, $4::pg_catalog.int4)');
    if (!pooled) {
      client.on('notification', (n) => {
        if (n.payload !== String(taskId)) return;
        woken = true;
        wake?.();
      });
      await client.query(`LISTEN ${STREAM_CHANNEL}`);
    }
    for (;;) {
      woken = false; // a chunk committed from here on wakes the wait below
      const { rows } = await client.query<{ seq: string; chunk: unknown; at: Date }>(
        read, [String(taskId), stream, after, batch]);
      for (const row of rows) {
        if (row.chunk === null) return;
        after = Number(row.seq);
        yield { seq: after, chunk: row.chunk, at: row.at };
      }
      if (rows.length < batch && !woken) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, poll);
          wake = () => { clearTimeout(timer); resolve(); };
        });
        wake = null;
      }
    }
  } finally {
    await client.end().catch(() => {});
  }
}
