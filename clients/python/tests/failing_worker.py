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
"""
import logging
import sys

import pgdurable

dsn, queue = sys.argv[1:3]


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
    raise AssertionError(how)


logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
pgdurable.Worker(dsn, queue, handle, name="failing", idle_exit=2, poll=0.2).run()
