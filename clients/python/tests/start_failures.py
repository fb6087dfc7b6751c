"""Workers whose connection string cannot work, for 022: run() must raise
ConnectFailed with the reason, not retry for ever.

    start_failures.py REFUSED_DSN UNKNOWN_ROLE_DSN GOOD_DSN

Prints, for each of those, a malformed string, and GOOD_DSN with a
malformed heartbeat_dsn, a line "what: ConnectFailed after N s (its
cause): its message".
"""
import logging
import sys
import threading
import time

import pgdurable

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(message)s")
cases = {"refused": (sys.argv[1], None), "unknown_role": (sys.argv[2], None),
         "malformed": ("dbname=postgres nonsense", None), "heartbeat_malformed": (sys.argv[3], "nonsense")}
lines = {}


def start(what, dsns):
    began = time.monotonic()
    dsn, heartbeat_dsn = dsns
    try:
        pgdurable.Worker(dsn, "py_nowhere", lambda task: None, name=f"py-{what}", heartbeat_dsn=heartbeat_dsn,
                         idle_exit=0).run()
        lines[what] = f"{what}: returned"
    except pgdurable.ConnectFailed as e:
        lines[what] = (f"{what}: ConnectFailed after {time.monotonic() - began:.0f} s"
                       f" ({type(e.__cause__).__name__}): {e}")


threads = [threading.Thread(target=start, args=case) for case in cases.items()]
for t in threads:
    t.start()
for t in threads:
    t.join()
for what in cases:
    print(lines.get(what, f"{what}: raised something else (see the log)"))
