"""pgdurable: workers and producers for durable, the PostgreSQL extension
that is the recovery authority for durable execution.

    import pgdurable

    def handle(task):
        charge = task.step("charge", "idempotent",
                           lambda key: payments.charge(task.payload, idempotency_key=key))
        return {"charge": charge}

    with psycopg.connect("dbname=app") as conn:  # with the application's own writes
        task_id = pgdurable.enqueue(conn, "orders", {"order": 42})
    pgdurable.Worker("dbname=app", "orders", handle).run()
"""
try:
    import psycopg  # noqa: F401
except ImportError:  # one clear line instead of a traceback into the library
    raise ImportError("pgdurable needs psycopg 3: pip install 'psycopg[binary]'"
                      " (or Debian's python3-psycopg)") from None

from .errors import (BudgetExhausted, ConnectFailed, DurableError, Failed, IdempotencyConflict, InTransaction,
                     InvalidArgument, InvalidTransition, PermissionDenied, ResultTimeout, StaleFence,
                     StepCallFailed, TaskCancelled, TaskFailed, UnknownObject, VersionConflict)
from .producer import (Result, debounce, emit, enqueue, enqueue_batch, result, schedule, throttle, unschedule,
                       wait_for_result)
from .stream import Chunk, read_stream
from .task import Outcome, Task
from .worker import Worker

__version__ = "0.9.0"
__all__ = ["BudgetExhausted", "Chunk", "ConnectFailed", "DurableError", "Failed", "IdempotencyConflict",
           "InTransaction", "InvalidArgument", "InvalidTransition", "Outcome", "PermissionDenied", "Result",
           "ResultTimeout", "StaleFence", "StepCallFailed", "Task", "TaskCancelled", "TaskFailed",
           "UnknownObject", "VersionConflict", "Worker", "debounce", "emit", "enqueue", "enqueue_batch",
           "read_stream", "result", "schedule", "throttle", "unschedule", "wait_for_result"]
