"""What a worker does for each error a durable call can raise, and the
typed errors the producer API raises.

durable's own SQLSTATEs (class 55, subclass letter U) have no psycopg
exception classes: psycopg maps them by their class to
ObjectNotInPrerequisiteState, an OperationalError like a lost connection,
so the worker matches ``e.sqlstate``, never the exception's type.  The
producer API raises DurableError and its subclasses instead (durable_error),
chained from psycopg's error.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

STALE_FENCE = "55U01"  # another worker holds the task now: drop it
VERSION_CONFLICT = "55U02"  # the step changed under us: read it again
IDEMPOTENCY_CONFLICT = "55U03"  # same name or key, other request: a bug
INVALID_TRANSITION = "55U04"  # not allowed now, e.g. a step is in doubt
BUDGET_EXHAUSTED = "55U05"  # a step's reserve does not fit a spend budget
# durable cannot serve the call now: a library newer than the installed SQL
# (an upgrade between restart and ALTER EXTENSION durable UPDATE), or tables
# changed by hand; the worker's loop waits and tries again
NOT_READY = "55000"
UNDEFINED_OBJECT = "42704"  # no such queue, task, schedule, budget, ...
INSUFFICIENT_PRIVILEGE = "42501"  # the role lacks the grant

# A statement psycopg prepared on one server session ran in another: a
# transaction-mode pooler hands each transaction to any session.  26000: the
# statement is not in that session; 42P05: another client's of that name is;
# 08P01: another client's, with other parameters.
PREPARED_STATEMENT_LOST = frozenset({"26000", "42P05", "08P01"})

# The transaction was rolled back and may simply run again: a serialization
# failure, a deadlock, a statement_timeout or a pg_cancel_backend.
RETRY_TRANSACTION = frozenset({"40001", "40P01", "57014"})

# The call itself is wrong: running it again gives the same answer, so the
# task fails for good (an operator replays it once the cause is fixed).
# Data exceptions (22: 22P02, 2202E, 22008, ...), syntax errors and access
# rule violations (42: 42704, 42501, 42883, ...), program limits (54), and a
# replay with another request (55U03), as the TypeScript client decides.
FIX_THE_CALL_CLASSES = ("22", "42", "54")


def fix_the_call(state: str | None) -> bool:
    return bool(state) and (state == IDEMPOTENCY_CONFLICT or state.startswith(FIX_THE_CALL_CLASSES))


def prepared_statement_lost(exc: BaseException) -> bool:
    """The error a transaction-mode pooler causes to a client that prepares."""
    diag = getattr(exc, "diag", None)
    return (sqlstate(exc) in PREPARED_STATEMENT_LOST
            and "prepared statement" in ((diag and diag.message_primary) or ""))

ERROR_CLASSES = ("transient", "permanent", "unknown")


def sqlstate(exc: BaseException) -> str | None:
    return getattr(exc, "sqlstate", None)


def describe(exc: BaseException) -> str:
    """The first line of an error: libpq's own messages run over several."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def connection_lost(conn) -> bool:
    """The server or the network went away from the library's own connection:
    reconnect, do not retry in place.  Judged on that connection alone,
    never on an error's class: an 08xxx or 57Pxx raised on the application's
    own connection, or an OperationalError such as 55U04, 40001 or 53xxx on
    ours, leaves ours working."""
    return bool(conn.closed or getattr(conn, "broken", False))


class DurableError(Exception):
    """An error of a durable call, by its SQLSTATE (sqlstate; None for what
    is no server error, such as a task that failed), with the server's
    detail and hint; the producer API raises it from psycopg's error."""
    sqlstate: str | None = None

    def __init__(self, message: str, sqlstate: str | None = None, detail: str | None = None,
                 hint: str | None = None):
        super().__init__(message)
        if sqlstate is not None:
            self.sqlstate = sqlstate
        self.detail, self.hint = detail, hint


class StaleFence(DurableError):
    """55U01: the task is not held under that fence (any more)."""
    sqlstate = STALE_FENCE


class VersionConflict(DurableError):
    """55U02: the step changed since it was read."""
    sqlstate = VERSION_CONFLICT


class IdempotencyConflict(DurableError):
    """55U03: the same idempotency key (or name) with another request."""
    sqlstate = IDEMPOTENCY_CONFLICT


class InvalidTransition(DurableError):
    """55U04: not allowed in the state the task or step is in."""
    sqlstate = INVALID_TRANSITION


class UnknownObject(DurableError):
    """42704: no such queue, task, schedule, rate limit or budget."""
    sqlstate = UNDEFINED_OBJECT


class PermissionDenied(DurableError):
    """42501: the role may not do that (durable_producer, a queue's grant)."""
    sqlstate = INSUFFICIENT_PRIVILEGE


class InvalidArgument(DurableError):
    """Class 22: a bad value (22023), a NULL where one is needed (22004), ..."""


