"""A worker with one queryable step, the README's charge, for 022.

    lookup_worker.py DSN QUEUE

The charge is a row of charges (the stand-in payment service); its call
returns {"id": "ch-N"}, and the handler returns {"charged": charge["id"]},
so a step result of any other shape fails the task.  Payload {"call": how}:
  ok     the call charges and returns
  raise  the call charges, then raises (a timeout): nobody knows it took effect
  held   the handler starts the step and charges under its key itself, then
         runs the step: it finds the step started on a task it holds (as
         after a failed commit) and looks it up
LOOKUP=down in the environment: the worker's lookup raises (the payment
service is down).  DURABLE_CRASH_AT works as in the example worker.
"""
import logging
import os
import sys

import psycopg

import pgdurable

dsn, queue = sys.argv[1:3]
payments = psycopg.connect(dsn, autocommit=True)


def charge(key):
    (n,) = payments.execute("INSERT INTO charges (key) VALUES (%s) RETURNING n", (key,)).fetchone()
    return {"id": f"ch-{n}"}


def lookup(step, key):
    if os.environ.get("LOOKUP") == "down":
        raise ConnectionError("the payment service is down")
    row = payments.execute("SELECT n FROM charges WHERE key = %s", (key,)).fetchone()
    return row and {"id": f"ch-{row[0]}"}


def handle(task):
    how = task.payload["call"]

    def call(key):
        result = charge(key)
        if how == "raise":
            raise TimeoutError("no answer from the payment service")
        return result

    if how == "held":
        version, key = task.call("SELECT version, idempotency_key FROM durable_step(%s, %s, 'charge',"
                                 " 'queryable', NULL, NULL)", task.id, task.fence)
        task.call("SELECT durable_step_start(%s, %s, 'charge', %s)", task.id, task.fence, version)
        charge(key)
    result = task.step("charge", "queryable", call, effect_id=lambda r: r["id"])
    return {"charged": result["id"]}


logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
pgdurable.Worker(dsn, queue, handle, name="lookup", lookup=lookup, idle_exit=1, poll=0.2).run()
