/**
 * Producers: enqueue tasks, emit events, schedule, and wait for results.
 * Each function takes the caller's own client (a pg.Client, a pool's
 * client, or a pg.Pool for statements of their own) and runs one statement
 * on it, in whatever transaction the caller has open there: it never
 * begins or commits, so a task enqueued in the transaction that writes an
 * order exists exactly when the order does.  A statement that fails is
 * never run again here (in the caller's transaction it could not be: the
 * transaction is aborted); what the server raised is thrown as the
 * DurableError of its SQLSTATE, the pg error as its cause.
 *
 * Task ids are 64-bit: they come back as strings, as the worker's Task.id,
 * and are taken as strings, bigints or numbers.  Options are passed in
 * named notation, only those given: the function's defaults are the
 * server's (docs/sql-api.md).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { asDurableError } from './errors.js';
import { apiSql, type Queryable } from './session.js';
import type { StepClass } from './task.js';

/** A task id: int8, a string as durable hands it out. */
export type TaskId = string | bigint | number;

/** A PostgreSQL interval: '30 seconds', '1 day'. */
export type Interval = string;

/** A task's state, as durable_result reports it. */
export type TaskState =
  'created' | 'ready' | 'running' | 'waiting' | 'completed' | 'failed' | 'cancelled' | 'needs_review';

/** The options of a task that durable_enqueue and durable_enqueue_batch share. */
export interface TaskOptions {
  runAt?: Date | string;
  /** higher is claimed first (0) */
  priority?: number;
  /** the activity class the recovery table judges the task by when its lease runs out ('idempotent') */
  class?: StepClass;
  maxAttempts?: number;
  deadline?: Interval;
  workflowVersion?: string;
  metadata?: unknown;
}

/** durable_enqueue's options (all but queue and payload). */
export interface EnqueueOptions extends TaskOptions {
  /** the same key with the same payload returns the first task's id; another payload is 55U03 */
  idempotencyKey?: string;
  concurrencyKey?: string;
  fairnessKey?: string;
  /** units of each rate limit a claim of the task takes: {"llm-requests": 1} */
  rateLimits?: Record<string, number>;
  /** spend budgets its steps reserve from */
  budgets?: string[];
  spendLimit?: number | string;
}

/** durable_enqueue_batch's options: one key per payload, the rest for all. */
export interface EnqueueBatchOptions extends TaskOptions {
  idempotencyKeys?: Array<string | null>;
  concurrencyKeys?: Array<string | null>;
  fairnessKeys?: Array<string | null>;
}

/** What durable_result reports of a task. */
export interface TaskOutcome {
  state: TaskState;
  /** what the task completed with (completed) */
  result: unknown;
  /** its last error (failed, or a task that will retry) */
  error: unknown;
  finishedAt: Date | null;
  /** why it stopped: attempts_exhausted, step_failed, ... (a task whose last lease ran out has no error) */
  stopCode: string | null;
}

export interface WaitOptions {
  /** reject with TimeoutError after this long (never) */
  timeoutMs?: number;
  /** the first wait between two reads (50); each doubles, up to maxPollMs */
  pollMs?: number;
  /** the longest wait between two reads (1000) */
  maxPollMs?: number;
  /** stops the wait: rejects with its reason */
  signal?: AbortSignal;
}

/** waitForResult: the task failed; `error` is its last error (JSON), `stopCode` why it stopped. */
export class TaskFailedError extends Error {
  override name = 'TaskFailedError';
  constructor(readonly taskId: string, readonly error: unknown, readonly finishedAt: Date | null,
    readonly stopCode: string | null = null) {
    super(`task ${taskId} failed: ${[stopCode, error == null ? null : JSON.stringify(error)]
      .filter((why) => why != null).join(', ')}`);
  }
}

/** waitForResult: the task was cancelled. */
export class TaskCancelledError extends Error {
  override name = 'TaskCancelledError';
  constructor(readonly taskId: string, readonly error: unknown, readonly finishedAt: Date | null) {
    super(`task ${taskId} was cancelled`);
  }
}

/** waitForResult: the task had not finished when the time was up; `state` is what it was then. */
export class TimeoutError extends Error {
  override name = 'TimeoutError';
  constructor(readonly taskId: string, readonly state: TaskState, readonly timeoutMs: number) {
    super(`task ${taskId} is still ${state} after ${timeoutMs} ms`);
  }
}

