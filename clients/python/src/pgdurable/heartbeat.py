"""The heartbeat: renews the lease of every task a worker holds.

It runs in a thread on a connection of its own, so that a long step call
on the worker's connection never lets a lease run out.  It renews every
lease/3 (the lease each claim returned: the queue's unless the worker named
one) with one durable_heartbeat_batch; a task that comes back without a
lease was taken over, cancelled or finished, and is marked lost so that
the worker drops it at its next durable call.
"""
from __future__ import annotations

import logging
import threading

import psycopg

from .connection import connect, execute
from .errors import connection_lost, describe

log = logging.getLogger("pgdurable")


class Heartbeat(threading.Thread):
    def __init__(self, dsn: str, *, pooled: bool, application_name: str):
        super().__init__(name="pgdurable-heartbeat", daemon=True)
        self.dsn, self.pooled, self.application_name = dsn, pooled, application_name
        self.lock = threading.Lock()
        self.held: dict[int, tuple[int, float]] = {}  # task id -> (fence, lease seconds)
        self.lost: set[int] = set()
        self.stopped = threading.Event()

    def hold(self, task_id: int, fence: int, lease_seconds: float) -> None:
        with self.lock:
            self.held[task_id] = (fence, lease_seconds)

    def drop(self, task_id: int) -> None:
        with self.lock:
            self.held.pop(task_id, None)
            self.lost.discard(task_id)

    def is_lost(self, task_id: int) -> bool:
        with self.lock:
            return task_id in self.lost

    def holding(self) -> list[tuple[int, int]]:
        with self.lock:
            return [(t, fence) for t, (fence, _) in self.held.items()]

    def stop(self) -> None:
        self.stopped.set()

    def interval(self) -> float:
        with self.lock:
            leases = [lease for _, lease in self.held.values()]
        return max(0.1, min(leases) / 3) if leases else 1.0

    def run(self) -> None:
        conn, wait = None, self.interval()
        while not self.stopped.wait(wait):
            wait = self.interval()
            with self.lock:
                ids = list(self.held)
                fences = [self.held[t][0] for t in ids]
            if not ids:
                continue
            try:
                conn = conn or connect(self.dsn, pooled=self.pooled,
                                       application_name=self.application_name)
                rows = execute(conn, "SELECT task_id, lease_until FROM durable_heartbeat_batch("
                                     "%s::bigint[], %s::bigint[])", (ids, fences)).fetchall()
            except psycopg.Error as e:
                if conn is not None and connection_lost(conn):
                    log.warning("heartbeat: %s; reconnecting", describe(e))
                    conn, wait = None, 0  # at once: the leases are running out
                elif conn is None:
                    log.warning("heartbeat: could not connect: %s", describe(e))
                else:
                    log.warning("heartbeat: %s (%s); trying again", describe(e), e.sqlstate)
                continue
            sent = dict(zip(ids, fences))
            with self.lock:  # no lease back: not ours any more (unless claimed again since)
                self.lost.update(t for t, until in rows
                                 if until is None and self.held.get(t, (None,))[0] == sent[t])
        if conn is not None:
            conn.close()
