"""The queue loop: claim, run a handler per task, commit or fail, recover.

A loop claims and runs its tasks one at a time on a connection of its own;
a worker runs concurrency loops (one by default), each in a thread but the
first, which runs in the caller's; one heartbeat thread keeps all their
leases on another connection.  What a loop does on each error (the
README's table):

    55U01 stale fence            drop the task: someone else holds it
    55U02 version conflict       read the step again (Task.step)
    55U04 invalid transition     leave the task to its lease and recovery
    40001, 40P01, 57014          run the statement, or the handler, again
    our connection closed/broken reconnect with backoff, give back what was held
    a pooler lost a prepared statement (26000, 42P05, 08P01)
                                 pooled mode: the statement (or the handler)
                                 runs again unprepared; then reconnect
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
from .connection import (READY_CHANNEL, connect, execute, found_pooler, transaction_pooler,
                         watch_for_pooler)
from .errors import (ConnectFailed, LeftToRecovery, StepCallFailed, Stopping, Suspended, TaskLost,
                     connection_lost, describe, sqlstate)
from .faults import crash_point
from .heartbeat import Heartbeat
from .task import Task

log = logging.getLogger("pgdurable")

HANDLER_RETRIES = 3  # runs of a handler whose transaction was rolled back (40001, ...)
# waits between the attempts to connect at start (about 10 s in all): a
# wrong address, database, role or password does not mend by itself, and
# run() says so instead of retrying for ever
START_RETRY_DELAYS = (1, 2, 3, 4)


class Worker:
    """Runs handler(task) for every task of queue, until stop() or SIGTERM.

    lease: seconds, or None for the queue's own (the default: a worker that
    names none never overrides what the queue's operator chose).
    lookup(step, idempotency_key): for queryable steps, what the step's call
    returned for the operation with that key (the same shape: it becomes the
    step's result), or None if it did not happen; with it the worker is also
    the queue's reconcile handler.  pooled: True behind a transaction-mode
    pooler (no prepared statements, no LISTEN: polling only); None (the
    default) finds out at start; False trusts the connection to keep its
    session (no probe).  Either way a pooler's error later switches it to
    pooled mode.  heartbeat_dsn: where the heartbeat connects (dsn).
    concurrency: handlers run at once, each loop on its own connection
    (handlers must then be thread-safe); batch: tasks per claim of a loop,
    10 for one loop, 1 for several, so that a loop holds only what it runs.
    """

    def __init__(self, dsn: str, queue: str, handler: Callable[[Task], Any], *,
                 name: str | None = None, lookup: Callable[[str, str], Any] | None = None,
                 lease: float | None = None, batch: int | None = None, poll: float = 1.0,
                 idle_exit: float | None = None, pooled: bool | None = None,
                 versions: dict | None = None, heartbeat_dsn: str | None = None,
                 concurrency: int = 1):
        if concurrency < 1:
            raise ValueError("concurrency must be 1 or more")
        self.dsn, self.queue, self.handler, self.lookup = dsn, queue, handler, lookup
        self.versions = versions
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.lease = None if lease is None else timedelta(seconds=lease)
        self.concurrency = concurrency
        self.batch = batch if batch is not None else (10 if concurrency == 1 else 1)
        self.poll, self.idle_exit, self.pooled = poll, idle_exit, pooled
        self.heartbeat_dsn = heartbeat_dsn
        self.heartbeat = Heartbeat(heartbeat_dsn or dsn, application_name=f"{self.name} heartbeat")
        self.stopping = threading.Event()
        self.stats = dict(completed=0, failed=0, steps_run=0, steps_skipped=0, looked_up=0,
                          released=0, lost=0, left_waiting=0)
        self._lock = threading.Lock()
        # stop() writes once and nobody reads: every loop's select wakes
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    def count(self, what: str) -> None:
        with self._lock:
            self.stats[what] += 1

    def stop(self, *_) -> None:
        """Finish the step in hand, give every held task back, return from run()."""
        if not self.stopping.is_set():
            self.stopping.set()
            try:
                os.write(self._wake_w, b".")
            except BlockingIOError:
                pass

    def run(self) -> dict:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        conn = self._connect_at_start("", self._connect)
        if conn is None:
            return self.stats  # stopped before it could connect
        try:
            if self.heartbeat_dsn:  # a wrong one would let every lease run out
                beat = self._connect_at_start("heartbeat_dsn: ", lambda: connect(self.heartbeat_dsn, pooled=True))
                if beat is None:
                    conn.close()
                    return self.stats
                beat.close()
            mode = self._choose_mode(conn)
        except BaseException:
            conn.close()
            raise
        log.info("worker %s: queue %s, lease %s, batch %s, concurrency %s, %s", self.name, self.queue,
                 "the queue's" if self.lease is None else f"{self.lease.total_seconds():g} s",
                 self.batch, self.concurrency, mode)
        failed: list[BaseException] = []
        loops = [threading.Thread(target=self._serve_thread, args=(n, failed), name=f"pgdurable-loop-{n}",
                                  daemon=True) for n in range(1, self.concurrency)]
        self.heartbeat.start()
        try:
            for thread in loops:
                thread.start()
            try:
                self._serve(0, conn)
            except BaseException:
                self.stop()  # the other loops give their tasks back and end
                raise
            finally:
                for thread in loops:
                    thread.join()
        finally:
            self.heartbeat.stop()
        if failed:
            raise failed[0]
        log.info("stopped: %s", ", ".join(f"{k} {v}" for k, v in self.stats.items()))
        return self.stats

    def _connect(self) -> psycopg.Connection:
        conn = connect(self.dsn, pooled=bool(self.pooled), application_name=self.name)
        if not self.pooled:
            watch_for_pooler(conn, self._found_pooler)
        return conn

    def _connect_at_start(self, what: str, connect_once) -> psycopg.Connection | None:
        """The first connection, or ConnectFailed after a few attempts (a bad
        connection string at once); None if stop() came meanwhile.  Later,
        a lost connection is reconnected for ever."""
        began = time.monotonic()
        for attempt, delay in enumerate((*START_RETRY_DELAYS, None), 1):
            try:
                return connect_once()
            except psycopg.OperationalError as e:
                if delay is None:
                    raise ConnectFailed(f"{what}could not connect after {attempt} attempts over "
                                        f"{time.monotonic() - began:.0f} s: {describe(e)}", sqlstate(e)) from e
                log.warning("%scould not connect (%s); attempt %s of %s in %s s", what, describe(e), attempt + 1,
                            len(START_RETRY_DELAYS) + 1, delay)
            except psycopg.ProgrammingError as e:  # the string itself is wrong: no attempt can help
                raise ConnectFailed(f"{what}bad connection string: {describe(e)}") from e
            if self.stopping.wait(delay):
                return None
        raise AssertionError("unreachable")

    def _choose_mode(self, conn: psycopg.Connection) -> str:
        """Session or pooled mode, and why, for the start's log line."""
        if self.pooled:
            return self._pooled_mode("pooled=True")
        if self.pooled is False:
            return self._session_mode("pooled=False")
        why = transaction_pooler(conn, self.dsn, f"{self.name} probe")
        if why is None:
            self.pooled = False
            return self._session_mode("each statement ran in the connection's own server session")
        self.pooled = True
        conn.prepare_threshold = None
        return self._pooled_mode(why)

    def _pooled_mode(self, why: str) -> str:
        return (f"pooled ({why}): no prepared statements, no LISTEN (it needs a session connection);"
                f" polling every {self.poll:g} s")

    def _session_mode(self, why: str) -> str:
        return f"session mode ({why}): LISTEN {READY_CHANNEL}, and claims every {self.poll:g} s at least"

    def _found_pooler(self, e: psycopg.Error) -> None:
        """A loop's connection met a pooler's error (once for the worker)."""
        with self._lock:
            if self.pooled:
                return
            self.pooled = True
        log.warning("a transaction-mode pooler lost a prepared statement (%s: %s): pooled mode from now on"
                    " (no prepared statements, no LISTEN, polling every %s s); what it lost runs again"
                    " unprepared, and the worker reconnects once the tasks in hand are done",
                    e.sqlstate, e.diag.message_primary, self.poll)

    def _serve_thread(self, loop: int, failed: list) -> None:
        try:
            self._serve(loop, None)
        except BaseException as e:
            failed.append(e)
            self.stop()

    def _serve(self, loop: int, conn: psycopg.Connection | None) -> None:
        """One loop, on a new connection after a lost one (or after a switch
        to pooled mode), until stop() or idle_exit."""
        backoff = 1
        while True:
            lost = None
            if conn is None:
                try:
                    conn = self._connect()
                except psycopg.OperationalError as e:  # no server (yet, or again)
                    lost = e
            if conn is not None:
                try:
                    self._give_back(conn, loop, "reconnected")  # what a lost connection left held
                    backoff = 1
                    if self._loop(conn, loop):
                        self._give_back(conn, loop, "shutdown")
                        return
                    # pooled mode now: a new connection at once, that never LISTENed
                except Exception as e:
                    # the server or the network went away from our own
                    # connection, or durable cannot serve the loop's calls
                    # for now (55000: a library newer than the installed
                    # SQL, between the restart onto it and ALTER EXTENSION
                    # durable UPDATE): wait and try again.  Anything else
                    # on it is no reason to reconnect (and give back): it
                    # goes up
                    if not connection_lost(conn) and sqlstate(e) != errors.NOT_READY:
                        raise
                    lost = e
                finally:
                    conn.close()
                conn = None
                if lost is None:
                    continue
            if self.stopping.is_set():
                return  # leases run out; recovery takes over
            if sqlstate(lost) == errors.NOT_READY:
                log.warning("durable refused the worker's call (%s); trying again in %s s",
                            describe(lost) + (f" {lost.diag.message_hint}" if lost.diag.message_hint else ""),
                            backoff)
            else:
                log.warning("connection lost (%s); reconnecting in %s s", describe(lost), backoff)
            self.stopping.wait(backoff)
            backoff = min(backoff * 2, 30)

    def _loop(self, conn: psycopg.Connection, loop: int) -> bool:
        """Claim and run until stop() or idle_exit (True), or until the worker
        went over to pooled mode on this session-mode connection (False)."""
        listening = not self.pooled
        if listening:
            conn.execute(f"LISTEN {READY_CHANNEL}")  # wakes early; the poll is the floor
        idle_since = time.monotonic()
        while not self.stopping.is_set():
            if listening and self.pooled:
                return False
            rows = execute(conn, "SELECT task_id, fence, attempt, payload, checkpoint,"
                                 " EXTRACT(epoch FROM (lease_until OPERATOR(pg_catalog.-) pg_catalog.now()))"
                                 "::pg_catalog.float8, versions"
                                 " FROM @api.durable_claim(%s::pg_catalog.text, %s::pg_catalog.text, "
                                 "%s::pg_catalog.interval, %s::pg_catalog.int4, %s::pg_catalog.jsonb)",
                           (self.queue, self.name, self.lease, self.batch,
                            None if self.versions is None else Jsonb(self.versions))).fetchall()
            if not rows and not self._reconcile(conn):
                if self.idle_exit is not None and time.monotonic() - idle_since > self.idle_exit:
                    return True
                self._wait_for_work(conn, listening)
                continue
            for row in rows:
                self.heartbeat.hold(row[0], row[1], row[5], loop)
            for row in rows:
                if self.stopping.is_set():
                    break  # the rest are given back at once, unstarted
                self._run_task(Task(self, conn, row))
            idle_since = time.monotonic()
        return True

    def _wait_for_work(self, conn: psycopg.Connection, listening: bool) -> None:
        """Until a notification of ready work (session mode), stop(), or the poll."""
        select.select([self._wake_r, conn.fileno()] if listening else [self._wake_r], [], [], self.poll)
        # a notification is read (and dropped) by the next statement

    def _run_task(self, task: Task) -> None:
        for run in range(1, HANDLER_RETRIES + 1):
            try:
                if not task.begun:
                    task.begin()  # 55U01: not ours any more, dropped below
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
                if errors.prepared_statement_lost(e):
                    # in task.transaction(), say: rolled back whole, and
                    # never the task's fault
                    found_pooler(task.conn, e)
                    if run < HANDLER_RETRIES:
                        log.info("task %s: %s (%s); running it again", task.id, describe(e), sqlstate(e))
                        continue
                    self._release(task.conn, task.id, task.fence, "a pooler lost a prepared statement")
                    break
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

    def _give_back(self, conn: psycopg.Connection, loop: int, reason: str) -> None:
        """Release every task the loop still holds: ready again now, its attempt unused."""
        for task_id, fence in self.heartbeat.holding(loop):
            self._release(conn, task_id, fence, reason)

    def _release(self, conn: psycopg.Connection, task_id: int, fence: int, reason: str) -> None:
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
