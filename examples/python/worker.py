#!/usr/bin/env python3
"""A durable worker in Python, on psycopg 3: copy it to start your own.

It claims tasks in batches, keeps every held lease alive from a heartbeat
thread, runs each task's steps through durable's state machine, looks up
queryable steps whose outcome a crash left unknown, reconnects after a lost
connection, and on SIGTERM gives back at once the tasks it has not finished.
The external service is the stand-in of examples/service.sql, which counts
effects.  A task's payload names its steps, e.g.
{"steps": [["reserve", "idempotent"], ["charge", "queryable"], ["email", "unsafe"]]}
and its waits among them: ["paid", "await", "payment:7", "3 days"],
["labels", "spawn", "labels", "2"], ["labels", "join"],
["reminder", "sleep", "1 day"].  A wait that has not ended ends the lease:
the worker drops the task, and the claim that wakes it runs the workflow
from the top, where every step and wait done before returns as it was.

    python3 examples/python/worker.py --db dbname=app --service dbname=service \
        --queue orders --name py-1
"""
import argparse
import logging
import os
import signal
import threading
import time
from datetime import timedelta

import psycopg
from psycopg.types.json import Jsonb

# durable's own SQLSTATEs: psycopg has no exception classes for them, so
# match e.sqlstate (the class, 55, says "not in prerequisite state")
STALE_FENCE = "55U01"         # another worker holds the task now: drop it
VERSION_CONFLICT = "55U02"    # the step changed under us: read it again
INVALID_TRANSITION = "55U04"  # not allowed now, e.g. a step is in doubt

log = logging.getLogger("worker")


class TaskLost(Exception):
    """We no longer hold the task: stop working on it, someone else has it."""


class LeaveToRecovery(Exception):
    """Only the recovery table (or a person) may decide now: leave the task."""


class Stopping(Exception):
    """SIGTERM came: stop at this step boundary."""


def fault(point, cls=None):
    """Test-only fault injection: DURABLE_CRASH_AT=after_call:queryable."""
    if os.environ.get("DURABLE_CRASH_AT") in (point, f"{point}:{cls}"):
        os.kill(os.getpid(), signal.SIGKILL)


class Service:
    """The stand-in external service: one connection to its own database."""

    def __init__(self, conninfo):
        self.conn = psycopg.connect(conninfo, autocommit=True)
        self.call_ms = int(os.environ.get("DURABLE_CALL_MS", "0"))  # a slow service, for tests

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.conn.close()

    def call(self, cls, key):
        """Perform the effect; the service deduplicates idempotent calls by key."""
        time.sleep(self.call_ms / 1000)
        (effect,) = self.conn.execute(
            "INSERT INTO effects (key, kind) VALUES (%s, %s)"
            " ON CONFLICT (key) WHERE kind = 'idempotent' DO UPDATE SET key = excluded.key"
            " RETURNING id", (key, cls)).fetchone()
        return {"effect": f"e-{effect}"}

    def lookup(self, key):
        """Did an operation with this key happen? Its effect id, or None."""
        row = self.conn.execute("SELECT id FROM effects WHERE key = %s ORDER BY id LIMIT 1",
                                (key,)).fetchone()
        return row and f"e-{row[0]}"


class Heartbeat(threading.Thread):
    """Renews the lease of every held task, every lease/3, on its own connection."""

    def __init__(self, conninfo, every):
        super().__init__(daemon=True)
        self.conninfo, self.every = conninfo, every
        self.held, self.lost = {}, set()  # task_id -> fence; task ids lost
        self.lock = threading.Lock()

    def hold(self, task_id, fence):
        with self.lock:
            self.held[task_id] = fence

    def drop(self, task_id):
        with self.lock:
            self.held.pop(task_id, None)
            self.lost.discard(task_id)

    def is_lost(self, task_id):
        with self.lock:
            return task_id in self.lost

    def run(self):
        conn = None
        while True:
            time.sleep(self.every)
            with self.lock:
                ids, fences = list(self.held), list(self.held.values())
            if not ids:
                continue
            try:
                conn = conn or psycopg.connect(self.conninfo, autocommit=True)
                rows = conn.execute("SELECT task_id, lease_until FROM durable_heartbeat_batch("
                                    "%s::bigint[], %s::bigint[])", (ids, fences)).fetchall()
            except psycopg.OperationalError as e:
                log.warning("heartbeat: %s; reconnecting", e)
                conn = None
                continue
            with self.lock:  # no lease back: taken over, cancelled or finished
                self.lost.update(t for t, until in rows if until is None and t in self.held)


