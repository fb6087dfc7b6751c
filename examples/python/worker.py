#!/usr/bin/env python3
"""A durable worker in Python on pgdurable (clients/python): start from it.

Each task's payload names its steps and waits, run against the stand-in
service of examples/service.sql, which counts effects, e.g.
{"steps": [["reserve", "idempotent"], ["charge", "queryable"], ["email", "unsafe"],
           ["paid", "await", "payment:7", "3 days"], ["labels", "spawn", "labels", "2"],
           ["labels", "join"], ["reminder", "sleep", "1 day"]]}

    python3 examples/python/worker.py --db dbname=app --service dbname=service \
        --queue orders --name py-1 [--pooled] [--concurrency N]
"""
import argparse
import logging
import os
import sys
import time

try:
    import pgdurable  # first: without psycopg it says how to install it
    import psycopg
except ImportError as e:
    sys.exit(f"{e}: pip install clients/python" if e.name == "pgdurable" else str(e))


class Service:
    """The stand-in external service: idempotent calls are deduplicated by key."""

    def __init__(self, dsn):
        # behind a transaction-mode pooler too: no server-side prepared statements;
        # one connection, which psycopg lets the handlers' threads share
        self.conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=None)
        self.call_ms = int(os.environ.get("DURABLE_CALL_MS", "0"))  # a slow service, for tests

    def call(self, cls, key):
        time.sleep(self.call_ms / 1000)
        (effect,) = self.conn.execute(
            "INSERT INTO effects (key, kind) VALUES (%s, %s) ON CONFLICT (key)"
            " WHERE kind = 'idempotent' DO UPDATE SET key = excluded.key RETURNING id",
            (key, cls)).fetchone()
        return {"effect": f"e-{effect}"}

    def lookup(self, step, key):
        """What call returned for key, or None: it becomes the step's result."""
        row = self.conn.execute("SELECT id FROM effects WHERE key = %s ORDER BY id LIMIT 1",
                                (key,)).fetchone()
        return row and {"effect": f"e-{row[0]}"}


def handler(service, worker_name):
    def handle(task):
        results = {}
        for name, kind, *args in task.payload["steps"]:
            if kind == "sleep":
                task.sleep(name, args[0])
            elif kind == "await":
                task.await_event(name, args[0], timeout=args[1] if len(args) > 1 else None)
            elif kind == "spawn":
                for i in range(1, int(args[1] if len(args) > 1 else 1) + 1):
                    task.spawn(f"{name}-{i}", args[0], {"steps": [[f"{name}-{i}", "idempotent"]]})
            elif kind == "join":
                task.join(name)
            elif kind == "pure":
                results[name] = task.step(name, kind, lambda key: {"computed": key})
            else:
                results[name] = task.step(name, kind, lambda key: service.call(kind, key),
                                          {"step": name}, effect_id=lambda r: r["effect"])
        return {"by": worker_name, "steps": results}
    return handle


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", required=True, help="libpq connection string of durable's database")
    p.add_argument("--service", required=True, help="connection string of the stand-in service")
    p.add_argument("--queue", required=True)
    p.add_argument("--name", required=True, help="this worker's name, in every event")
    p.add_argument("--lease", type=float, help="seconds (default: the queue's lease)")
    p.add_argument("--batch", type=int, help="tasks per claim (default 10; 1 with --concurrency)")
    p.add_argument("--idle-exit", type=float, help="stop after this many idle seconds")
    p.add_argument("--pooled", action="store_true", default=bool(os.environ.get("DURABLE_POOLED")),
                   help="behind a transaction-mode pooler: no prepared statements, no LISTEN"
                        " (also DURABLE_POOLED=1; without it the worker finds out at start)")
    p.add_argument("--concurrency", type=int, default=1, help="handlers at once (default 1)")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [{args.name}] %(message)s")
    service = Service(args.service)
    pgdurable.Worker(args.db, args.queue, handler(service, args.name), name=args.name,
                     lookup=service.lookup, lease=args.lease, batch=args.batch,
                     idle_exit=args.idle_exit, poll=0.2, pooled=args.pooled or None,
                     concurrency=args.concurrency).run()


if __name__ == "__main__":
    main()
