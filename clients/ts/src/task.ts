/**
 * A task the worker holds under its fence, as a handler sees it: steps that
 * run once whoever dies when, and waits.  A handler runs again from the top
 * after every claim: a committed step returns its stored result, a wait
 * that has ended returns how it ended, so the code before it costs nothing.
 */
import type pg from 'pg';
import {
  ConnectionLost, LeaveToRecovery, Stopping, TaskError, TaskLost, Waiting, errorClassOf, reaction, type ErrorClass,
} from './errors.js';
import type { Holdings } from './heartbeat.js';
import { queryRow } from './session.js';

/**
 * How a step's call may be repeated (no default: the application knows):
 * pure (recompute freely), idempotent (the remote side honours the key),
 * queryable (the outcome can be looked up by the key), unsafe (neither).
 */
export type StepClass = 'pure' | 'idempotent' | 'queryable' | 'unsafe';

/** Points a test may stop a worker at (see WorkerOptions.onPoint). */
export type Point =
  'before_call' | 'after_call' | 'after_receipt' | 'before_wait' | 'after_wait' | 'before_commit' | 'after_commit';

/**
 * Looks a queryable step's operation up at the remote side by its key: its
 * result when it happened, null when it did not.
 */
export type Lookup = (step: string, key: string, request: unknown) => Promise<unknown>;

/** Options of a step. */
export interface StepOptions<R> {
  /**
   * Names the effect in the step's receipt (durable.steps.effect_id): the
   * remote side's id for the operation, from the call's result.  durable's
   * duplicate_side_effects metric and the recovery package read it.
   */
  effectId?: (result: R) => string | null | undefined;
}

/** A child as durable_join reports it. */
export interface Child {
  name: string;
  task_id: string;
  state: string;
  result: unknown;
  error: unknown;
}

export interface Stats {
  completed: number;
  failed: number;
  stepsRun: number;
  stepsSkipped: number;
  lookedUp: number;
  released: number;
  lost: number;
  leftWaiting: number;
}

/** What a task needs of the worker that holds it. */
export interface TaskContext {
  client: pg.Client;
  holdings: Holdings;
  queue: string;
  stats: Stats;
  stopping: () => boolean;
  lookup?: Lookup;
  onPoint: (point: Point, kind?: string) => void;
  log: (msg: string) => void;
}

/** A claimed task, as durable_claim returns it. */
export interface Claimed {
  task_id: string;
  fence: string;
  attempt: number;
  payload: unknown;
  checkpoint: unknown;
}

/** The step's call failed and durable was told: the task is given up. */
export class StepFailed extends Error { override name = 'StepFailed'; }

/** The loop's signals: each ends the handler's run, and no commit follows it. */
function isSignal(e: unknown): e is Error {
  return e instanceof TaskLost || e instanceof LeaveToRecovery || e instanceof Waiting ||
    e instanceof Stopping || e instanceof StepFailed || e instanceof ConnectionLost;
}

const REREADS = 3;

/** A task's call's first two arguments: its id and fence (see session.ts for the casts). */
const TASK = '$1::pg_catalog.int8, $2::pg_catalog.int8';

export class Task<Payload = any> {
  readonly id: string;
  readonly fence: string;
  readonly attempt: number;
  readonly payload: Payload;
  readonly checkpoint: unknown;
  /** @internal the application's writes for the transaction that completes the task */
  readonly commitWrites: Array<(client: pg.Client) => Promise<void>> = [];
  /**
   * @internal the first of the loop's signals a call of this task raised
   * (TaskLost, LeaveToRecovery, Waiting, Stopping, a failed step, a lost
   * connection): sticky, so that a handler's own try/catch cannot swallow
   * it.  Every later call throws it again, and the loop never commits over
   * it: it drops the task, or leaves it to recovery, as the signal says.
   */
  abandoned: Error | null = null;

  /** @internal */
  constructor(private readonly ctx: TaskContext, claimed: Claimed) {
    this.id = claimed.task_id;
    this.fence = claimed.fence;
    this.attempt = claimed.attempt;
    this.payload = claimed.payload as Payload;
    this.checkpoint = claimed.checkpoint;
  }

