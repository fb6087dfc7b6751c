"""The queue loop: claim, run a handler per task, commit or fail, recover.

One connection claims and runs the tasks; a heartbeat thread keeps their
leases on another.  What the loop does on each error (the README's table):

    55U01 stale fence            drop the task: someone else holds it
    55U02 version conflict       read the step again (Task.step)
    55U04 invalid transition     leave the task to its lease and recovery
    40001, 40P01, 57014          run the statement, or the handler, again
    our connection closed/broken reconnect with backoff, give back what was held
    55U03, 22xxx, 42xxx, 54xxx   the call is wrong: durable_fail 'permanent'
    anything else from handler   durable_fail with the exception's class
"""
from __future__ import annotations

import logging
import os
import select
import signal
import socket
import threading
import time
from datetime import timedelta
from typing import Any, Callable

import psycopg
from psycopg.types.json import Jsonb

from . import errors
from .connection import READY_CHANNEL, connect, execute
from .errors import (LeftToRecovery, StepCallFailed, Stopping, Suspended, TaskLost, connection_lost,
                     describe, sqlstate)
from .faults import crash_point
from .heartbeat import Heartbeat
from .task import Task

log = logging.getLogger("pgdurable")

HANDLER_RETRIES = 3  # runs of a handler whose transaction was rolled back (40001, ...)


