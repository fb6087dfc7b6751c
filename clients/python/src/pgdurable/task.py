"""A claimed task, as a handler sees it: its steps and its waits.

A handler runs again from the top after every claim (replay): a step that
committed returns its stored result without calling anything, and a wait
that ended returns how it ended.  A wait that has not ended raises
Suspended, which the worker catches: durable ended the lease, and the
claim that wakes the task runs the handler again.
"""
from __future__ import annotations

import contextlib
import logging
from datetime import timedelta
from typing import Any, Callable, NamedTuple

import psycopg
from psycopg.types.json import Jsonb

from . import errors
from .connection import execute
from .errors import InTransaction, LeftToRecovery, StepCallFailed, Stopping, Suspended, TaskLost
from .faults import crash_point

log = logging.getLogger("pgdurable")

CLASSES = ("pure", "idempotent", "queryable", "unsafe")
SPAWN_OPTIONS = {"run_at": "run_at", "priority": "priority", "cls": "class",
                 "max_attempts": "max_attempts", "deadline": "deadline",
                 "workflow_version": "workflow_version", "metadata": "metadata",
                 "concurrency_key": "concurrency_key"}
# the type of each of durable_spawn's options, to cast to
SPAWN_TYPES = {"run_at": "pg_catalog.timestamptz", "priority": "pg_catalog.int4", "class": "pg_catalog.text",
               "max_attempts": "pg_catalog.int4", "deadline": "pg_catalog.interval",
               "workflow_version": "pg_catalog.text", "metadata": "pg_catalog.jsonb",
               "concurrency_key": "pg_catalog.text"}


class Outcome(NamedTuple):
    """How a wait ended: ('received', payload), ('done', children),
    ('timed_out', ...)."""
    status: str
    value: Any


def _json(value):
    """jsonb, or SQL NULL for None (not the JSON null)."""
    return None if value is None else Jsonb(value)


def _interval(value):
    """Seconds (a number), a timedelta or PostgreSQL's text ('3 days')."""
    if value is None or isinstance(value, (str, timedelta)):
        return value
    return timedelta(seconds=value)


