"""What a worker does for each error a durable call can raise.

durable's own SQLSTATEs (class 55, subclass letter U) have no psycopg
exception classes: psycopg maps them by their class to
ObjectNotInPrerequisiteState, an OperationalError like a lost connection,
so everything here matches ``e.sqlstate``, never the exception's type.
"""
from __future__ import annotations

STALE_FENCE = "55U01"  # another worker holds the task now: drop it
VERSION_CONFLICT = "55U02"  # the step changed under us: read it again
IDEMPOTENCY_CONFLICT = "55U03"  # same name or key, other request: a bug
INVALID_TRANSITION = "55U04"  # not allowed now, e.g. a step is in doubt
BUDGET_EXHAUSTED = "55U05"  # a step's reserve does not fit a spend budget

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


class BudgetExhausted(Failed):
    """A step's reserve did not fit a spend budget of its task (55U05): the
    step was not started and nothing was called.  Uncaught, the task fails
    for good; a handler may catch it and finish with what it has."""

    def __init__(self, step: str, message: str, detail: str | None):
        super().__init__(f"step {step}: {message}" + (f" ({detail})" if detail else ""), "permanent")
        self.step = step


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
    (a rollback would undo it).  A bug in the handler: the task fails."""
    error_class = "permanent"
