/**
 * pgdurable: producers and workers for durable on node-postgres.  A
 * producer enqueues tasks in its own transactions and waits for their
 * results; a worker gives its queue a handler and declares each side
 * effect as a step of its class, and the library does durable's protocol
 * around them.
 */
export { Worker, type WorkerOptions, type Handler } from './worker.js';
export {
  enqueue, enqueueBatch, debounce, throttle, emit, schedule, unschedule, result, waitForResult,
  TaskFailedError, TaskCancelledError, TimeoutError, InTransactionError,
  type TaskOptions, type EnqueueOptions, type EnqueueBatchOptions, type TaskOutcome, type TaskState, type TaskId, type Interval,
  type WaitOptions,
} from './producer.js';
export { readStream, type Chunk, type ReadStreamOptions } from './stream.js';
export { Task, type StepClass, type StepOptions, type Point, type Lookup, type Child, type Stats } from './task.js';
export {
  TaskError, SQLSTATE, reaction, sqlstate, asDurableError, type ErrorClass, type Reaction,
  DurableError, StaleFenceError, VersionConflictError, IdempotencyConflictError, InvalidTransitionError,
  BudgetExhaustedError, UnknownObjectError, PermissionDeniedError, InvalidArgumentError,
} from './errors.js';
export type { Queryable } from './session.js';