class Task:
    def __init__(self, worker, conn: psycopg.Connection, row):
        self.worker, self.conn = worker, conn
        self.id, self.fence, self.attempt, self.payload, self.checkpoint, _, versions = row
        self.versions = versions or {}  # what the task is pinned to (Worker(versions=...))
        self.begun = False  # durable_begin has said so
        self.completed = False  # durable_commit of the task has committed
        self._commit_pending = False  # ... or will, with the open transaction

    # ---- durable calls for this task ----

    def call(self, sql: str, *params) -> tuple | None:
        """One durable call under this task's fence: 55U01 means the task is
        no longer ours, 55U04 that only recovery may decide now."""
        lost = self.worker.heartbeat.lost_reason(self.id)
        if lost:
            raise TaskLost(lost)
        try:
            return execute(self.conn, sql, params).fetchone()
        except psycopg.Error as e:
            if e.sqlstate == errors.STALE_FENCE:
                raise TaskLost(e.diag.message_primary) from e
            if e.sqlstate == errors.INVALID_TRANSITION:
                raise LeftToRecovery(e.diag.message_primary) from e
            raise

    def begin(self) -> None:
        """durable_begin, right before the handler runs: from now on a lease
        that runs out spends the attempt.  Until then a crash gives it back,
        so that a worker that dies with a batch claimed costs only the tasks
        it began."""
        self.call("SELECT @api.durable_begin(%s::pg_catalog.int8, %s::pg_catalog.int8)", self.id, self.fence)
        self.begun = True

    def _in_transaction(self) -> bool:
        return self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def _refuse_in_transaction(self, what: str) -> None:
        if self._in_transaction():
            raise InTransaction(f"{what} inside task.transaction(): run it before or after the block"
                                " (a step's start must commit before its call; a wait ends the lease)")

    @contextlib.contextmanager
    def transaction(self):
        """The worker's connection in a transaction, for the application's own
        writes: task.complete(result) inside it commits the task with them,
        both or neither.  Only plain SQL, complete(), progress() and emit()
        belong in it: a step, a wait or a spawn inside it raises InTransaction."""
        try:
            with self.conn.transaction():
                yield self.conn
        except BaseException:
            self._commit_pending = False  # rolled back: the task is not done
            raise
        if self._commit_pending and not self._in_transaction():
            self.completed, self._commit_pending = True, False

    def complete(self, result: Any = None) -> None:
        crash_point("before_commit")
        self.call("SELECT @api.durable_commit(%s::pg_catalog.int8, %s::pg_catalog.int8, "
                  "%s::pg_catalog.jsonb)", self.id, self.fence, _json(result))
        if self._in_transaction():
            self._commit_pending = True  # done once the block commits
        else:
            self.completed = True

    def progress(self, progress: str) -> None:
        self.call("SELECT @api.durable_heartbeat(%s::pg_catalog.int8, %s::pg_catalog.int8, "
                  "%s::pg_catalog.text)", self.id, self.fence, progress)

    def stream(self, stream: str, chunk: Any) -> int:
        """Append chunk (JSON) to a stream of this task; returns its position.
        Readers see it once it commits: at once outside task.transaction()."""
        (seq,) = self.call("SELECT @api.durable_stream_append(%s::pg_catalog.int8, %s::pg_catalog.int8,"
                           " %s::pg_catalog.text, %s::pg_catalog.jsonb)",
                           self.id, self.fence, stream, _json(chunk))
        return seq

    def close_stream(self, stream: str) -> int:
        """End a stream of this task (again: nothing changes); returns the
        position of its end.  A stream still open when the task finishes
        ends there for its readers all the same."""
        (seq,) = self.call("SELECT @api.durable_stream_close(%s::pg_catalog.int8, %s::pg_catalog.int8,"
                           " %s::pg_catalog.text)", self.id, self.fence, stream)
        return seq

    # ---- steps ----

    def step(self, name: str, cls: str, call: Callable[[str], Any], request: Any = None, *,
             target: str | None = None, effect_id: Callable[[Any], str] | None = None,
             reserve: float | None = None, spent: Callable[[Any], float] | None = None) -> Any:
        """Run a side effect once: plan the step, start it, call
        call(idempotency_key), record the receipt, commit; or return the
        result it committed before.  cls is the step's class: pure,
        idempotent, queryable or unsafe.  effect_id(result) names the effect
        in the receipt (the remote side's id for it).

        The result is the same however the step settled: what call returned,
        or for a queryable step settled by a look-up what the worker's
        lookup returned (which is why lookup must return what call would
        have).  Not inside task.transaction(): InTransaction.

        reserve takes that amount from every spend budget of the task before
        the call, or raises BudgetExhausted (nothing called); spent(result)
        is what the call spent, charged at the commit (the whole reservation
        without it)."""
        if cls not in CLASSES:
            raise ValueError(f"step class must be one of {CLASSES}")
        self._refuse_in_transaction(f"step {name}")
        if self.worker.stopping.is_set():
            raise Stopping()
        for _ in range(3):
            try:
                return self._step(name, cls, call, request, target, effect_id, reserve, spent)
            except psycopg.Error as e:
                if e.sqlstate != errors.VERSION_CONFLICT:
                    raise
                log.info("step %s of task %s changed under us; reading it again", name, self.id)
        raise LeftToRecovery(f"step {name} keeps changing")

    def _step(self, name, cls, call, request, target, effect_id, reserve=None, spent=None):
        state, version, key, result = self.call(
            "SELECT state, version, idempotency_key, result"
            " FROM @api.durable_step(%s::pg_catalog.int8, %s::pg_catalog.int8, %s::pg_catalog.text, "
            "%s::pg_catalog.text, %s::pg_catalog.jsonb, %s::pg_catalog.text)",
            self.id, self.fence, name, cls, _json(request), target)
        if state in ("committed", "compensated"):
            self.worker.count("steps_skipped")
            return result  # done before, by us or by a worker that died
        found = None
        if state == "planned":
            # "started" commits before the call: a crash after the call then
            # leaves a step that recovery knows may have taken effect
            try:
                (version,) = self.call("SELECT @api.durable_step_start(%s::pg_catalog.int8, "
                                       "%s::pg_catalog.int8, %s::pg_catalog.text, %s::pg_catalog.int4,"
                                       " %s::pg_catalog.numeric)",
                                       self.id, self.fence, name, version, reserve)
            except psycopg.Error as e:
                if e.sqlstate != errors.BUDGET_EXHAUSTED:
                    raise
                raise errors.BudgetExhausted(name, e.diag.message_primary, e.diag.message_detail) from e
        elif state not in ("started", "unknown"):  # failed: by recovery, or an operator
            raise errors.Failed(f"step {name} is {state}", "permanent")
        # started or unknown, on a task we still hold (after a failed commit,
        # say): a call under this key may have happened.  Never resend blindly.
        elif cls == "queryable":
            found = self.worker.look_up(name, key)
            if found is None:  # it did not happen: planned again, run it
                self.call("SELECT @api.durable_record_receipt(%s::pg_catalog.int8, %s::pg_catalog.int8,"
                          " %s::pg_catalog.text, 'not_executed'::pg_catalog.text, NULL::pg_catalog.text,"
                          " '{\"lookup\": null}'::pg_catalog.jsonb)", self.id, self.fence, name)
                return self._step(name, cls, call, request, target, effect_id, reserve, spent)
        elif cls == "unsafe":
            raise LeftToRecovery(f"step {name} is {state} and unsafe to resend")
        if found is not None:
            result = found  # what the call returned, as the service tells it
        else:
            crash_point("before_call", cls)
            try:
                result = call(key)
            except Exception as e:
                raise self._call_failed(name, cls, version, e) from e
            crash_point("after_call", cls)
        effect = effect_id(result) if effect_id else None
        if cls != "pure":
            # evidence: had we died before the commit, recovery would complete
            # the step instead of resending it or asking a person; a
            # succeeded receipt's evidence becomes the step's result, so it
            # is the result itself, on every path
            (state,) = self.call("SELECT @api.durable_record_receipt(%s::pg_catalog.int8, "
                                 "%s::pg_catalog.int8, %s::pg_catalog.text,"
                                 " 'succeeded'::pg_catalog.text, %s::pg_catalog.text, %s::pg_catalog.jsonb)",
                                 self.id, self.fence, name, effect, _json(result))
            version += 1  # a receipt is a change of the step
            crash_point("after_receipt", cls)
        if state != "committed":  # a receipt for an unknown step commits it
            self.call("SELECT @api.durable_commit(%s::pg_catalog.int8, %s::pg_catalog.int8,"
                      " %s::pg_catalog.jsonb, step => %s::pg_catalog.text,"
                      " expected_version => %s::pg_catalog.int4, spent => %s::pg_catalog.numeric)",
                      self.id, self.fence, _json(result), name, version,
                      spent(result) if spent else None)
        self.worker.count("steps_run")
        self.progress(f"{name} done")
        return result

    def _call_failed(self, name, cls, version, e) -> BaseException:
        """The step's call raised: record it before the handler hears of it,
        so that a handler that catches the error cannot carry on with the
        step still started.  With an error class of its own (Failed), or for
        a step that can be resent, durable_fail names the step; else nobody
        knows whether it took effect: a queryable step is unknown, for the
        reconcile handler's look-up, an unsafe one goes to a person."""
        error_class = getattr(e, "error_class", None)
        if error_class is None and cls == "queryable":
            self.call("SELECT @api.durable_step_unknown(%s::pg_catalog.int8, %s::pg_catalog.int8, "
                      "%s::pg_catalog.text, %s::pg_catalog.int4, %s::pg_catalog.text)",
                      self.id, self.fence, name, version, f"{type(e).__name__}: {e}")
            return LeftToRecovery(f"step {name}: {type(e).__name__}: {e}; its outcome is unknown,"
                                  " for the reconcile handler to look up")
        failed = StepCallFailed(name, error_class or ("transient" if cls in ("pure", "idempotent")
                                                      else "unknown"), e)
        self.worker._fail(self, failed)
        return failed

    # ---- waits: each either returns how it ended or ends the lease ----

    def sleep(self, name: str, duration=None, *, until=None) -> None:
        """Sleep (in database time) for duration (seconds, a timedelta or
        '1 day') or until a time."""
        if (duration is None) == (until is None):
            raise ValueError("give a duration or a time to sleep until")
        sql = ("SELECT @api.durable_sleep(%s::pg_catalog.int8, %s::pg_catalog.int8, %s::pg_catalog.text, "
               "until => %s::pg_catalog.timestamptz)"
               if until is not None else
               "SELECT @api.durable_sleep(%s::pg_catalog.int8, %s::pg_catalog.int8, %s::pg_catalog.text, "
               "duration => %s::pg_catalog.interval)")
        self._wait(name, "sleep", sql, self.id, self.fence, name,
                   until if until is not None else _interval(duration))

    def await_event(self, name: str, event: str, timeout=None, queue: str | None = None) -> Outcome:
        """The event's ('received', payload), or ('timed_out', None)."""
        return self._wait(name, "await",
                          "SELECT status, payload FROM @api.durable_await(%s::pg_catalog.int8, "
                          "%s::pg_catalog.int8, %s::pg_catalog.text, %s::pg_catalog.text, "
                          "%s::pg_catalog.interval, %s::pg_catalog.text)",
                          self.id, self.fence, name, event, _interval(timeout), queue)

    def join(self, name: str, children: list[str] | None = None, timeout=None) -> Outcome:
        """('done', children) once every child named (all, by default) has
        finished, or ('timed_out', children as they were)."""
        return self._wait(name, "join",
                          "SELECT status, children"
                          " FROM @api.durable_join(%s::pg_catalog.int8, %s::pg_catalog.int8, "
                          "%s::pg_catalog.text, %s::pg_catalog.text[], %s::pg_catalog.interval)",
                          self.id, self.fence, name, children, _interval(timeout))

    def spawn(self, name: str, queue: str, payload: Any = None, **options) -> int:
        """Enqueue a child task once: a replay returns the same id.  options
        are durable_spawn's (run_at, priority, cls for class, ...).  Not
        inside task.transaction(): InTransaction."""
        self._refuse_in_transaction(f"spawn {name}")
        names = [SPAWN_OPTIONS[option] for option in options]  # KeyError: not an option
        extra = "".join(f", {option} => %s::{SPAWN_TYPES[option]}" for option in names)
        (child,) = self.call(f"SELECT @api.durable_spawn(%s::pg_catalog.int8, %s::pg_catalog.int8, "
                             f"%s::pg_catalog.text, %s::pg_catalog.text, %s::pg_catalog.jsonb{extra})",
                             self.id, self.fence, name, queue,
                             Jsonb(payload if payload is not None else {}),
                             *[Jsonb(v) if o == "metadata" else v for o, v in zip(names, options.values())])
        return child

    def emit(self, event: str, payload: Any = None, queue: str | None = None) -> bool:
        """Record an event of a queue (the worker's, by default), in this
        task's transaction if there is one: emitting is no wait (it neither
        ends the lease nor starts a step), so inside task.transaction() the
        event commits with the application's writes, or neither does.  To
        wait for an event, use await_event, outside the transaction."""
        (first,) = self.call("SELECT @api.durable_emit(%s::pg_catalog.text, %s::pg_catalog.text, "
                             "%s::pg_catalog.jsonb)",
                             queue or self.worker.queue, event, _json(payload))
        return first

    def _wait(self, name, kind, sql, *params):
        self._refuse_in_transaction(f"{kind} {name}")
        crash_point("before_wait", kind)
        row = self.call(sql, *params)
        status = row[0]
        log.info("%s %s of task %s: %s", kind, name, self.id, status)
        if status in ("sleeping", "waiting"):
            crash_point("after_wait", kind)
            raise Suspended(f"{kind} {name}")
        return Outcome(status, row[1] if len(row) > 1 else None)
