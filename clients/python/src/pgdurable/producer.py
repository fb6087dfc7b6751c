"""Producers: enqueue tasks, emit events, schedule, and wait for results.

    with psycopg.connect(dsn) as conn:            # a transaction of the application's
        conn.execute("INSERT INTO orders ...")
        task_id = pgdurable.enqueue(conn, "orders", {"order": 42}, idempotency_key="order-42")
    # committed: the order and its task, or (an exception) neither
    receipt = pgdurable.wait_for_result(dsn, task_id, timeout=30)

Every call takes the caller's own psycopg connection and runs in whatever
transaction is open on it: it never commits or rolls back, so a task
enqueued with the application's own writes commits with them, or not at
all.  On an autocommit connection each call is a transaction of its own.
A connection string instead opens a short-lived autocommit connection for
the call.  Each statement is sent unprepared (prepare=False), so that a
connection behind a transaction-mode pooler is safe to use.

Only the options given are sent, by name (named notation): what is left out
takes durable's default.  A refusal raises a DurableError by its SQLSTATE
(UnknownObject 42704, PermissionDenied 42501, InvalidArgument 22xxx,
IdempotencyConflict 55U03, ...), chained from psycopg's error; an error of
the transaction or the connection (40001, 40P01, 57014, 08xxx, 25P02, ...)
is psycopg's own, for the code that retries the transaction.
"""
from __future__ import annotations

import contextlib
import time
from datetime import datetime
from typing import Any, Iterator, NamedTuple, Sequence, Union

import psycopg

from .connection import connect, execute
from .errors import InTransaction, ResultTimeout, TaskCancelled, TaskFailed, durable_error
from .task import _interval, _json

Conn = Union[psycopg.Connection, str]


class Result(NamedTuple):
    """durable_result: the task's state, and once it finished its result
    (completed) or last error (failed, or the last failure of a task that
    will retry), when it finished, and why it stopped (stop_code)."""
    state: str
    result: Any
    error: Any
    finished_at: datetime | None
    stop_code: str | None


@contextlib.contextmanager
def _connection(conn: Conn) -> Iterator[psycopg.Connection]:
    if isinstance(conn, str):
        with connect(conn, pooled=True) as own:  # autocommit; never prepares
            yield own
    else:
        yield conn


def _call(conn: Conn, function: str, args: Sequence[tuple[str, Any, str]], columns: str = "") -> tuple:
    """One row of @api.function(name => value::type, ...), the arguments
    whose value is not None; DurableError for a refusal."""
    given = [(name, value, type_) for name, value, type_ in args if value is not None]
    call = f"@api.{function}(" + ", ".join(f"{name} => %s::{type_}" for name, _, type_ in given) + ")"
    sql = f"SELECT {columns} FROM {call}" if columns else f"SELECT {call}"
    with _connection(conn) as c:
        try:
            return execute(c, sql, [value for _, value, _ in given], prepare=False).fetchone()
        except psycopg.Error as e:
            typed = durable_error(e)
            if typed is None:
                raise
            raise typed from e


def _task_options(run_at, priority, cls, max_attempts, deadline, workflow_version, metadata):
    """The arguments of the options every task takes, as _call's args."""
    return [
        ("run_at", run_at, "pg_catalog.timestamptz"),
        ("priority", priority, "pg_catalog.int4"),
        ("class", cls, "pg_catalog.text"),
        ("max_attempts", max_attempts, "pg_catalog.int4"),
        ("deadline", _interval(deadline), "pg_catalog.interval"),
        ("workflow_version", workflow_version, "pg_catalog.text"),
        ("metadata", _json(metadata), "pg_catalog.jsonb")]


def enqueue(conn: Conn, queue: str, payload: Any = None, *, idempotency_key: str | None = None,
            run_at: datetime | str | None = None, priority: int | None = None, cls: str | None = None,
            max_attempts: int | None = None, deadline=None, workflow_version: str | None = None,
            metadata: Any = None, concurrency_key: str | None = None, fairness_key: str | None = None,
            rate_limits: dict | None = None, budgets: Sequence[str] | None = None,
            spend_limit: float | None = None) -> int:
    """durable_enqueue: a task of queue, its id.  payload and metadata are
    JSON (None: durable's default); cls is the activity class (pure,
    idempotent, queryable, unsafe); deadline is seconds, a timedelta or
    PostgreSQL's text; run_at a datetime with its time zone.  The same
    idempotency_key with the same payload returns the first task's id,
    with another raises IdempotencyConflict."""
    (task_id,) = _call(conn, "durable_enqueue", [
        ("queue", queue, "pg_catalog.text"),
        ("payload", _json(payload), "pg_catalog.jsonb"),
        ("idempotency_key", idempotency_key, "pg_catalog.text"),
        *_task_options(run_at, priority, cls, max_attempts, deadline, workflow_version, metadata),
        ("concurrency_key", concurrency_key, "pg_catalog.text"),
        ("fairness_key", fairness_key, "pg_catalog.text"),
        ("rate_limits", _json(rate_limits), "pg_catalog.jsonb"),
        ("budgets", None if budgets is None else list(budgets), "pg_catalog.text[]"),
        ("spend_limit", spend_limit, "pg_catalog.numeric")])
    return task_id