  /**
   * @internal durable_begin, just before the handler runs: from now on a
   * lease that runs out spends the claim's attempt (until then it gives it
   * back, so a crash costs only the tasks it began).  55U01 is TaskLost.
   */
  begin(): Promise<void> {
    return this.guarded(async () => {
      await this.call(`SELECT @api.durable_begin(${TASK})`, []);
    });
  }

  /**
   * Run a step once: plan it, commit "started" before the call, call with
   * the step's idempotency key, record the receipt, commit the result.  A
   * step committed before returns its stored result without a call.
   */
  step<R>(name: string, cls: StepClass, request: unknown, call: (key: string) => Promise<R>,
    options: StepOptions<R> = {}): Promise<R> {
    return this.guarded(async () => {
      if (this.ctx.stopping()) throw new Stopping();
      for (let read = 1; ; read++) {
        try {
          return await this.tryStep(name, cls, request, call, options);
        } catch (e) {
          if (reaction(e) !== 'reread') throw e;
          if (read >= REREADS) throw new LeaveToRecovery(`step ${name} keeps changing`);
          this.ctx.log(`step ${name} of task ${this.id} changed under us; reading it again`);
        }
      }
    });
  }

  /**
   * A durable timer, for a duration ('1 day', an interval) or until a Date:
   * returns once it has elapsed; until then the task waits.
   */
  async sleep(name: string, duration: string): Promise<void>;
  async sleep(name: string, until: Date): Promise<void>;
  async sleep(name: string, durationOrUntil: string | Date): Promise<void>;
  async sleep(name: string, when: string | Date): Promise<void> {
    const row = await this.wait<{ status: string }>('sleep', name, when instanceof Date
      ? `SELECT @api.durable_sleep(${TASK}, $3::pg_catalog.text, until => $4::pg_catalog.timestamptz) AS status`
      : `SELECT @api.durable_sleep(${TASK}, $3::pg_catalog.text,
          duration => $4::pg_catalog.interval) AS status`, [when]);
    if (row.status === 'sleeping') this.waiting('sleep', name);
  }

  /** Await an event of the task's queue (or of `queue`): its payload, or timed out. */
  async await<T = unknown>(name: string, event: string, options: { timeout?: string; queue?: string } = {}):
  Promise<{ status: 'received'; payload: T } | { status: 'timed_out'; payload: null }> {
    const row = await this.wait<{ status: string; payload: T }>('await', name,
      `SELECT status, payload FROM @api.durable_await(${TASK}, $3::pg_catalog.text, $4::pg_catalog.text,
          $5::pg_catalog.interval, $6::pg_catalog.text)`,
      [event, options.timeout ?? null, options.queue ?? null]);
    if (row.status === 'waiting') this.waiting('await', name);
    return row.status === 'received'
      ? { status: 'received', payload: row.payload }
      : { status: 'timed_out', payload: null };
  }

  /** Enqueue a child task once per name: its task id. */
  async spawn(name: string, queue: string, payload: unknown = {}): Promise<string> {
    const row = await this.wait<{ id: string }>('spawn', name,
      `SELECT @api.durable_spawn(${TASK}, $3::pg_catalog.text, $4::pg_catalog.text,
          $5::pg_catalog.jsonb) AS id`, [queue, JSON.stringify(payload)]);
    return row.id;
  }

  /** Wait until the children named (all when none are) have finished. */
  async join(name: string, options: { children?: string[]; timeout?: string } = {}):
  Promise<{ status: 'done' | 'timed_out'; children: Child[] }> {
    const row = await this.wait<{ status: 'done' | 'timed_out' | 'waiting'; children: Child[] }>('join', name,
      `SELECT status, children FROM @api.durable_join(${TASK}, $3::pg_catalog.text, $4::pg_catalog.text[],
          $5::pg_catalog.interval)`,
      [options.children ?? null, options.timeout ?? null]);
    if (row.status === 'waiting') this.waiting('join', name);
    return { status: row.status as 'done' | 'timed_out', children: row.children };
  }

