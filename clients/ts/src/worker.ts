/**
 * The queue loop: claim a batch, run the handler for each task (up to
 * `concurrency` at once), complete it with what the handler returns; keep
 * the leases alive; look up queryable steps a crash left unknown;
 * reconnect with backoff after a lost connection; on SIGTERM finish the
 * step in hand and give back every task still held (durable_release: ready
 * at once, its attempt not used).
 */
import type pg from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ConnectionLost, LeaveToRecovery, Stopping, TaskLost, Waiting, errorClassOf, reaction, sqlstate,
} from './errors.js';
import { Heartbeat, Holdings } from './heartbeat.js';
import { apiSql, connect, queryRow, retrying, transaction } from './session.js';
import { StepFailed, Task, type Claimed, type Lookup, type Point, type Stats } from './task.js';

/** durable's NOTIFY channel (src/core/core.h, DURABLE_READY_CHANNEL). */
const READY_CHANNEL = 'durable_ready';
/**
 * 55000 from the loop's own calls: durable cannot serve them now (a library
 * newer than the installed SQL, until ALTER EXTENSION durable UPDATE); the
 * worker waits and tries again, as the Python client does.
 */
const NOT_READY = '55000';
/** Runs of a handler whose statement the server rolled back (40001, 40P01, 57014), as the Python client. */
const HANDLER_RUNS = 3;
/**
 * Connections tried before the first one succeeded (waiting 1, 2, 4 s in
 * between): a bad connection string or a refused login ends run() with its
 * reason instead of retrying for ever.  After a first connection a lost one
 * is reconnected without end.
 */