class ConnectFailed(DurableError):
    """Worker.run() could not connect at start (a bad address, database,
    role or password): a few attempts, then this, with the reason."""


class TaskFailed(DurableError):
    """wait_for_result: the task failed; error is its last error (JSON),
    stop_code why it stopped (attempts_exhausted, step_failed, ...: a task
    whose last lease ran out has a stop code and no error)."""

    def __init__(self, task_id: int, error: Any, finished_at: datetime | None,
                 stop_code: str | None = None):
        message = error.get("message") if isinstance(error, dict) else None
        why = ", ".join(str(w) for w in (stop_code, message or error) if w is not None)
        super().__init__(f"task {task_id} failed" + (f": {why}" if why else ""))
        self.task_id, self.error, self.finished_at, self.stop_code = task_id, error, finished_at, stop_code


class TaskCancelled(DurableError):
    """wait_for_result: the task was cancelled."""

    def __init__(self, task_id: int, error: Any, finished_at: datetime | None):
        super().__init__(f"task {task_id} was cancelled")
        self.task_id, self.error, self.finished_at = task_id, error, finished_at


class ResultTimeout(DurableError, TimeoutError):
    """wait_for_result: the task had not finished when the timeout ran out
    (state: its state then).  A TimeoutError too."""

    def __init__(self, task_id: int, state: str, timeout: float):
        super().__init__(f"task {task_id} is still {state} after {timeout:g} s")
        self.task_id, self.state = task_id, state


_TYPED = {STALE_FENCE: StaleFence, VERSION_CONFLICT: VersionConflict,
          IDEMPOTENCY_CONFLICT: IdempotencyConflict, INVALID_TRANSITION: InvalidTransition,
          UNDEFINED_OBJECT: UnknownObject, INSUFFICIENT_PRIVILEGE: PermissionDenied}
# What belongs to the caller's transaction or connection, not to the call:
# psycopg's own error goes up, so that code that retries a transaction on
# 40001 or reconnects on 08006 keeps working (08 connection, 25 transaction
# state, 40 rollback, 53 resources, 57 operator intervention, 58 system, XX).
PASSED_THROUGH_CLASSES = ("08", "25", "40", "53", "57", "58", "XX")


def durable_error(exc: BaseException) -> DurableError | None:
    """The typed error for psycopg's, or None to let psycopg's go up."""
    state = sqlstate(exc)
    if not state or state.startswith(PASSED_THROUGH_CLASSES):
        return None
    cls = _TYPED.get(state) or (InvalidArgument if state.startswith("22") else DurableError)
    diag = exc.diag
    return cls(diag.message_primary or describe(exc), state, diag.message_detail, diag.message_hint)


class Failed(Exception):
    """Raise it from a handler or a step's call to choose the error class
    durable_fail gets: 'transient' (the retry budget decides), 'permanent'
    (the task fails now) or 'unknown' (a person decides)."""

    def __init__(self, message: str, error_class: str = "transient",
                 retry_after: float | None = None):
        if error_class not in ERROR_CLASSES:
            raise ValueError(f"error_class must be one of {ERROR_CLASSES}")
        super().__init__(message)
        self.error_class, self.retry_after = error_class, retry_after


class BudgetExhausted(Failed, DurableError):
    """A step's reserve did not fit a spend budget of its task (55U05): the
    step was not started and nothing was called.  Uncaught, the task fails
    for good; a handler may catch it and finish with what it has."""
    sqlstate = BUDGET_EXHAUSTED

    def __init__(self, step: str, message: str, detail: str | None):
        super().__init__(f"step {step}: {message}" + (f" ({detail})" if detail else ""), "permanent")
        self.step, self.detail = step, detail


class StepCallFailed(Exception):
    """A step's call raised, and its failure is already recorded (durable_fail
    named the step): the task is no longer held, so a handler that catches
    this and goes on meets TaskLost at its next durable call."""

    def __init__(self, step: str, error_class: str, cause: BaseException):
        super().__init__(f"step {step}: {type(cause).__name__}: {cause}")
        self.step, self.error_class, self.cause = step, error_class, cause
        self.retry_after = getattr(cause, "retry_after", None)


# The loop's own signals.  They derive from BaseException so that a
# handler's "except Exception" cannot swallow them by mistake.

class TaskLost(BaseException):
    """We no longer hold the task (55U01, or the heartbeat found it gone)."""


class LeftToRecovery(BaseException):
    """Only the recovery table or a person may decide now (55U04)."""


class Suspended(BaseException):
    """A wait has not ended: durable ended the lease, the task waits."""


class Stopping(BaseException):
    """SIGTERM came: stop at this step boundary; the task is given back."""


class InTransaction(Exception):
    """A step, a wait or a spawn inside task.transaction(): refused, because
    a step's start must commit before its call, and a wait ends the lease
    (a rollback would undo it).  A bug in the handler: the task fails.
    Also wait_for_result on a connection with a transaction open: the task
    it waits for cannot finish before that transaction ends."""
    error_class = "permanent"