class Worker:
    def __init__(self, args):
        self.args = args
        self.lease = timedelta(seconds=args.lease)
        self.heartbeat = Heartbeat(args.db, args.lease / 3)
        self.stopping = threading.Event()
        self.stats = dict(completed=0, steps_run=0, steps_skipped=0, looked_up=0,
                          released=0, lost=0, left_waiting=0)

    def run(self):
        signal.signal(signal.SIGTERM, lambda *_: self.stopping.set())
        signal.signal(signal.SIGINT, lambda *_: self.stopping.set())
        self.heartbeat.start()
        backoff = 1
        while True:
            try:
                with psycopg.connect(self.args.db, autocommit=True,
                                     application_name=self.args.name) as conn:
                    self.give_back(conn, "reconnected")  # what a lost connection left held
                    with Service(self.args.service) as self.service:
                        backoff = 1
                        self.loop(conn)
                    self.give_back(conn, "shutdown")
                    break
            except psycopg.OperationalError as e:  # the server or the network went away
                if self.stopping.is_set():
                    break  # leases run out; recovery takes over
                log.warning("connection lost (%s); reconnecting in %s s", e, backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 30)
        log.info("stopped: %s", ", ".join(f"{k} {v}" for k, v in self.stats.items()))

    def loop(self, conn):
        idle_since = time.monotonic()
        while not self.stopping.is_set():
            # one short transaction: lease up to --batch tasks
            tasks = conn.execute("SELECT task_id, fence, payload FROM durable_claim(%s, %s, %s, %s)",
                                 (self.args.queue, self.args.name, self.lease,
                                  self.args.batch)).fetchall()
            if not tasks and not self.reconcile(conn):
                if 0 <= self.args.idle_exit < time.monotonic() - idle_since:
                    return
                self.stopping.wait(0.2)  # or LISTEN durable_ready
                continue
            idle_since = time.monotonic()
            for task_id, fence, _ in tasks:
                self.heartbeat.hold(task_id, fence)
            for task_id, fence, payload in tasks:
                if self.stopping.is_set():
                    break  # the rest are given back at once, unstarted
                self.run_task(conn, task_id, fence, payload)

    def give_back(self, conn, reason):
        """Release every task still held: ready again now, its attempt unused."""
        with self.heartbeat.lock:
            held = list(self.heartbeat.held.items())
        for task_id, fence in held:
            try:
                conn.execute("SELECT durable_release(%s, %s, %s)", (task_id, fence, reason))
                self.stats["released"] += 1
                log.info("gave task %s back (%s)", task_id, reason)
            except psycopg.Error as e:
                if e.sqlstate not in (STALE_FENCE, INVALID_TRANSITION):
                    raise
                # not ours any more, or a step in doubt: the recovery table judges it
                log.info("task %s stays with recovery: %s", task_id, e.diag.message_primary)
            self.heartbeat.drop(task_id)

    def run_task(self, conn, task_id, fence, payload):
        task = Task(self, conn, task_id, fence)
        try:
            # the application's code: one task.step() per side effect, one
            # task.wait() per wait
            results = {}
            for name, cls, *args in payload["steps"]:
                if cls in WAITS:
                    if not task.wait(name, cls, *args):
                        self.stats["left_waiting"] += 1
                        self.heartbeat.drop(task_id)  # the lease is over
                        return
                    continue
                results[name] = task.step(name, cls, {"step": name}, self.action(name, cls))
            with conn.transaction():
                # ... the application's own writes for this task go here ...
                task.call("SELECT durable_commit(%s, %s, %s)", task_id, fence,
                          Jsonb({"by": self.args.name, "steps": results}))
            self.stats["completed"] += 1
            fault("after_commit")
        except TaskLost as e:
            self.stats["lost"] += 1
            log.info("task %s lost: %s", task_id, e)
        except LeaveToRecovery as e:
            log.info("task %s left to recovery: %s", task_id, e)
        except Stopping:
            return  # still held: given back at the step boundary
        except psycopg.Error as e:
            if isinstance(e, psycopg.OperationalError):
                raise  # the connection: reconnect
            log.error("task %s abandoned (%s): %s", task_id, e.sqlstate, e)  # its lease runs out
        except Exception:  # the application's own code failed: recovery decides
            log.exception("task %s abandoned", task_id)
        self.heartbeat.drop(task_id)

    def action(self, name, cls):
        """What a step does, given its idempotency key; a pure one calls nobody."""
        if cls == "pure":
            return lambda key: {"computed": name}
        return lambda key: self.service.call(cls, key)

    def reconcile(self, conn):
        """As a reconcile handler: look up queryable steps left unknown by a crash."""
        rows = conn.execute("SELECT task_id, fence, step, idempotency_key"
                            " FROM durable_claim_reconcile(%s, %s, %s)",
                            (self.args.queue, self.args.name, self.lease)).fetchall()
        for task_id, fence, step, key in rows:
            effect = self.service.lookup(key)
            try:
                conn.execute("SELECT durable_record_receipt(%s, %s, %s, %s, %s, %s)",
                             (task_id, fence, step, "succeeded" if effect else "not_executed",
                              effect, Jsonb({"lookup": effect})))
                self.stats["looked_up"] += 1
            except psycopg.Error as e:
                if e.sqlstate != STALE_FENCE:
                    raise
        return bool(rows)


WAITS = ("sleep", "await", "spawn", "join")