const START_ATTEMPTS = 4;
/** A connect that hangs (a host that drops packets) is given up and tried again. */
const CONNECT: Partial<pg.ClientConfig> = { connectionTimeoutMillis: 10_000 };
/** The pooler probe's own connection never holds the start up for long. */
const PROBE: Partial<pg.ClientConfig> = { connectionTimeoutMillis: 5_000, query_timeout: 5_000 };
/** How long the loop sleeps while every lane is busy: a lane that frees, a signal or stop() wakes it. */
const LANE_WAIT_MS = 60_000;

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
   * handlers run at once (1: the tasks of a batch one after another); each
   * lane beyond one has a connection of its own
   */
  concurrency?: number;
  /**
   * Behind a transaction-mode pooler (PgBouncer pool_mode = transaction): no
   * LISTEN, which needs a session of its own; the worker polls.  Not given,
   * the worker finds out at start (a transaction-mode pooler lets two
   * connections share a backend, and one connection change backends).
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
  private readonly concurrency: number;
  /** LISTEN or not, once the first connection decided it */
  private pooled: boolean | null = null;
  private stopping = false;
  private woken = false;
  private wake: (() => void) | null = null;

  constructor(private readonly options: WorkerOptions) {
    this.log = options.log ?? ((msg) => console.error(`${new Date().toISOString()} [${options.name}] ${msg}`));
    this.lease = options.lease === undefined ? null : `${options.lease} seconds`;
    this.concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1)
      throw new RangeError(`concurrency must be a positive integer, not ${options.concurrency}`);
  }

  /** Stop at the next step boundary, give back what is held, return from run(). */
  stop(): void {
    this.stopping = true;
    this.wake?.();
  }

  /**
   * Work the queue until stop(), a signal, or idleExit.  Rejects when no
   * connection could be made at start (a bad connection string, a refused
   * login), with the reason.
   */
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
    for (let backoff = 1, attempt = 1; ; attempt++) {
      let client: pg.Client | null = null;
      try {
        client = await connect(this.options.connectionString, this.options.name, CONNECT);
        if (this.pooled === null) await this.start(client);
        await this.giveBack(client, 'reconnected'); // what a lost connection left held
        if (!this.pooled) await this.listen(client);
        backoff = 1;
        await this.loop(client, handler);
        await this.giveBack(client, 'shutdown');
        return;
      } catch (e) {
        if (sqlstate(e) === NOT_READY && this.pooled !== null) {
          // durable cannot serve the loop's calls for now: a library newer
          // than the installed SQL, between the restart onto it and ALTER
          // EXTENSION durable UPDATE (or its tables changed by hand): wait
          if (this.stopping) return;
          const hint = (e as { hint?: string }).hint;
          this.log(`durable refused the worker's call (${(e as Error).message}${hint ? ` ${hint}` : ''}); `
            + `trying again in ${backoff} s`);
          this.woken = false;
          await this.pause(backoff * 1000);
          backoff = Math.min(backoff * 2, 30);
          continue;
        }
        if (!(e instanceof ConnectionLost)) throw e;
        if (this.stopping) return; // the leases run out; recovery takes over
        if (this.pooled === null) { // never connected yet: the connection string or the login may be wrong
          if (attempt >= START_ATTEMPTS)
            throw new Error(`could not connect to durable's database (${attempt} attempts): ${e.message}`,
              { cause: e.cause });
          this.log(`could not connect (${e.message}); attempt ${attempt + 1} of ${START_ATTEMPTS} in ${backoff} s`);
        } else {
          this.log(`connection lost (${e.message}); reconnecting in ${backoff} s`);
        }
        this.woken = false;
        await this.pause(backoff * 1000); // SIGTERM ends it: reconnect, give back, return
        backoff = Math.min(backoff * 2, 30);
      } finally {
        await client?.end().catch(() => {});
      }
    }
  }

  /** At the first connection: LISTEN or poll, and one line that says how the worker runs. */
  private async start(client: pg.Client): Promise<void> {
    const { queue, name, batch = 10, pooled } = this.options;
    const found = pooled === undefined
      ? await this.findPooler(client)
      : { pooled, why: `pooled: ${pooled} given` };
    this.pooled = found.pooled;
    this.log(`worker ${name} on queue ${queue}: lease ${this.lease ?? "the queue's"}, batch ${batch}, `
      + `concurrency ${this.concurrency}, ${found.pooled
        ? `pooled: no LISTEN (${found.why}); polling every ${this.pollMs} ms`
        : `not pooled: LISTEN ${READY_CHANNEL} (${found.why}), polling every ${this.pollMs} ms`}`);
  }

  /**
   * Is a transaction-mode pooler in the way, where a LISTEN would stay on a
   * backend the worker no longer holds (docs/poolers.md)?  Node-postgres
   * prepares no statement unless named, so LISTEN is the one thing at
   * stake.  A backend whose pid is the one the server gave at connect
   * (BackendKeyData) is the server's own session: no pooler.  Else a pooler
   * made the pid up.  Through a session-mode one a connection keeps its
   * backend and two connections never share one; through a
   * transaction-mode one they do.  So: a second connection's backend, held
   * in a transaction, right after ours was used (a pooler hands out the
   * backend used last first: ours); then ours again.  Another client of
   * the pooler may have released a backend in between, which the probe is
   * then given instead: that tells nothing, so the probe tries again, a
   * few times.  When the probe cannot tell (its connection refused, or
   * waiting for a backend), the worker polls: that is right behind any
   * pooler.
   */
  private async findPooler(client: pg.Client): Promise<{ pooled: boolean; why: string }> {
    const PID = 'SELECT pg_catalog.pg_backend_pid() AS pid';
    const TRIES = 5;
    const pid = async (c: pg.Client) => (await c.query<{ pid: number }>(PID)).rows[0].pid;
    let ours = await pid(client);
    if ((client as { processID?: number }).processID === ours)
      return { pooled: false, why: `no pooler: backend ${ours} is the one the server gave at connect` };
    let probe: pg.Client | null = null;
    try {
      try {
        probe = await connect(this.options.connectionString, `${this.options.name} probe`, PROBE);
      } catch (e) {
        return { pooled: true, why: `could not tell whether a transaction-mode pooler is in the way: `
          + `${(e as Error).message}; polling to be safe` };
      }
      for (let attempt = 1; attempt <= TRIES; attempt++) {
        let held: number;
        if (attempt > 1)
          ours = await pid(client);
        try {
          await probe.query('BEGIN');
          held = await pid(probe);
        } catch (e) {
          return { pooled: true, why: `could not tell whether a transaction-mode pooler is in the way: `
            + `${(e as Error).message}; polling to be safe` };
        }
        const again = held === ours ? ours : await pid(client);
        await probe.query('COMMIT').catch(() => {}); // a pooler keeps a backend whose transaction ended
        if (held === ours)
          return { pooled: true, why: `a transaction-mode pooler: two connections shared backend ${ours}` };
        if (again !== ours)
          return { pooled: true, why: `a transaction-mode pooler: the connection moved from backend ${ours} to ${again}` };
      }
      return { pooled: false, why: `no transaction-mode pooler: the connection kept backend ${ours}` };
    } finally {
      await probe?.end().catch(() => {});
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

  /** Claim up to n tasks (one short transaction); the lease's length as the claim computed it. */
  private async claim(client: pg.Client, n: number): Promise<Claimed[]> {
    const claimedAt = Date.now();
    const { rows: tasks } = await retrying(async () => client.query<Claimed & { lease_ms: number }>(
      await apiSql(client, `SELECT task_id, fence, attempt, payload, checkpoint,
              (EXTRACT(epoch FROM (lease_until OPERATOR(pg_catalog.-) pg_catalog.now()))
                 OPERATOR(pg_catalog.*) 1000)::pg_catalog.float8 AS lease_ms
       FROM @api.durable_claim($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.interval,
                               $4::pg_catalog.int4)`), [this.options.queue, this.options.name, this.lease, n]),
    this.log);
    for (const t of tasks) this.holdings.add(t.task_id, t.fence, t.lease_ms, claimedAt);
    return tasks;
  }

  /**
   * Claim a batch when it is used up and a lane is free; run its tasks on
   * the lanes, up to `concurrency` at once.  Returns at stop() or idleExit;
   * throws what a lane or the claim threw (a lost connection), once every
   * lane has finished its task.
   */
  private async loop(client: pg.Client, handler: Handler<any>): Promise<void> {
    const { batch = 10, idleExit = -1 } = this.options;
    const claimed: Claimed[] = []; // held, not begun
    const running = new Set<Promise<void>>();
    const lanes = new Lanes(client, this.concurrency, this.options);
    const failures: unknown[] = []; // what lanes threw
    let idleSince = Date.now();
    let more = false; // the last claim took a whole batch: there may be more ready
    try {
      while (!this.stopping && failures.length === 0) {
        this.woken = false; // a notification, a lane that frees or stop() from here on wakes the pause below
        if (claimed.length === 0 && running.size < this.concurrency) {
          claimed.push(...await this.claim(client, batch));
          more = claimed.length === batch;
          if (claimed.length > 0) {
            idleSince = Date.now();
          } else if (await this.reconcile(client)) {
            idleSince = Date.now();
            continue;
          } else if (running.size === 0) {
            if (idleExit >= 0 && Date.now() - idleSince > idleExit * 1000) return;
            await this.pause(this.pollMs);
            continue;
          }
        }
        while (claimed.length > 0 && running.size < this.concurrency && !this.stopping) {
          const task = claimed.shift()!;
          const run: Promise<void> = lanes.run((lane) => this.runTask(lane, handler, task))
            .catch((e: unknown) => { failures.push(e); })
            .finally(() => {
              running.delete(run);
              this.woken = true;
              this.wake?.();
            });
          running.add(run);
        }
        const laneFree = claimed.length === 0 && running.size < this.concurrency;
        if (laneFree && more) continue;
        // a lane frees; or, with one free and nothing claimed, a poll's time passes
        await this.pause(laneFree ? this.pollMs : LANE_WAIT_MS);
      }
    } finally {
      while (running.size > 0) await Promise.allSettled([...running]);
      await lanes.end();
    }
    // the rest still held: given back after the reconnect; a bug before a lost connection
    if (failures.length > 0) throw failures.find((e) => !(e instanceof ConnectionLost)) ?? failures[0];
  }

  /** Sleep ms, or until a notification, a lane that frees, or stop(). */
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
      // from here on a lease that runs out spends the attempt; 55U01: the
      // task is no longer ours (an operator ended its lease meanwhile), dropped
      await task.begin();
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

/**
 * Where the tasks' statements run.  With one lane, on the worker's own
 * connection, as the claims do; with more, each lane on a connection of
 * its own: a task's completing transaction on a shared connection would
 * take in the statements the other tasks send meanwhile.  A lane's
 * connection is opened when first needed and kept for its next task; one
 * whose task ended in an error (a lost connection) is closed.
 */
class Lanes {
  private readonly idle: pg.Client[] = [];
  private readonly open = new Set<pg.Client>();

  constructor(private readonly client: pg.Client, private readonly n: number,
    private readonly options: WorkerOptions) {}

  async run(fn: (lane: pg.Client) => Promise<void>): Promise<void> {
    if (this.n === 1) return fn(this.client);
    let lane = this.idle.pop();
    try {
      if (!lane) {
        lane = await connect(this.options.connectionString, this.options.name, CONNECT);
        this.open.add(lane);
      }
      await fn(lane);
      this.idle.push(lane);
    } catch (e) {
      if (lane) this.open.delete(lane);
      await lane?.end().catch(() => {});
      throw e;
    }
  }

  async end(): Promise<void> {
    await Promise.all([...this.open].map((c) => c.end().catch(() => {})));
  }
}