class Worker:
    """Runs handler(task) for every task of queue, until stop() or SIGTERM.

    lease: seconds, or None for the queue's own (the default: a worker that
    names none never overrides what the queue's operator chose).
    lookup(step, idempotency_key): for queryable steps, what the step's call
    returned for the operation with that key (the same shape: it becomes the
    step's result), or None if it did not happen; with it the worker is also
    the queue's reconcile handler.  pooled: behind a transaction-mode
    pooler (no prepared statements, no LISTEN: polling only).
    """

    def __init__(self, dsn: str, queue: str, handler: Callable[[Task], Any], *,
                 name: str | None = None, lookup: Callable[[str, str], Any] | None = None,
                 lease: float | None = None, batch: int = 10, poll: float = 1.0,
                 idle_exit: float | None = None, pooled: bool = False,
                 versions: dict | None = None):
        self.dsn, self.queue, self.handler, self.lookup = dsn, queue, handler, lookup
        self.versions = versions
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.lease = None if lease is None else timedelta(seconds=lease)
        self.batch, self.poll, self.idle_exit, self.pooled = batch, poll, idle_exit, pooled
        self.heartbeat = Heartbeat(dsn, pooled=pooled, application_name=f"{self.name} heartbeat")
        self.stopping = threading.Event()
        self.stats = dict(completed=0, failed=0, steps_run=0, steps_skipped=0, looked_up=0,
                          released=0, lost=0, left_waiting=0)
        self._wake_r, self._wake_w = os.pipe()

    def count(self, what: str) -> None:
        self.stats[what] += 1

    def stop(self, *_) -> None:
        """Finish the step in hand, give every held task back, return from run()."""
        self.stopping.set()
        os.write(self._wake_w, b".")

    def run(self) -> dict:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        if self.pooled:
            log.info("pooled: LISTEN needs a session connection; polling every %s s", self.poll)
        self.heartbeat.start()
        backoff = 1
        try:
            while True:
                try:
                    conn = connect(self.dsn, pooled=self.pooled, application_name=self.name)
                except psycopg.OperationalError as e:  # no server (yet, or again)
                    lost = e
                else:
                    try:
                        self._give_back(conn, "reconnected")  # what a lost connection left held
                        backoff = 1
                        self._loop(conn)
                        self._give_back(conn, "shutdown")
                        break
                    except Exception as e:
                        # the server or the network went away from our own
                        # connection; anything else on it is no reason to
                        # reconnect (and give back): it goes up
                        if not connection_lost(conn):
                            raise
                        lost = e
                    finally:
                        conn.close()
                if self.stopping.is_set():
                    break  # leases run out; recovery takes over
                log.warning("connection lost (%s); reconnecting in %s s", describe(lost), backoff)
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, 30)
        finally:
            self.heartbeat.stop()
        log.info("stopped: %s", ", ".join(f"{k} {v}" for k, v in self.stats.items()))
        return self.stats

    def _loop(self, conn: psycopg.Connection) -> None:
        if not self.pooled:
            conn.execute(f"LISTEN {READY_CHANNEL}")  # wakes early; the poll is the floor
        idle_since = time.monotonic()
        while not self.stopping.is_set():
            rows = execute(conn, "SELECT task_id, fence, attempt, payload, checkpoint,"
                                 " EXTRACT(epoch FROM (lease_until OPERATOR(pg_catalog.-) pg_catalog.now()))"
                                 "::pg_catalog.float8, versions"
                                 " FROM @api.durable_claim(%s::pg_catalog.text, %s::pg_catalog.text, "
                                 "%s::pg_catalog.interval, %s::pg_catalog.int4, %s::pg_catalog.jsonb)",
                           (self.queue, self.name, self.lease, self.batch,
                            None if self.versions is None else Jsonb(self.versions))).fetchall()
            if not rows and not self._reconcile(conn):
                if self.idle_exit is not None and time.monotonic() - idle_since > self.idle_exit:
                    return
                self._wait_for_work(conn)
                continue
            for row in rows:
                self.heartbeat.hold(row[0], row[1], row[5])
            for row in rows:
                if self.stopping.is_set():
                    break  # the rest are given back at once, unstarted
                self._run_task(Task(self, conn, row))
            idle_since = time.monotonic()

    def _wait_for_work(self, conn: psycopg.Connection) -> None:
        """Until a notification of ready work (session mode), stop(), or the poll."""
        waiting_on = [self._wake_r] if self.pooled else [self._wake_r, conn.fileno()]
        ready, _, _ = select.select(waiting_on, [], [], self.poll)
        if self._wake_r in ready:
            os.read(self._wake_r, 64)
        # a notification is read (and dropped) by the next statement

    def _run_task(self, task: Task) -> None:
        for run in range(1, HANDLER_RETRIES + 1):
            try:
                result = self.handler(task)
                if not task.completed:
                    task.complete(result)
                self.count("completed")
                crash_point("after_commit")
            except Suspended:
                self.count("left_waiting")  # durable ended the lease
            except TaskLost as e:
                self.count("lost")
                log.info("task %s lost: %s", task.id, e)
            except LeftToRecovery as e:
                log.info("task %s left to recovery: %s", task.id, e)
            except Stopping:
                return  # still held: given back with the others
            except StepCallFailed as e:
                log.info("task %s: %s (recorded)", task.id, e)  # durable_fail ran in the step
            except Exception as e:
                if connection_lost(task.conn):
                    raise  # reconnect: on our connection, whatever the handler made of it
                if sqlstate(e) in errors.RETRY_TRANSACTION and run < HANDLER_RETRIES:
                    log.warning("task %s: %s (%s); running it again", task.id, describe(e), sqlstate(e))
                    continue  # its done steps return their results
                self._fail(task, e)
            break
        self.heartbeat.drop(task.id)

    def _fail(self, task: Task, e: Exception) -> None:
        """The handler failed: durable_fail decides (retry, fail, review)."""
        error_class = getattr(e, "error_class", None)
        if error_class not in errors.ERROR_CLASSES:
            error_class = "permanent" if errors.fix_the_call(sqlstate(e)) else "transient"
        retry_after = getattr(e, "retry_after", None)
        error = {"error": type(getattr(e, "cause", e)).__name__, "message": str(e)}
        try:
            (action,) = task.call("SELECT @api.durable_fail(%s::pg_catalog.int8, %s::pg_catalog.int8, "
                                  "%s::pg_catalog.text, %s::pg_catalog.jsonb, %s::pg_catalog.interval, "
                                  "%s::pg_catalog.text)",
                                  task.id, task.fence, error_class, Jsonb(error),
                                  None if retry_after is None else timedelta(seconds=retry_after),
                                  getattr(e, "step", None))
        except (TaskLost, LeftToRecovery) as why:
            log.info("task %s failed (%s), but stays with recovery: %s", task.id, describe(e), why)
            return
        except psycopg.Error as why:
            if connection_lost(task.conn):
                raise
            log.error("task %s failed (%s) and durable_fail refused (%s): %s; its lease runs out",
                      task.id, describe(e), why.sqlstate, describe(why))
            return
        self.count("failed")
        log.warning("task %s failed (%s, %s): %s", task.id, error_class, action, describe(e))

    def look_up(self, step: str, key: str) -> Any:
        if self.lookup is None:
            raise LeftToRecovery(f"step {step} is queryable and the worker has no lookup")
        self.count("looked_up")
        return self.lookup(step, key)

    def _reconcile(self, conn: psycopg.Connection) -> bool:
        """As the queue's reconcile handler: look up queryable steps a crash
        left unknown, and record what the service says."""
        if self.lookup is None:
            return False
        rows = execute(conn, "SELECT task_id, fence, step, idempotency_key"
                             " FROM @api.durable_claim_reconcile(%s::pg_catalog.text, %s::pg_catalog.text, "
                             "%s::pg_catalog.interval)",
                       (self.queue, self.name, self.lease)).fetchall()
        for task_id, fence, step, key in rows:
            try:
                found = self.look_up(step, key)
            except Exception as e:  # the service is down, say: not a reason to stop
                log.warning("task %s: looking step %s up failed (%s); left to its lease",
                            task_id, step, describe(e))
                continue
            # a succeeded receipt's evidence becomes the step's result: it is
            # what the call would have returned, as on the step's own path
            try:
                execute(conn, "SELECT @api.durable_record_receipt(%s::pg_catalog.int8, "
                              "%s::pg_catalog.int8, %s::pg_catalog.text, %s::pg_catalog.text, "
                              "NULL::pg_catalog.text, %s::pg_catalog.jsonb)",
                        (task_id, fence, step, "not_executed" if found is None else "succeeded",
                         Jsonb({"lookup": None} if found is None else found)))
            except psycopg.Error as e:
                if connection_lost(conn):
                    raise
                # 55U01: not ours any more; 55U04 and the rest: its lease decides
                log.warning("task %s: receipt for step %s refused (%s): %s", task_id, step,
                            e.sqlstate, describe(e))
        return bool(rows)

    def _give_back(self, conn: psycopg.Connection, reason: str) -> None:
        """Release every task still held: ready again now, its attempt unused."""
        for task_id, fence in self.heartbeat.holding():
            try:
                execute(conn, "SELECT @api.durable_release(%s::pg_catalog.int8, %s::pg_catalog.int8, "
                              "%s::pg_catalog.text)", (task_id, fence, reason))
                self.count("released")
                log.info("gave task %s back (%s)", task_id, reason)
            except psycopg.Error as e:
                if e.sqlstate not in (errors.STALE_FENCE, errors.INVALID_TRANSITION):
                    raise
                # not ours any more, or a step in doubt: the recovery table judges it
                log.info("task %s stays with recovery: %s", task_id, e.diag.message_primary)
            self.heartbeat.drop(task_id)
