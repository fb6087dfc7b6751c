"""Testing your own worker: it dies in the middle of a step, and its task
comes back at once through durable_expire_lease, without sleeping out the
queue's hour-long lease; a second worker finishes it, the effect once.

    DURABLE_TEST_DSN="dbname=scratch" python3 test_crash_recovery.py   (or pytest)
"""
import os
import subprocess
import sys
import threading
import time

import psycopg
import pgdurable

DSN = os.environ["DURABLE_TEST_DSN"]


def handle(task):
    """The worker under test: one idempotent call to a service that counts."""
    def send(key):
        with psycopg.connect(DSN, autocommit=True) as service:
            service.execute("INSERT INTO calls (key) VALUES (%s)", (key,))
            service.execute("INSERT INTO sent (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,))
        return {"sent": key}
    return task.step("send", "idempotent", send)


def test_a_crashed_workers_task_comes_back_at_once():
    with psycopg.connect(DSN, autocommit=True) as db:
        db.execute("CREATE TABLE calls (key text)")
        db.execute("CREATE TABLE sent (key text PRIMARY KEY)")
        db.execute("SELECT durable_create_queue('mail', lease => '1 hour', retry_base => 1)")
        (task_id,) = db.execute("SELECT durable_enqueue('mail')").fetchone()

        # a worker process SIGKILLed right after its call, before the commit
        crash = subprocess.run([sys.executable, __file__, "worker"],
                               env={**os.environ, "DURABLE_CRASH_AT": "after_call"}, timeout=60)
        assert crash.returncode == -9

        # its lease ends now; the idempotent step is resent under its key
        (action,) = db.execute("SELECT durable_expire_lease(%s, 'test')", (task_id,)).fetchone()
        assert action == "retry_same_activity"

        worker = pgdurable.Worker(DSN, "mail", handle)
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            for _ in range(600):
                (state,) = db.execute("SELECT state FROM durable.tasks WHERE task_id = %s",
                                      (task_id,)).fetchone()
                if state == "completed":
                    break
                time.sleep(0.1)
        finally:
            worker.stop()
            thread.join()
        assert state == "completed"
        assert db.execute("SELECT count(*) FROM calls").fetchone() == (2,)  # called twice,
        assert db.execute("SELECT count(*) FROM sent").fetchone() == (1,)  # sent once


if __name__ == "__main__":
    if sys.argv[1:] == ["worker"]:
        pgdurable.Worker(DSN, "mail", handle).run()
    else:
        test_a_crashed_workers_task_comes_back_at_once()
        print("ok")
