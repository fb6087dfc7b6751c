"""The producer API against a real server, for 022.

    producer_checks.py DSN OUTSIDER_DSN

DSN's role may do everything; OUTSIDER_DSN's role has no grant of durable.
The queues py_produce (a worker runs it here), py_idle (nobody does), the
rate limit py-llm and the budget py-spend exist.  Prints what it found, a
line "name=value" each, for the test to compare; ids of tasks the test
reads itself from durable.tasks.
"""
import json
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import psycopg

import pgdurable

dsn, outsider = sys.argv[1:3]
facts = {}


def fact(name, value):
    facts[name] = value
    print(f"{name}={value}", flush=True)


def raised(call):
    """The typed error a call raised: its class, SQLSTATE and what it is chained from."""
    try:
        call()
    except pgdurable.DurableError as e:
        cause = type(e.__cause__).__module__.split(".")[0] if e.__cause__ else None
        return f"{type(e).__name__} {e.sqlstate} from {cause}: {e}"
    return "nothing"


# ---- the caller's transaction: enqueue commits with the application's writes, or not at all ----

with psycopg.connect(dsn) as conn:  # not autocommit: a transaction until commit or rollback
    conn.execute("INSERT INTO orders (note) VALUES ('rolled back')")
    rolled_back = pgdurable.enqueue(conn, "py_idle", {"note": "rolled back"})
    fact("in_transaction_before_rollback", conn.info.transaction_status.name)
    conn.rollback()
    fact("rolled_back", rolled_back)
    fact("rolled_back_result", raised(lambda: pgdurable.result(conn, rolled_back)))
    conn.rollback()
    conn.execute("INSERT INTO orders (note) VALUES ('committed')")
    committed = pgdurable.enqueue(conn, "py_idle", {"note": "committed"}, idempotency_key="order-1")
    fact("still_in_transaction", conn.info.transaction_status.name)
    conn.commit()
    fact("committed", committed)
    with conn.transaction():  # psycopg's block: committed at its end
        in_block = pgdurable.enqueue(conn, "py_idle", {"note": "block"})
        conn.execute("INSERT INTO orders (note) VALUES ('block')")
    fact("in_block", in_block)

# ---- every option of durable_enqueue, by name ----