def enqueue_batch(conn: Conn, queue: str, payloads: Sequence[Any],
                  idempotency_keys: Sequence[str | None] | None = None, *,
                  run_at: datetime | str | None = None, priority: int | None = None, cls: str | None = None,
                  max_attempts: int | None = None, deadline=None, workflow_version: str | None = None,
                  metadata: Any = None, concurrency_keys: Sequence[str | None] | None = None,
                  fairness_keys: Sequence[str | None] | None = None) -> list[int]:
    """durable_enqueue_batch: one task a payload, all or none, each with its
    own idempotency key (or None), concurrency and fairness key; their ids
    in order.  The other options apply to every task."""
    def texts(values):
        return None if values is None else list(values)
    (ids,) = _call(conn, "durable_enqueue_batch", [
        ("queue", queue, "pg_catalog.text"),
        ("payloads", [_json(p if p is not None else {}) for p in payloads], "pg_catalog.jsonb[]"),
        ("idempotency_keys", texts(idempotency_keys), "pg_catalog.text[]"),
        *_task_options(run_at, priority, cls, max_attempts, deadline, workflow_version, metadata),
        ("concurrency_keys", texts(concurrency_keys), "pg_catalog.text[]"),
        ("fairness_keys", texts(fairness_keys), "pg_catalog.text[]")])
    return list(ids)


def debounce(conn: Conn, queue: str, key: str, payload: Any, delay, *, max_wait=None,
             mode: str | None = None) -> int:
    """durable_debounce: one task for the calls of key until it is claimed,
    run delay after the last call (never later than max_wait after the
    first), with the last payload ('trailing') or the first ('leading')."""
    (task_id,) = _call(conn, "durable_debounce", [
        ("queue", queue, "pg_catalog.text"),
        ("key", key, "pg_catalog.text"),
        ("payload", _json(payload if payload is not None else {}), "pg_catalog.jsonb"),
        ("delay", _interval(delay), "pg_catalog.interval"),
        ("max_wait", _interval(max_wait), "pg_catalog.interval"),
        ("mode", mode, "pg_catalog.text")])
    return task_id


def throttle(conn: Conn, queue: str, key: str, payload: Any, per) -> int:
    """durable_throttle: at most one task of key per period; a call within
    the period of the key's last task returns that task's id."""
    (task_id,) = _call(conn, "durable_throttle", [
        ("queue", queue, "pg_catalog.text"),
        ("key", key, "pg_catalog.text"),
        ("payload", _json(payload if payload is not None else {}), "pg_catalog.jsonb"),
        ("per", _interval(per), "pg_catalog.interval")])
    return task_id


def emit(conn: Conn, queue: str, event: str, payload: Any = None) -> bool:
    """durable_emit: an event of queue, in the caller's transaction, which
    wakes the tasks awaiting it once it commits: True the first time, False
    for the same payload again (IdempotencyConflict for another)."""
    (first,) = _call(conn, "durable_emit", [
        ("queue", queue, "pg_catalog.text"),
        ("event", event, "pg_catalog.text"),
        ("payload", _json(payload), "pg_catalog.jsonb")])
    return first


def schedule(conn: Conn, name: str, cron: str, queue: str, payload: Any = None, *,
             timezone: str | None = None, backfill: bool | None = None) -> datetime:
    """durable_schedule (role durable_operator): create or replace the cron
    schedule name, whose occurrences the reconciler enqueues once each
    into queue; returns its next run."""
    (next_run,) = _call(conn, "durable_schedule", [
        ("name", name, "pg_catalog.text"),
        ("cron", cron, "pg_catalog.text"),
        ("queue", queue, "pg_catalog.text"),
        ("payload", _json(payload), "pg_catalog.jsonb"),
        ("timezone", timezone, "pg_catalog.text"),
        ("backfill", backfill, "pg_catalog.bool")])
    return next_run


def unschedule(conn: Conn, name: str) -> bool:
    """durable_unschedule (role durable_operator): False when there was none."""
    (removed,) = _call(conn, "durable_unschedule", [("name", name, "pg_catalog.text")])
    return removed


def result(conn: Conn, task_id: int) -> Result:
    """durable_result: the task's state and outcome (UnknownObject for none)."""
    return Result(*_call(conn, "durable_result", [("task_id", task_id, "pg_catalog.int8")],
                         "state, result, error, finished_at, stop_code"))


def wait_for_result(conn: Conn, task_id: int, timeout: float, *, poll: float = 0.05,
                    max_poll: float = 1.0) -> Any:
    """The task's result once it completed; TaskFailed (with its error) if
    it failed, TaskCancelled if it was cancelled, ResultTimeout (a
    TimeoutError) if it has not finished after timeout seconds.  It polls
    durable_result, every poll seconds at first and twice as long each
    time up to max_poll: no LISTEN, so it works through any pooler.  A task
    in review (needs_review) is waited for like one that runs.

    On the caller's connection each poll is a transaction of its own: not
    with a transaction open (InTransaction), since a task enqueued in it
    could not run before it ends."""
    deadline = time.monotonic() + timeout
    with _connection(conn) as c:
        if c.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            raise InTransaction(f"wait_for_result for task {task_id} with a transaction open on the"
                                " connection: commit (or roll back) first")
        delay = poll
        while True:
            if c.autocommit:
                state, value, error, finished_at, stop_code = result(c, task_id)
            else:
                with c.transaction():  # of its own: its snapshot sees the task move
                    state, value, error, finished_at, stop_code = result(c, task_id)
            if state == "completed":
                return value
            if state == "failed":
                raise TaskFailed(task_id, error, finished_at, stop_code)
            if state == "cancelled":
                raise TaskCancelled(task_id, error, finished_at)
            left = deadline - time.monotonic()
            if left <= 0:
                raise ResultTimeout(task_id, state, timeout)
            time.sleep(min(delay, left))
            delay = min(delay * 2, max_poll)
