/**
 * The queue loop: claim a batch, run the handler for each task, complete it
 * with what the handler returns; keep the leases alive; look up queryable
 * steps a crash left unknown; reconnect with backoff after a lost
 * connection; on SIGTERM finish the step in hand and give back every task
 * still held (durable_release: ready at once, its attempt not used).
 */
import type pg from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ConnectionLost, LeaveToRecovery, Stopping, TaskLost, Waiting, errorClassOf, reaction,
} from './errors.js';
import { Heartbeat, Holdings } from './heartbeat.js';
import { apiSql, connect, queryRow, retrying, transaction } from './session.js';
import { StepFailed, Task, type Claimed, type Lookup, type Point, type Stats } from './task.js';

/** durable's NOTIFY channel (src/core/core.h, DURABLE_READY_CHANNEL). */
const READY_CHANNEL = 'durable_ready';
/** Runs of a handler whose statement the server rolled back (40001, 40P01, 57014), as the Python client. */
const HANDLER_RUNS = 3;

export interface WorkerOptions {
  /** node-postgres connection string of the database durable is in */
  connectionString: string;
  queue: string;
  /** the worker's name: the tasks' owner, and the connections' application_name */
  name: string;
  /** lease in seconds; by default the queue's own */
  lease?: number;
  /**
   * where the heartbeat connects (connectionString): behind a pooler, an
   * alias of the database with a pool of its own, so that claims never
   * starve the beats (docs/poolers.md)
   */
  heartbeatConnectionString?: string;
  /** tasks claimed at once (10) */
  batch?: number;
  /**
   * Behind a transaction-mode pooler (PgBouncer pool_mode = transaction): no
   * LISTEN, which needs a session of its own; the worker polls.
   */
  pooled?: boolean;
  /** how often an idle worker polls, in milliseconds (250) */
  pollMs?: number;
  /** run() returns after this many seconds with nothing to do (never) */
  idleExit?: number;
  /** looks queryable steps up; without it the worker is no reconcile handler */
  lookup?: Lookup;
  /** called at each point of a step or wait: a test's fault injection */
  onPoint?: (point: Point, kind?: string) => void;
  /** where the worker says what it does (standard error) */
  log?: (msg: string) => void;
  /** stop on SIGTERM and SIGINT (true) */
  handleSignals?: boolean;
}

/** A handler: what it returns (JSON) is the task's result. */
export type Handler<Payload = any> = (task: Task<Payload>) => Promise<unknown>;

export class Worker {
  readonly stats: Stats = {
    completed: 0, failed: 0, stepsRun: 0, stepsSkipped: 0, lookedUp: 0, released: 0, lost: 0, leftWaiting: 0,
  };
  private readonly holdings = new Holdings();
  private readonly log: (msg: string) => void;
  private readonly lease: string | null;
  private stopping = false;
  private woken = false;
  private wake: (() => void) | null = null;

  constructor(private readonly options: WorkerOptions) {
    this.log = options.log ?? ((msg) => console.error(`${new Date().toISOString()} [${options.name}] ${msg}`));
    this.lease = options.lease === undefined ? null : `${options.lease} seconds`;
  }

  /** Stop at the next step boundary, give back what is held, return from run(). */
  stop(): void {
    this.stopping = true;
    this.wake?.();
  }

  /** Work the queue until stop(), a signal, or idleExit. */
  async run<Payload = any>(handler: Handler<Payload>): Promise<void> {
    const onSignal = () => this.stop();
    if (this.options.handleSignals ?? true) {
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    }
    const heartbeat = new Heartbeat(this.holdings,
      this.options.heartbeatConnectionString ?? this.options.connectionString,
      `${this.options.name} heartbeat`, this.log);
    heartbeat.start();
    if (this.options.pooled)
      this.log(`pooled: no LISTEN behind a transaction-mode pooler; polling every ${this.pollMs} ms`);
    try {
      await this.connected(handler);
    } finally {
      await heartbeat.stop();
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
    }
  }

  private get pollMs(): number {
    return this.options.pollMs ?? 250;
  }