/** waitForResult on a client with a transaction open: no worker could see a task it enqueued before it ends. */
export class InTransactionError extends Error {
  override name = 'InTransactionError';
  constructor(readonly taskId: string) {
    super(`waitForResult for task ${taskId} with a transaction open on the client: commit (or roll back) first`);
  }
}

/** One named argument: its parameter's name and type (pg_catalog's), and its value; undefined or null: not given. */
type Named = [name: string, type: string, value: unknown];

/** `name => $n::pg_catalog.type` for each given argument, numbered after first; and their values. */
function named(first: number, args: Named[]): { sql: string; values: unknown[] } {
  const given = args.filter(([, , value]) => value !== undefined && value !== null);
  return {
    sql: given.map(([name, type], i) => `, ${name} => $${first + i}::pg_catalog.${type}`).join(''),
    values: given.map(([, , value]) => value),
  };
}

const json = (value: unknown): string | undefined => (value === undefined || value === null ? undefined : JSON.stringify(value));
/** A payload as jsonb's text: none given is {}, as the functions' default. */
const payloadJson = (payload: unknown): string => JSON.stringify(payload === undefined ? {} : payload);

/** One statement of durable's API on the caller's client; its rows. */
async function run<R extends Record<string, unknown>>(client: Queryable, sql: string, values: unknown[]): Promise<R[]> {
  try {
    return (await client.query<R>(await apiSql(client, sql), values)).rows;
  } catch (e) {
    throw asDurableError(e);
  }
}

/** The options of a task that durable_enqueue and durable_enqueue_batch share, in their order. */
function taskOptions(options: TaskOptions): Named[] {
  return [
    ['run_at', 'timestamptz', options.runAt],
    ['priority', 'int4', options.priority],
    ['class', 'text', options.class],
    ['max_attempts', 'int4', options.maxAttempts],
    ['deadline', 'interval', options.deadline],
    ['workflow_version', 'text', options.workflowVersion],
    ['metadata', 'jsonb', json(options.metadata)],
  ];
}

/** Add a task to a queue: its id. */
export async function enqueue(client: Queryable, queue: string, payload: unknown = {},
  options: EnqueueOptions = {}): Promise<string> {
  const o = named(3, [
    ['idempotency_key', 'text', options.idempotencyKey],
    ...taskOptions(options),
    ['concurrency_key', 'text', options.concurrencyKey],
    ['fairness_key', 'text', options.fairnessKey],
    ['rate_limits', 'jsonb', json(options.rateLimits)],
    ['budgets', 'text[]', options.budgets],
    ['spend_limit', 'numeric', options.spendLimit],
  ]);
  const [row] = await run<{ id: string }>(client,
    `SELECT @api.durable_enqueue($1::pg_catalog.text, $2::pg_catalog.jsonb${o.sql}) AS id`,
    [queue, payloadJson(payload), ...o.values]);
  return row.id;
}

/** Add a task per payload, all or none, in one statement: their ids, in order. */
export async function enqueueBatch(client: Queryable, queue: string, payloads: unknown[],
  options: EnqueueBatchOptions = {}): Promise<string[]> {
  const o = named(3, [
    ['idempotency_keys', 'text[]', options.idempotencyKeys],
    ...taskOptions(options),
    ['concurrency_keys', 'text[]', options.concurrencyKeys],
    ['fairness_keys', 'text[]', options.fairnessKeys],
  ]);
  const [row] = await run<{ ids: string[] }>(client,
    `SELECT @api.durable_enqueue_batch($1::pg_catalog.text, $2::pg_catalog.jsonb[]${o.sql}) AS ids`,
    [queue, payloads.map(payloadJson), ...o.values]);
  return row.ids;
}

/**
 * One task for the calls of a key until its first claim: it runs `delay`
 * after the last call, never later than `maxWait` after the first, with
 * the last call's payload (trailing) or the first's (leading).  Its id.
 */
export async function debounce(client: Queryable, queue: string, key: string, payload: unknown, delay: Interval,
  options: { maxWait?: Interval; mode?: 'trailing' | 'leading' } = {}): Promise<string> {
  const o = named(5, [['max_wait', 'interval', options.maxWait], ['mode', 'text', options.mode]]);
  const [row] = await run<{ id: string }>(client,
    `SELECT @api.durable_debounce($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.jsonb,
        $4::pg_catalog.interval${o.sql}) AS id`,
    [queue, key, payloadJson(payload), delay, ...o.values]);
  return row.id;
}