class Task:
    def __init__(self, worker, conn, task_id, fence):
        self.worker, self.conn, self.id, self.fence = worker, conn, task_id, fence

    def call(self, sql, *params):
        """One durable call for this task; 55U01 means it is no longer ours."""
        if self.worker.heartbeat.is_lost(self.id):
            raise TaskLost("the heartbeat found it gone")
        try:
            return self.conn.execute(sql, params).fetchone()
        except psycopg.Error as e:
            if e.sqlstate == STALE_FENCE:
                raise TaskLost(e.diag.message_primary) from e
            if e.sqlstate == INVALID_TRANSITION:
                raise LeaveToRecovery(e.diag.message_primary) from e
            raise

    def wait(self, name, kind, *args):
        """A wait of the workflow: True when it has ended, False when the task
        now waits (durable ended the lease; drop the task)."""
        fault("before_wait", kind)
        if kind == "spawn":
            queue, n = args[0], int(args[1]) if len(args) > 1 else 1
            for i in range(1, n + 1):
                child = f"{name}-{i}"
                self.call("SELECT durable_spawn(%s, %s, %s, %s, %s)", self.id, self.fence, child,
                          queue, Jsonb({"steps": [[child, "idempotent"]]}))
            return True
        if kind == "sleep":
            (status,) = self.call("SELECT durable_sleep(%s, %s, %s, duration => %s::interval)",
                                  self.id, self.fence, name, args[0])
        elif kind == "await":
            status, _ = self.call("SELECT status, payload FROM durable_await(%s, %s, %s, %s, %s::interval)",
                                  self.id, self.fence, name, args[0], args[1] if len(args) > 1 else None)
        else:
            status, _ = self.call("SELECT status, children FROM durable_join(%s, %s, %s)",
                                  self.id, self.fence, name)
        log.info("%s %s of task %s: %s", kind, name, self.id, status)
        if status in ("sleeping", "waiting"):
            fault("after_wait", kind)
            return False
        return True

    def step(self, name, cls, request, action):
        if self.worker.stopping.is_set():
            raise Stopping()
        for _ in range(3):
            try:
                return self.try_step(name, cls, request, action)
            except psycopg.Error as e:
                if e.sqlstate != VERSION_CONFLICT:
                    raise
                log.info("step %s of task %s changed under us; reading it again", name, self.id)
        raise LeaveToRecovery(f"step {name} keeps changing")

    def try_step(self, name, cls, request, action):
        state, version, key, result = self.call(
            "SELECT state, version, idempotency_key, result FROM durable_step(%s, %s, %s, %s, %s)",
            self.id, self.fence, name, cls, Jsonb(request))
        if state in ("committed", "compensated"):
            self.worker.stats["steps_skipped"] += 1
            return result  # done before, by us or by a worker that died: skip it
        found = None
        if state == "planned":
            # commit "started" before the call: a crash after it leaves a step
            # that recovery knows may have taken effect
            (version,) = self.call("SELECT durable_step_start(%s, %s, %s, %s)",
                                   self.id, self.fence, name, version)
        # started or unknown: a call under this key may have happened.  A fresh
        # claim never sees this (recovery settles such steps before a task is
        # handed out again); a worker sees it when it comes back to a task it
        # still holds, e.g. after its step commit failed.  Never resend blindly:
        elif cls == "queryable":  # ask the service
            found = self.worker.service.lookup(key)
            if found is None:  # it did not happen: planned again, run it
                self.call("SELECT durable_record_receipt(%s, %s, %s, 'not_executed', NULL,"
                          " '{\"lookup\": null}')", self.id, self.fence, name)
                return self.try_step(name, cls, request, action)
        elif cls == "unsafe":  # nobody can know: the lease runs out, a person decides
            raise LeaveToRecovery(f"step {name} is {state} and unsafe to resend")
        # (pure and idempotent: resending under the same key is safe)
        if found:
            result = {"effect": found}
        else:
            fault("before_call", cls)
            result = action(key)  # the external call, with the step's idempotency key
            fault("after_call", cls)
        if cls != "pure":
            # the receipt is evidence: had we died before the commit, recovery
            # would complete the step instead of resending or asking a person
            (state,) = self.call("SELECT durable_record_receipt(%s, %s, %s, 'succeeded', %s, %s)",
                                 self.id, self.fence, name, result["effect"], Jsonb(result))
            version += 1  # a receipt is a change of the step
            fault("after_receipt", cls)
        if state != "committed":  # a receipt for an unknown step commits it
            self.call("SELECT durable_commit(%s, %s, %s, step => %s, expected_version => %s)",
                      self.id, self.fence, Jsonb(result), name, version)
        self.worker.stats["steps_run"] += 1
        self.call("SELECT durable_heartbeat(%s, %s, %s)", self.id, self.fence, f"{name} done")
        return result


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", required=True, help="libpq connection string of durable's database")
    p.add_argument("--service", required=True, help="connection string of the stand-in service")
    p.add_argument("--queue", required=True)
    p.add_argument("--name", required=True, help="this worker's name, in every event")
    p.add_argument("--lease", type=float, default=30, help="seconds (default 30)")
    p.add_argument("--batch", type=int, default=10, help="tasks per claim (default 10)")
    p.add_argument("--idle-exit", type=float, default=-1,
                   help="stop after this many idle seconds (default: never)")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [{args.name}] %(message)s")
    Worker(args).run()


if __name__ == "__main__":
    main()
