"""A worker with the options the test gives, for 022.

    option_worker.py DSN QUEUE '{"name": ..., "pooled": ..., "concurrency": ..., ...}'

The JSON is Worker's keyword arguments (idle_exit 1 and poll 0.2 unless
given).  Each run of the handler is a row of py_runs (task, fence,
thread).  Payload:
  {"steps": N}          N pure steps, then the task's result
  {"gate": true}        a step whose call reads py_gate, which waits while the
                        test holds its lock
  {"barrier": N}        wait until N handlers wait together (a minute at
                        most: then the task fails)
  {"kill": true}        SIGKILL this process at the task's first attempt
  {"expire_other": true}
                        end the lease of the other task of the queue this
                        worker holds (durable_expire_lease, as an operator)
"""
import json
import logging
import os
import signal
import sys
import threading

import psycopg

import pgdurable

dsn, queue, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
options = {"idle_exit": 1, "poll": 0.2, **options}
side = psycopg.connect(dsn, autocommit=True, prepare_threshold=None)  # shared by the handlers' threads
barriers = {}
barriers_lock = threading.Lock()


def handle(task):
    p = task.payload
    side.execute("INSERT INTO py_runs (task_id, fence, thread) VALUES (%s, %s, %s)",
                 (task.id, task.fence, threading.current_thread().name))
    if p.get("kill") and task.attempt == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if p.get("expire_other"):
        side.execute("SELECT durable_expire_lease(task_id, 'test: before it began') FROM durable.tasks"
                     " WHERE queue_name = %s AND state = 'running' AND task_id <> %s", (queue, task.id))
    if p.get("gate"):
        task.step("gate", "pure", lambda key: side.execute("SELECT count(*) FROM py_gate").fetchone()[0])
    if p.get("barrier"):
        with barriers_lock:
            barrier = barriers.setdefault(p["barrier"], threading.Barrier(p["barrier"], timeout=60))
        barrier.wait()  # BrokenBarrierError: they did not run together
    for i in range(p.get("steps", 0)):
        task.step(f"step-{i}", "pure", lambda key: {"key": key})
    return {"thread": threading.current_thread().name, "fence": task.fence}


logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(message)s")
stats = pgdurable.Worker(dsn, queue, handle, **options).run()
