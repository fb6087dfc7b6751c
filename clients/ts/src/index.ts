/**
 * pgdurable: workers for durable on node-postgres.  A worker imports this,
 * gives its queue a handler, and declares each side effect as a step of
 * its class; the library does durable's protocol around them.
 */
export { Worker, type WorkerOptions, type Handler } from './worker.js';
export { readStream, type Chunk, type ReadStreamOptions } from './stream.js';
export { Task, type StepClass, type StepOptions, type Point, type Lookup, type Child, type Stats } from './task.js';
export {
  TaskError, SQLSTATE, reaction, sqlstate, type ErrorClass, type Reaction,
} from './errors.js';
