/**
 * What the loop does on each error: durable's SQLSTATE table (the README's
 * "Errors") turned into reactions.  node-postgres puts the SQLSTATE in
 * err.code.  Whether the worker's connection is lost is decided on the
 * library's own client only (session.ts wraps what its queries throw in
 * ConnectionLost), never on an error's shape: a handler's own HTTP call that
 * fails with ECONNREFUSED, or its own pg client that loses its server, is
 * the handler's failure.
 */
import pg from 'pg';

/** The error classes durable_fail and durable_next_action know. */
export type ErrorClass = 'transient' | 'permanent' | 'unknown';

/**
 * - drop: another worker holds the task now (55U01): stop, claim another
 * - reread: a step changed under us (55U02): read it again, decide again
 * - leave: the state does not allow the call (55U04): the task is left to
 *   its lease and the recovery table
 * - retry: the statement's transaction was rolled back and may be run
 *   again as it was (40001, 40P01, 57014)
 * - reconnect: the worker's own connection is gone (ConnectionLost)
 * - fail: anything else; from a handler it becomes durable_fail
 */
export type Reaction = 'drop' | 'reread' | 'leave' | 'retry' | 'reconnect' | 'fail';

export const SQLSTATE = {
  staleFence: '55U01',
  versionMismatch: '55U02',
  idempotencyConflict: '55U03',
  invalidTransition: '55U04',
  budgetExhausted: '55U05',
  undefinedObject: '42704',
  insufficientPrivilege: '42501',
  serializationFailure: '40001',
  deadlockDetected: '40P01',
  queryCanceled: '57014',
} as const;

/**
 * A server's error, also from another copy of pg than the library's (an
 * application's own client may come from one): node-postgres's
 * DatabaseError, or an error with its severity and a five-character
 * SQLSTATE (a socket's EPIPE has no severity).
 */
function isServerError(e: unknown): e is pg.DatabaseError {
  if (e instanceof pg.DatabaseError) return true;
  const { code, severity } = (e ?? {}) as { code?: unknown; severity?: unknown };
  return e instanceof Error && typeof severity === 'string' && typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
}

/** The SQLSTATE of a server error (or of a DurableError), or undefined. */
export function sqlstate(e: unknown): string | undefined {
  if (e instanceof DurableError) return e.code;
  return isServerError(e) ? e.code : undefined;
}

export function reaction(e: unknown): Reaction {
  if (e instanceof ConnectionLost) return 'reconnect';
  const code = sqlstate(e);
  if (code === undefined) return 'fail';
  switch (code) {
    case SQLSTATE.staleFence: return 'drop';
    case SQLSTATE.versionMismatch: return 'reread';
    case SQLSTATE.invalidTransition: return 'leave';
    case SQLSTATE.serializationFailure:
    case SQLSTATE.deadlockDetected:
    case SQLSTATE.queryCanceled: return 'retry';
  }
  return 'fail';
}

/**
 * The worker's own connection to durable is gone: what a query of the
 * library's client threw when it was no server's answer (a socket error,
 * node-postgres's "Connection terminated"), or the server's class 08 or
 * 57P01..57P03.  `cause` is the error itself.
 */
export class ConnectionLost extends Error {
  override name = 'ConnectionLost';
  constructor(cause: unknown) {
    super(describe(cause), { cause });
  }
}

/** An error's message; a connect to several addresses fails with an AggregateError whose own is empty. */
function describe(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  if (e.message) return e.message;
  if (e instanceof AggregateError) return e.errors.map(describe).join('; ');
  return (e as { code?: string }).code ?? e.name;
}

/** What a query of the library's own client threw, as the loop must read it. */
export function fromLibraryClient(e: unknown): unknown {
  if (e instanceof ConnectionLost) return e;
  if (!(e instanceof pg.DatabaseError)) return new ConnectionLost(e);
  return /^(08|57P0[123])/.test(e.code ?? '') ? new ConnectionLost(e) : e;
}

/**
 * The error class durable_fail records for an error thrown by a handler or
 * a step's call: the error's own `errorClass` when it has one; else durable's
 * codes that mean a bug in the call (55U03, class 22, 42, 54) are permanent,
 * and everything else transient.
 */