run_at = datetime(2031, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
with_options = pgdurable.enqueue(
    dsn, "py_idle", {"all": "options"}, idempotency_key="all-options", run_at=run_at, priority=7,
    cls="queryable", max_attempts=9, deadline=timedelta(hours=2), workflow_version="w-3",
    metadata={"tenant": "t1"}, concurrency_key="c1", fairness_key="f1", rate_limits={"py-llm": 2},
    budgets=["py-spend"], spend_limit=12.5)
fact("with_options", with_options)
fact("same_key_same_payload", pgdurable.enqueue(dsn, "py_idle", {"all": "options"},
                                                idempotency_key="all-options") == with_options)
fact("deadline_as_text", pgdurable.enqueue(dsn, "py_idle", {"d": 1}, deadline="3 days"))

# ---- a typed error for each refusal, chained from psycopg's ----

fact("idempotency_conflict", raised(lambda: pgdurable.enqueue(dsn, "py_idle", {"other": 1},
                                                               idempotency_key="all-options")))
fact("unknown_queue", raised(lambda: pgdurable.enqueue(dsn, "py_nowhere", {})))
fact("unknown_rate_limit", raised(lambda: pgdurable.enqueue(dsn, "py_idle", {}, rate_limits={"py-none": 1})))
fact("bad_class", raised(lambda: pgdurable.enqueue(dsn, "py_idle", {}, cls="careless")))
fact("permission_denied", raised(lambda: pgdurable.enqueue(outsider, "py_idle", {})))
fact("unknown_task", raised(lambda: pgdurable.result(dsn, 1)))
fact("is_a_durable_error", issubclass(pgdurable.IdempotencyConflict, pgdurable.DurableError)
     and issubclass(pgdurable.BudgetExhausted, pgdurable.DurableError)
     and pgdurable.BudgetExhausted.sqlstate == "55U05")
with psycopg.connect(dsn) as conn:  # a refusal leaves the caller's transaction to the caller
    try:
        pgdurable.enqueue(conn, "py_nowhere", {})
    except pgdurable.UnknownObject:
        fact("after_refusal", conn.info.transaction_status.name)

# ---- batch, debounce, throttle, emit, schedule ----

batch = pgdurable.enqueue_batch(dsn, "py_idle", [{"b": 1}, {"b": 2}, {"b": 3}], ["b-1", None, "b-3"],
                                priority=2)
fact("batch", ",".join(map(str, batch)))
fact("batch_again", pgdurable.enqueue_batch(dsn, "py_idle", [{"b": 1}], ["b-1"])[0] == batch[0])
first = pgdurable.debounce(dsn, "py_idle", "typing", {"text": "h"}, 3600, max_wait=7200)
fact("debounced", pgdurable.debounce(dsn, "py_idle", "typing", {"text": "hello"}, 3600) == first)
fact("debounced_task", first)
first = pgdurable.throttle(dsn, "py_idle", "report", {"n": 1}, timedelta(hours=1))
fact("throttled", pgdurable.throttle(dsn, "py_idle", "report", {"n": 2}, "1 hour") == first)
fact("emitted", [pgdurable.emit(dsn, "py_idle", "paid:1", {"amount": 5}),
                 pgdurable.emit(dsn, "py_idle", "paid:1", {"amount": 5})])
fact("emit_conflict", raised(lambda: pgdurable.emit(dsn, "py_idle", "paid:1", {"amount": 6})))
next_run = pgdurable.schedule(dsn, "py-nightly", "0 3 * * *", "py_idle", {"nightly": True},
                              timezone="Europe/Paris")
fact("next_run", isinstance(next_run, datetime) and next_run > datetime.now(timezone.utc))
fact("bad_cron", raised(lambda: pgdurable.schedule(dsn, "py-bad", "every day", "py_idle")))
fact("schedule_denied", raised(lambda: pgdurable.schedule(outsider, "py-x", "0 3 * * *", "py_idle")))
pgdurable.schedule(dsn, "py-gone", "*/5 * * * *", "py_idle")
fact("unscheduled", [pgdurable.unschedule(dsn, "py-gone"), pgdurable.unschedule(dsn, "py-gone")])

# ---- results: a worker runs py_produce here ----


def handle(task):
    how = task.payload.get("how")
    if how == "fail":
        raise pgdurable.Failed("the card was declined", error_class="permanent")
    if how == "slow":
        time.sleep(1)
    return {"done": task.payload}


worker = pgdurable.Worker(dsn, "py_produce", handle, name="py-producer-worker", poll=0.1)
thread = threading.Thread(target=worker.run)
thread.start()
try:
    ok = pgdurable.enqueue(dsn, "py_produce", {"how": "slow"})
    fact("completed", json.dumps(pgdurable.wait_for_result(dsn, ok, timeout=60), sort_keys=True))
    fact("result", pgdurable.result(dsn, ok)._replace(finished_at=None))
    with psycopg.connect(dsn) as conn:  # the caller's connection, not autocommit
        bad = pgdurable.enqueue(conn, "py_produce", {"how": "fail"})
        try:
            pgdurable.wait_for_result(conn, bad, timeout=60)
        except pgdurable.InTransaction as e:
            fact("wait_in_transaction", f"InTransaction: {e}")
        conn.commit()
        try:
            pgdurable.wait_for_result(conn, bad, timeout=60)
        except pgdurable.TaskFailed as e:
            fact("failed", f"{type(e).__name__} {e.task_id == bad} {json.dumps(e.error, sort_keys=True)}")
        fact("after_wait", conn.info.transaction_status.name)
finally:
    worker.stop()
    thread.join()

idle = pgdurable.enqueue(dsn, "py_idle", {"nobody": "works it"})
began = time.monotonic()
try:
    pgdurable.wait_for_result(dsn, idle, timeout=1.5)
except TimeoutError as e:
    fact("timed_out", f"{type(e).__name__} {isinstance(e, pgdurable.DurableError)} {e.state}"
                      f" {time.monotonic() - began >= 1.5}: {e}")
with psycopg.connect(dsn, autocommit=True) as conn:
    conn.execute("SELECT durable_cancel(%s, 'the customer changed their mind')", (idle,))
    try:
        pgdurable.wait_for_result(conn, idle, timeout=60)
    except pgdurable.TaskCancelled as e:
        fact("cancelled", f"{type(e).__name__} {e.task_id == idle}")
fact("wait_unknown", raised(lambda: pgdurable.wait_for_result(dsn, 1, timeout=60)))
