"""The heartbeat: renews the lease of every task a worker holds.

It runs in a thread on a connection of its own (to the worker's database,
or to heartbeat_dsn: behind a pooler, an alias with a pool of its own, so
that claims never starve the beats), shared by all of a worker's loops, so
that a long step call on a loop's connection never lets a lease run out.
It never prepares its statement (one every lease/3: nothing to save), so
that no pooler on its way can break it.  It renews every
lease/3 (the lease each claim returned: the queue's unless the worker named
one) with one durable_heartbeat_batch; a task that comes back without a
lease was taken over, cancelled or finished, and is marked lost so that
the worker drops it at its next durable call.

A beat that hangs (a half-open socket, a lock) must not let work go on
past the lease: the connection has a connect timeout and TCP keepalives
and a user timeout of a third of the lease, and a task whose lease no
beat has renewed for two thirds of it counts as lost too (the server may
end it any moment), so the worker stops before its next step.
"""
from __future__ import annotations

import logging
import threading
import time

import psycopg

from .connection import connect, execute
from .errors import connection_lost, describe

log = logging.getLogger("pgdurable")


class Heartbeat(threading.Thread):
    def __init__(self, dsn: str, *, application_name: str):
        super().__init__(name="pgdurable-heartbeat", daemon=True)
        self.dsn, self.application_name = dsn, application_name
        self.lock = threading.Lock()
        self.held: dict[int, tuple[int, float, int]] = {}  # task id -> (fence, lease seconds, loop)
        self.renewed: dict[int, float] = {}  # task id -> when its lease last began (monotonic)
        self.lost: set[int] = set()
        self.stopped = threading.Event()
        self.wakeup = threading.Event()

    def hold(self, task_id: int, fence: int, lease_seconds: float, loop: int = 0) -> None:
        with self.lock:
            self.held[task_id] = (fence, lease_seconds, loop)
            self.renewed[task_id] = time.monotonic()  # the claim began the lease
        self.wakeup.set()  # its first beat a third of its lease from now

    def drop(self, task_id: int) -> None:
        with self.lock:
            self.held.pop(task_id, None)
            self.renewed.pop(task_id, None)
            self.lost.discard(task_id)

    def lost_reason(self, task_id: int) -> str | None:
        """Why the task is no longer ours to work on, or None."""
        with self.lock:
            if task_id in self.lost:
                return "the heartbeat found it gone"
            if task_id not in self.held:
                return None
            age, lease = time.monotonic() - self.renewed[task_id], self.held[task_id][1]
        if age > lease * 2 / 3:
            return f"no heartbeat has renewed its lease for {age:.1f} s of {lease:.1f}"
        return None

    def is_lost(self, task_id: int) -> bool:
        return self.lost_reason(task_id) is not None

    def holding(self, loop: int) -> list[tuple[int, int]]:
        """What the loop holds: it gives those back, never another loop's."""
        with self.lock:
            return [(t, fence) for t, (fence, _, owner) in self.held.items() if owner == loop]

    def stop(self) -> None:
        self.stopped.set()
        self.wakeup.set()

    def interval(self) -> float:
        with self.lock:
            leases = [lease for _, lease, _ in self.held.values()]
        return max(0.1, min(leases) / 3) if leases else 1.0

    def timeouts(self) -> dict:
        """libpq's timeouts for the heartbeat's connection: a third of the
        shortest lease held (TCP ones apply to TCP connections only)."""
        third = max(1, int(self.interval()))
        return dict(connect_timeout=max(2, third), keepalives=1, keepalives_idle=third,
                    keepalives_interval=1, keepalives_count=3, tcp_user_timeout=third * 1000)

    def run(self) -> None:
        conn = None
        next_beat = time.monotonic() + self.interval()
        while not self.stopped.is_set():
            if self.wakeup.wait(max(0.0, next_beat - time.monotonic())):
                self.wakeup.clear()  # a new lease (or stop): when is the next beat due?
                next_beat = min(next_beat, time.monotonic() + self.interval())
                continue
            next_beat = time.monotonic() + self.interval()
            with self.lock:
                ids = list(self.held)
                fences = [self.held[t][0] for t in ids]
            if not ids:
                continue
            sent_at = time.monotonic()
            try:
                conn = conn or connect(self.dsn, pooled=True,
                                       application_name=self.application_name, **self.timeouts())
                rows = execute(conn, "SELECT task_id, lease_until FROM @api.durable_heartbeat_batch("
                                     "%s::pg_catalog.int8[], %s::pg_catalog.int8[])",
                               (ids, fences)).fetchall()
            except psycopg.Error as e:
                if conn is not None and connection_lost(conn):
                    log.warning("heartbeat: %s; reconnecting", describe(e))
                    conn, next_beat = None, 0  # at once: the leases are running out
                elif conn is None:
                    log.warning("heartbeat: could not connect: %s", describe(e))
                else:
                    log.warning("heartbeat: %s (%s); trying again", describe(e), e.sqlstate)
                continue
            sent = dict(zip(ids, fences))
            with self.lock:  # no lease back: not ours any more (unless claimed again since)
                for t, until in rows:
                    if self.held.get(t, (None,))[0] != sent[t]:
                        continue
                    if until is None:
                        self.lost.add(t)
                    else:
                        self.renewed[t] = max(self.renewed[t], sent_at)
        if conn is not None:
            conn.close()