/** At most one task of a key per period: a call within `per` of the key's task returns its id. */
export async function throttle(client: Queryable, queue: string, key: string, payload: unknown,
  per: Interval): Promise<string> {
  const [row] = await run<{ id: string }>(client,
    `SELECT @api.durable_throttle($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.jsonb,
        $4::pg_catalog.interval) AS id`,
    [queue, key, payloadJson(payload), per]);
  return row.id;
}

/** Record an event of a queue and wake its awaits: true the first time, false for the same payload again. */
export async function emit(client: Queryable, queue: string, event: string, payload: unknown = null): Promise<boolean> {
  const [row] = await run<{ emitted: boolean }>(client,
    'SELECT @api.durable_emit($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.jsonb) AS emitted',
    [queue, event, JSON.stringify(payload)]);
  return row.emitted;
}

/**
 * Create or replace a cron schedule (role durable_operator): the
 * reconciler enqueues each occurrence once.  Its next run.
 */
export async function schedule(client: Queryable, name: string, cron: string, queue: string, payload: unknown = {},
  options: { timezone?: string; backfill?: boolean } = {}): Promise<Date> {
  const o = named(5, [['timezone', 'text', options.timezone], ['backfill', 'bool', options.backfill]]);
  const [row] = await run<{ next: Date }>(client,
    `SELECT @api.durable_schedule($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.text,
        $4::pg_catalog.jsonb${o.sql}) AS next`,
    [name, cron, queue, payloadJson(payload), ...o.values]);
  return row.next;
}

/** Remove a schedule (role durable_operator): false when there was none. */
export async function unschedule(client: Queryable, name: string): Promise<boolean> {
  const [row] = await run<{ removed: boolean }>(client,
    'SELECT @api.durable_unschedule($1::pg_catalog.text) AS removed', [name]);
  return row.removed;
}

/** A task's state and, once it finished, its result or last error (UnknownObjectError: no such task). */
export async function result(client: Queryable, taskId: TaskId): Promise<TaskOutcome> {
  const [row] = await run<{ state: TaskState; result: unknown; error: unknown; finished_at: Date | null;
    stop_code: string | null }>(client,
    'SELECT state, result, error, finished_at, stop_code FROM @api.durable_result($1::pg_catalog.int8)',
    [String(taskId)]);
  return {
    state: row.state, result: row.result, error: row.error, finishedAt: row.finished_at, stopCode: row.stop_code,
  };
}

/**
 * Wait for a task to finish: its result once it completed; TaskFailedError
 * or TaskCancelledError when it ended otherwise, TimeoutError when the time
 * is up first.  It reads durable_result again and again, each read a
 * statement of its own, the waits between them doubling up to maxPollMs:
 * no LISTEN, so a transaction-mode pooler is no obstacle.  Not with a
 * transaction open on the client (InTransactionError): inside the one that
 * enqueued the task no worker could see it.  A task in review
 * (needs_review) is waited for: a person decides how it ends.
 */
export async function waitForResult<R = unknown>(client: Queryable, taskId: TaskId,
  options: WaitOptions = {}): Promise<R> {
  const { timeoutMs = Infinity, pollMs = 50, maxPollMs = 1000, signal } = options;
  const id = String(taskId);
  // a client of a recent node-postgres says whether it is in a transaction; a pool never is
  const status = (client as { getTransactionStatus?: () => string | null }).getTransactionStatus?.();
  if (status === 'T' || status === 'E') throw new InTransactionError(id);
  const deadline = Date.now() + timeoutMs;
  for (let wait = pollMs; ; wait = Math.min(wait * 2, maxPollMs)) {
    signal?.throwIfAborted();
    const r = await result(client, id);
    if (r.state === 'completed') return r.result as R;
    if (r.state === 'failed') throw new TaskFailedError(id, r.error, r.finishedAt, r.stopCode);
    if (r.state === 'cancelled') throw new TaskCancelledError(id, r.error, r.finishedAt);
    const left = deadline - Date.now();
    if (left <= 0) throw new TimeoutError(id, r.state, timeoutMs);
    await sleep(Math.min(wait, left), undefined, { signal }).catch((e: unknown) => {
      signal?.throwIfAborted(); // the signal's reason, as before a read
      throw e;
    });
  }
}