  /** Record an event of the task's queue (or of `queue`): true the first time. */
  emit(event: string, payload: unknown = null, queue = this.ctx.queue): Promise<boolean> {
    return this.guarded(async () => (await queryRow<{ emitted: boolean }>(this.ctx.client,
      'SELECT @api.durable_emit($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.jsonb) AS emitted',
      [queue, event, JSON.stringify(payload)],
      this.ctx.log)).emitted);
  }

  /** Append chunk (JSON) to a stream of this task; resolves to its position (1, 2, ...). */
  stream(stream: string, chunk: unknown): Promise<number> {
    return this.guarded(async () => Number((await this.call<{ seq: string }>(
      'SELECT @api.durable_stream_append($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text,'
      + ' $4::pg_catalog.jsonb) AS seq', [stream, JSON.stringify(chunk)])).seq));
  }

  /**
   * End a stream of this task (again: nothing changes); resolves to the
   * position of its end.  A stream still open when the task finishes ends
   * there for its readers all the same.
   */
  closeStream(stream: string): Promise<number> {
    return this.guarded(async () => Number((await this.call<{ seq: string }>(
      'SELECT @api.durable_stream_close($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text) AS seq',
      [stream])).seq));
  }

  /**
   * The application's own writes, run in the transaction that completes the
   * task: both land, or neither (a stale fence rolls them back too).
   */
  atCommit(write: (client: pg.Client) => Promise<void>): void {
    this.commitWrites.push(write);
  }

  /** fn, unless a signal ended the task's run before; a signal fn raises is kept. */
  private async guarded<T>(fn: () => Promise<T>): Promise<T> {
    if (this.abandoned) throw this.abandoned;
    try {
      return await fn();
    } catch (e) {
      if (isSignal(e)) this.abandoned ??= e;
      throw e;
    }
  }

  /** One durable call for this task, which takes (task_id, fence, ...). */
  private async call<R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<R> {
    const lost = this.ctx.holdings.lostBecause(this.id);
    if (lost !== null) throw new TaskLost(lost);
    try {
      return await queryRow<R>(this.ctx.client, sql, [this.id, this.fence, ...params], this.ctx.log);
    } catch (e) {
      if (reaction(e) === 'drop') throw new TaskLost((e as Error).message);
      if (reaction(e) === 'leave') throw new LeaveToRecovery((e as Error).message);
      throw e;
    }
  }

  private wait<R extends pg.QueryResultRow>(kind: string, name: string, sql: string, params: unknown[]): Promise<R> {
    return this.guarded(async () => {
      this.ctx.onPoint('before_wait', kind);
      const row = await this.call<R>(sql, [name, ...params]);
      this.ctx.log(`${kind} ${name} of task ${this.id}: ${row.status ?? 'spawned'}`);
      return row;
    });
  }

  /** The wait has not ended: durable ended the lease, the task is dropped. */
  private waiting(kind: string, name: string): never {
    this.ctx.onPoint('after_wait', kind);
    throw (this.abandoned = new Waiting(`${kind} ${name}`));
  }

