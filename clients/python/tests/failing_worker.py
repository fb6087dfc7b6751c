"""A worker whose handler fails as each task's payload says, for 022.

    failing_worker.py DSN QUEUE

Payload {"fail": how}:
  raise        a ValueError from the handler: durable_fail 'transient'
  permanent    pgdurable.Failed(..., 'permanent')
  unknown      pgdurable.Failed(..., 'unknown')
  call         an idempotent step's call raises at the first attempt
  unsafe_call  an unsafe step's call raises: nobody knows if it took effect
  conflict     a step replayed with another request (55U03)
  transaction  the application's own write and the commit in one transaction
  step_in_transaction, sleep_in_transaction, spawn_in_transaction
               a step (whose call would write to called), a wait or a spawn
               inside task.transaction(): refused, the task fails
  emit_in_transaction
               an emit and the commit in one transaction: allowed
  caught_call  an idempotent step's call raises at the first attempt and
               the handler catches the error and returns
  rolled_back  complete() inside task.transaction(), then the block rolls
               back; the handler catches that and returns normally
  own_conn     a query on the handler's own connection (not the worker's)
               raises 08001 at the handler's first run, as dblink or
               postgres_fdw do when their server is down
  cast         the handler's query is wrong (22P02)
"""
import logging
import sys
from collections import Counter

import psycopg

import pgdurable

dsn, queue = sys.argv[1:3]
side = psycopg.connect(dsn, autocommit=True)  # outside any task's transaction
runs = Counter()


def record_call(how):
    side.execute("INSERT INTO called (how) VALUES (%s)", (how,))
    return {"called": how}


def handle(task):
    how = task.payload["fail"]
    if how == "raise":
        raise ValueError("the handler's own bug")
    if how in ("permanent", "unknown"):
        raise pgdurable.Failed(f"failed as {how}", error_class=how)
    if how == "call":
        def flaky(key):
            if task.attempt == 1:
                raise ConnectionError("the service went away")
            return {"sent": key}
        return task.step("send", "idempotent", flaky)
    if how == "unsafe_call":
        def lost(key):
            raise TimeoutError("no answer")
        return task.step("wire", "unsafe", lost)
    if how == "conflict":
        task.step("quote", "pure", lambda key: {"n": task.attempt}, request={"n": task.attempt})
        raise ValueError("fail once so that the replay asks again, with another request")
    if how == "transaction":
        with task.transaction() as conn:
            conn.execute("INSERT INTO written (task_id) VALUES (%s)", (task.id,))
            task.complete({"written": True})
        return None
    if how.endswith("_in_transaction"):
        with task.transaction():
            if how == "step_in_transaction":
                task.step("send", "unsafe", lambda key: record_call(how))
            elif how == "sleep_in_transaction":
                task.sleep("nap", 3600)
            elif how == "spawn_in_transaction":
                task.spawn("child", queue, {"fail": "raise"})
            else:
                task.emit("in_transaction", {"task": task.id})
            task.complete({"how": how})
        return None
    if how == "caught_call":
        def flaky(key):
            if task.attempt == 1:
                raise ConnectionError("the service went away")
            return {"sent": key}
        try:
            return task.step("send", "idempotent", flaky)
        except Exception:
            return {"carried": "on"}  # as if the step had not mattered
    if how == "rolled_back":
        try:
            with task.transaction() as conn:
                conn.execute("INSERT INTO written (task_id) VALUES (%s)", (task.id,))
                task.complete({"written": True})
                raise ValueError("the block fails after complete()")
        except ValueError:
            pass
        return {"written": False}
    if how == "own_conn":
        runs[task.id] += 1
        with psycopg.connect(dsn, autocommit=True) as own:
            if runs[task.id] == 1:
                own.execute("DO $$ BEGIN RAISE EXCEPTION 'could not connect to the other server'"
                            " USING ERRCODE = '08001'; END $$")
        return {"runs": runs[task.id]}
    if how == "cast":
        with psycopg.connect(dsn, autocommit=True) as own:
            own.execute("SELECT 'not a number'::int")
    raise AssertionError(how)


logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
pgdurable.Worker(dsn, queue, handle, name="failing", idle_exit=2, poll=0.2).run()
