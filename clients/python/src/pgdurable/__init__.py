"""pgdurable: workers for durable, the PostgreSQL extension that is the
recovery authority for durable execution.

    import pgdurable

    def handle(task):
        charge = task.step("charge", "idempotent",
                           lambda key: payments.charge(task.payload, idempotency_key=key))
        return {"charge": charge}

    pgdurable.Worker("dbname=app", "orders", handle).run()
"""
try:
    import psycopg  # noqa: F401
except ImportError:  # one clear line instead of a traceback into the library
    raise ImportError("pgdurable needs psycopg 3: pip install 'psycopg[binary]'"
                      " (or Debian's python3-psycopg)") from None

from .errors import BudgetExhausted, Failed, InTransaction, StepCallFailed
from .stream import Chunk, read_stream
from .task import Outcome, Task
from .worker import Worker

__version__ = "0.9.0"
__all__ = ["BudgetExhausted", "Chunk", "Failed", "InTransaction", "Outcome", "StepCallFailed", "Task", "Worker",
           "read_stream"]