  private async tryStep<R>(name: string, cls: StepClass, request: unknown, call: (key: string) => Promise<R>,
    options: StepOptions<R>): Promise<R> {
    const planned = await this.call<{ state: string; version: number; idempotency_key: string; result: R }>(
      `SELECT state, version, idempotency_key, result FROM @api.durable_step(${TASK}, $3::pg_catalog.text,
          $4::pg_catalog.text, $5::pg_catalog.jsonb)`,
      [name, cls, JSON.stringify(request)]);
    let { state, version } = planned;
    const key = planned.idempotency_key;
    let found: R | null = null;
    switch (state) {
      case 'committed':
      case 'compensated':
        this.ctx.stats.stepsSkipped++;
        return planned.result; // done before, by us or by a worker that died
      case 'planned':
        // "started" is committed before the call: a crash after the call
        // leaves a step that recovery knows may have taken effect
        ({ v: version } = await this.call<{ v: number }>(
          `SELECT @api.durable_step_start(${TASK}, $3::pg_catalog.text, $4::pg_catalog.int4) AS v`, [name, version]));
        break;
      case 'started':
      case 'unknown':
        // a call under this key may have happened (a worker meets this on a
        // task it still holds, e.g. after its commit failed): never resend
        // blindly; pure and idempotent steps are safe to resend under the key
        if (cls === 'queryable' && this.ctx.lookup) {
          found = ((await this.ctx.lookup(name, key, request)) ?? null) as R | null;
          if (found === null) { // it did not happen: planned again, run it
            await this.call(`SELECT @api.durable_record_receipt(${TASK}, $3::pg_catalog.text,
                'not_executed'::pg_catalog.text, NULL::pg_catalog.text, NULL::pg_catalog.jsonb)`, [name]);
            return this.tryStep(name, cls, request, call, options);
          }
        } else if (cls === 'queryable' || cls === 'unsafe') { // nobody can know here: the recovery table decides
          throw new LeaveToRecovery(`step ${name} is ${state} and cannot be resent`);
        }
        break;
      default: // failed: its call is never sent again, whatever its class
        throw new TaskError(`step ${name} is ${state}: it is not run again`, 'permanent');
    }
    let result: R;
    if (found !== null) {
      result = found; // the operation's result, as the call would have returned it
    } else {
      this.ctx.onPoint('before_call', cls);
      try {
        result = await call(key);
      } catch (e) {
        throw await this.callFailed(name, cls, version, e);
      }
      this.ctx.onPoint('after_call', cls);
    }
    if (cls !== 'pure') {
      // evidence: had the worker died before the commit, recovery would
      // complete the step instead of resending it or asking a person; a
      // succeeded receipt's evidence becomes the step's result, so it is
      // the result itself, on every path
      ({ state } = await this.call<{ state: string }>(
        `SELECT @api.durable_record_receipt(${TASK}, $3::pg_catalog.text, 'succeeded'::pg_catalog.text,
            $4::pg_catalog.text, $5::pg_catalog.jsonb) AS state`,
        [name, options.effectId?.(result) ?? null, JSON.stringify(result ?? null)]));
      version += 1; // a receipt is a change of the step
      this.ctx.onPoint('after_receipt', cls);
    }
    if (state !== 'committed') { // a receipt for an unknown step commits it
      await this.call(`SELECT @api.durable_commit(${TASK}, $3::pg_catalog.jsonb,
          step => $4::pg_catalog.text, expected_version => $5::pg_catalog.int4)`,
        [JSON.stringify(result ?? null), name, version]);
    }
    this.ctx.stats.stepsRun++;
    await this.call(`SELECT @api.durable_heartbeat(${TASK}, $3::pg_catalog.text)`, [`${name} done`]);
    return result;
  }

  /**
   * The call threw.  With an error class of its own, the step's attempt
   * fails with it (durable_fail ... step); else a retry-safe step's attempt
   * failed transiently, and for a queryable or unsafe one nobody knows
   * whether it took effect: the step is unknown, for a look-up or a person.
   */
  private async callFailed(name: string, cls: StepClass, version: number, e: unknown): Promise<Error> {
    const own = (e as { errorClass?: ErrorClass } | null)?.errorClass;
    const message = e instanceof Error ? e.message : String(e);
    if (own === undefined && (cls === 'queryable' || cls === 'unsafe')) {
      await this.call(`SELECT @api.durable_step_unknown(${TASK}, $3::pg_catalog.text, $4::pg_catalog.int4,
          $5::pg_catalog.text)`, [name, version, message]);
      return new LeaveToRecovery(`step ${name}: ${message}; its outcome is unknown`);
    }
    const { action } = await this.call<{ action: string }>(
      `SELECT @api.durable_fail(${TASK}, $3::pg_catalog.text, $4::pg_catalog.jsonb,
          NULL::pg_catalog.interval, $5::pg_catalog.text) AS action`,
      [own ?? errorClassOf(e), JSON.stringify({ error: message }), name]);
    return new StepFailed(`step ${name}: ${message}; ${action}`);
  }
}