  /** The loop on a connection, again on a new one after a lost one. */
  private async connected(handler: Handler<any>): Promise<void> {
    for (let backoff = 1; ;) {
      let client: pg.Client | null = null;
      try {
        client = await connect(this.options.connectionString, this.options.name);
        await this.giveBack(client, 'reconnected'); // what a lost connection left held
        if (!this.options.pooled) await this.listen(client);
        backoff = 1;
        await this.loop(client, handler);
        await this.giveBack(client, 'shutdown');
        return;
      } catch (e) {
        if (!(e instanceof ConnectionLost)) throw e;
        if (this.stopping) return; // the leases run out; recovery takes over
        this.log(`connection lost (${(e as Error).message}); reconnecting in ${backoff} s`);
        this.woken = false;
        await this.pause(backoff * 1000); // SIGTERM ends it: reconnect, give back, return
        backoff = Math.min(backoff * 2, 30);
      } finally {
        await client?.end().catch(() => {});
      }
    }
  }

  /** Wake early when a task of the queue becomes ready (queues with notify). */
  private async listen(client: pg.Client): Promise<void> {
    client.on('notification', (n) => {
      if (n.channel !== READY_CHANNEL || n.payload !== this.options.queue) return;
      this.woken = true;
      this.wake?.();
    });
    await client.query(`LISTEN ${READY_CHANNEL}`);
  }

  private async loop(client: pg.Client, handler: Handler<any>): Promise<void> {
    const { queue, name, batch = 10, idleExit = -1 } = this.options;
    let idleSince = Date.now();
    while (!this.stopping) {
      this.woken = false;
      // one short transaction; the lease's length as the claim computed it
      const claimedAt = Date.now();
      const { rows: tasks } = await retrying(async () => client.query<Claimed & { lease_ms: number }>(
        await apiSql(client, `SELECT task_id, fence, attempt, payload, checkpoint,
                (EXTRACT(epoch FROM (lease_until OPERATOR(pg_catalog.-) pg_catalog.now()))
                   OPERATOR(pg_catalog.*) 1000)::pg_catalog.float8 AS lease_ms
         FROM @api.durable_claim($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.interval,
                                 $4::pg_catalog.int4)`), [queue, name, this.lease, batch]), this.log);
      if (tasks.length === 0 && !(await this.reconcile(client))) {
        if (idleExit >= 0 && Date.now() - idleSince > idleExit * 1000) return;
        await this.pause(this.pollMs);
        continue;
      }
      idleSince = Date.now();
      for (const t of tasks) this.holdings.add(t.task_id, t.fence, t.lease_ms, claimedAt);
      for (const t of tasks) {
        if (this.stopping) break; // the rest are given back at once, unstarted
        await this.runTask(client, handler, t);
      }
    }
  }

  /** Sleep ms, or until a notification for the queue or stop(). */
  private async pause(ms: number): Promise<void> {
    if (this.woken || this.stopping) return;
    const ac = new AbortController();
    this.wake = () => ac.abort();
    await sleep(ms, undefined, { signal: ac.signal }).catch(() => {});
    this.wake = null;
  }

  private async runTask(client: pg.Client, handler: Handler<any>, claimed: Claimed): Promise<void> {
    const task = new Task(this.context(client), claimed);
    try {
      const result = await this.runHandler(handler, task);
      this.options.onPoint?.('before_commit');
      await transaction(client, async (tx) => {
        for (const write of task.commitWrites) await write(tx);
        await tx.query(await apiSql(tx, 'SELECT @api.durable_commit($1::pg_catalog.int8, $2::pg_catalog.int8,'
          + ' $3::pg_catalog.jsonb)'), [task.id, task.fence, JSON.stringify(result ?? null)]);
      }, this.log);
      this.stats.completed++;
      this.options.onPoint?.('after_commit');
    } catch (e) {
      const signal = task.abandoned ?? e; // a signal the handler caught still decides
      if (task.abandoned && task.abandoned !== e)
        this.log(`task ${task.id}: its handler caught ${task.abandoned.name} and threw ${(e as Error)?.name}`);
      if (signal instanceof Stopping) return; // still held: given back at the step boundary
      await this.settle(client, task, signal);
    }
    this.holdings.drop(task.id);
  }

  /**
   * The handler's run, never committed over a signal it caught.  A handler
   * whose statement the server rolled back (40001, 40P01, 57014) runs again
   * from the top, a few times: its committed steps return their results.
   */
  private async runHandler(handler: Handler<any>, task: Task): Promise<unknown> {
    for (let run = 1; ; run++) {
      try {
        const result = await handler(task);
        if (!task.abandoned) return result;
        this.log(`task ${task.id}: its handler caught ${task.abandoned.name} and returned; not committed`);
        throw task.abandoned;
      } catch (e) {
        if (task.abandoned || reaction(e) !== 'retry' || run >= HANDLER_RUNS) throw e;
        this.log(`task ${task.id}: ${(e as Error).message} (${(e as pg.DatabaseError).code}); running the handler again`);
        task.commitWrites.length = 0; // the run that failed registered them
      }
    }
  }