export function errorClassOf(e: unknown): ErrorClass {
  const own = (e as { errorClass?: unknown } | null)?.errorClass;
  if (own === 'transient' || own === 'permanent' || own === 'unknown') return own;
  const code = sqlstate(e) ?? '';
  return code === SQLSTATE.idempotencyConflict || /^(22|42|54)/.test(code) ? 'permanent' : 'transient';
}

/** An error a handler throws to choose the error class of its failure. */
export class TaskError extends Error {
  constructor(message: string, readonly errorClass: ErrorClass, readonly detail?: unknown) {
    super(message);
    this.name = 'TaskError';
  }
}

/** The task is no longer ours (55U01, or the heartbeat found it gone). */
export class TaskLost extends Error { override name = 'TaskLost'; }
/** Only the recovery table (or a person) may decide now: leave the task. */
export class LeaveToRecovery extends Error { override name = 'LeaveToRecovery'; }
/** The task now waits (a sleep, await or join that has not ended): drop it. */
export class Waiting extends Error { override name = 'Waiting'; }
/** The worker is stopping: give the task back at this step boundary. */
export class Stopping extends Error { override name = 'Stopping'; }

/**
 * An error durable raised, as the producer functions throw it: the
 * SQLSTATE in `code`, the server's message, detail and hint, and the
 * error node-postgres threw as `cause`.  The codes a caller acts on have a
 * class of their own (asDurableError); any other SQLSTATE is a DurableError.
 */
export class DurableError extends Error {
  override name = 'DurableError';
  readonly code: string;
  readonly detail?: string;
  readonly hint?: string;
  constructor(cause: pg.DatabaseError) {
    super(cause.message, { cause });
    this.code = cause.code ?? '';
    this.detail = cause.detail;
    this.hint = cause.hint;
  }
}
/** 55U01: the fence is not the task's any more; someone else holds it. */
export class StaleFenceError extends DurableError { override name = 'StaleFenceError'; }
/** 55U02: a compare-and-swap found another version: read again, decide again. */
export class VersionConflictError extends DurableError { override name = 'VersionConflictError'; }
/** 55U03: a key (or a wait's name, an event) came back with another request. */
export class IdempotencyConflictError extends DurableError { override name = 'IdempotencyConflictError'; }
/** 55U04: the state does not allow the call now. */
export class InvalidTransitionError extends DurableError { override name = 'InvalidTransitionError'; }
/** 55U05: a spend budget has not enough left. */
export class BudgetExhaustedError extends DurableError { override name = 'BudgetExhaustedError'; }
/** 42704: no such queue, task, schedule, rate limit or budget. */
export class UnknownObjectError extends DurableError { override name = 'UnknownObjectError'; }
/** 42501: the role lacks the API role, or the restricted queue's grant. */
export class PermissionDeniedError extends DurableError { override name = 'PermissionDeniedError'; }
/** Class 22: a bad argument (22023), a NULL where one is needed (22004), ... */
export class InvalidArgumentError extends DurableError { override name = 'InvalidArgumentError'; }

const ERROR_CLASSES: Record<string, new (cause: pg.DatabaseError) => DurableError> = {
  [SQLSTATE.staleFence]: StaleFenceError,
  [SQLSTATE.versionMismatch]: VersionConflictError,
  [SQLSTATE.idempotencyConflict]: IdempotencyConflictError,
  [SQLSTATE.invalidTransition]: InvalidTransitionError,
  [SQLSTATE.budgetExhausted]: BudgetExhaustedError,
  [SQLSTATE.undefinedObject]: UnknownObjectError,
  [SQLSTATE.insufficientPrivilege]: PermissionDeniedError,
};

/** A server's error as the DurableError of its SQLSTATE; any other error as it is. */
export function asDurableError(e: unknown): unknown {
  if (e instanceof DurableError || !isServerError(e)) return e;
  const code = e.code ?? '';
  const Class = ERROR_CLASSES[code] ?? (code.startsWith('22') ? InvalidArgumentError : DurableError);
  return new Class(e);
}