  /** What the loop does when a task's handler ends in an error. */
  private async settle(client: pg.Client, task: Task, e: unknown): Promise<void> {
    const message = e instanceof Error ? e.message : String(e);
    if (e instanceof Waiting) {
      this.stats.leftWaiting++; // the wait ended the lease
    } else if (e instanceof TaskLost || reaction(e) === 'drop') {
      this.stats.lost++;
      this.log(`task ${task.id} lost: ${message}`);
    } else if (e instanceof LeaveToRecovery || reaction(e) === 'leave') {
      this.log(`task ${task.id} left to recovery: ${message}`);
    } else if (e instanceof StepFailed) {
      this.stats.failed++;
      this.log(`task ${task.id} failed: ${message}`);
    } else if (e instanceof ConnectionLost) {
      throw e; // our own connection: still held, given back after the reconnect
    } else {
      const errorClass = errorClassOf(e);
      try {
        const { action } = await queryRow<{ action: string }>(client,
          'SELECT @api.durable_fail($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text,'
          + ' $4::pg_catalog.jsonb) AS action',
          [task.id, task.fence, errorClass, JSON.stringify({ error: message })], this.log);
        this.stats.failed++;
        this.log(`task ${task.id} failed (${errorClass}): ${message}; ${action}`);
      } catch (f) {
        if (f instanceof ConnectionLost) throw f;
        // not ours any more, or a step in doubt: the recovery table judges it
        this.log(`task ${task.id} left to recovery: ${message}; ${(f as Error).message}`);
      }
    }
  }

  /** Release every task still held: ready again now, its attempt unused. */
  private async giveBack(client: pg.Client, reason: string): Promise<void> {
    for (const [id, { fence }] of [...this.holdings.held]) {
      try {
        await queryRow(client,
          'SELECT @api.durable_release($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text)',
          [id, fence, reason], this.log);
        this.stats.released++;
        this.log(`gave task ${id} back (${reason})`);
      } catch (e) {
        const r = reaction(e);
        if (r !== 'drop' && r !== 'leave') throw e;
        this.log(`task ${id} stays with recovery: ${(e as Error).message}`);
      }
      this.holdings.drop(id);
    }
  }

  /** As a reconcile handler: look up the queryable steps a crash left unknown. */
  private async reconcile(client: pg.Client): Promise<boolean> {
    const { lookup } = this.options;
    if (!lookup) return false;
    const { rows } = await retrying(async () => client.query<{
      task_id: string; fence: string; step: string; idempotency_key: string; request: unknown;
    }>(await apiSql(client, 'SELECT task_id, fence, step, idempotency_key, request'
      + ' FROM @api.durable_claim_reconcile($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.interval)'),
      [this.options.queue, this.options.name, this.lease]), this.log);
    for (const r of rows) {
      let found: unknown;
      try {
        found = (await lookup(r.step, r.idempotency_key, r.request)) ?? null;
      } catch (e) {
        // the task keeps its reconcile lease; another look-up comes after it
        this.log(`lookup of step ${r.step} of task ${r.task_id} failed: ${(e as Error)?.message ?? e}; left to its lease`);
        continue;
      }
      try {
        // the operation's result is the evidence, which a succeeded receipt
        // makes the step's result: the shape the call would have returned
        await queryRow(client, 'SELECT @api.durable_record_receipt($1::pg_catalog.int8, $2::pg_catalog.int8,'
          + ' $3::pg_catalog.text, $4::pg_catalog.text, NULL::pg_catalog.text, $5::pg_catalog.jsonb)',
          [r.task_id, r.fence, r.step, found === null ? 'not_executed' : 'succeeded',
            found === null ? null : JSON.stringify(found)], this.log);
        this.stats.lookedUp++;
      } catch (e) {
        if (reaction(e) !== 'drop') throw e;
      }
    }
    return rows.length > 0;
  }

  private context(client: pg.Client) {
    return {
      client,
      holdings: this.holdings,
      queue: this.options.queue,
      stats: this.stats,
      stopping: () => this.stopping,
      lookup: this.options.lookup,
      onPoint: this.options.onPoint ?? (() => {}),
      log: this.log,
    };
  }
}
