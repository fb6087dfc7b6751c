"""What the clients of tools/stress-arrays share: settings, a call that
knows which SQLSTATEs it may end with, payloads, array literals, the loop of
a client."""
import collections
import json
import os
import random
import re
import time

import psycopg

SECONDS = float(os.environ.get("STRESS_SECONDS", "60"))
ENQUEUERS = int(os.environ.get("STRESS_ENQUEUERS", "3"))
WORKERS = int(os.environ.get("STRESS_WORKERS", "2"))
MAX_BATCH = int(os.environ.get("STRESS_MAX_BATCH", "1000"))
SEED = int(os.environ.get("STRESS_SEED", str(int(time.time()))))
SERVER_LOG = os.environ.get("STRESS_SERVER_LOG", "")
LABEL = os.environ.get("STRESS_LABEL", "server")
OUT = os.environ.get("STRESS_DIR", "/tmp")

QUEUES = ["stress_arrays_1", "stress_arrays_4"]  # 1 and 4 partitions
CHILDREN = "stress_arrays_children"
ALTERED = "stress_arrays_altered"
# any call under concurrency: a concurrent enqueue of the same key, a deadlock
TRANSIENT = {"40001", "40P01"}
# the server went away under the call
CRASH = {"57P01", "57P02", "57P03", "08000", "08003", "08006"}
MAX_KEY = 255


class Crash(Exception):
    pass


class Stats:
    def __init__(self, who):
        self.who = who
        self.calls = collections.Counter()
        self.errors = collections.Counter()
        self.problems = []
        self.accepted = {}  # task id -> (key or None)
        self.payloads = 0
        self.crashes = 0

    def problem(self, text):
        if len(self.problems) < 50:
            self.problems.append(f"{self.who}: {text}")

    def save(self):
        with open(os.path.join(OUT, f"{self.who}.json"), "w") as f:
            json.dump({"calls": self.calls, "errors": self.errors,
                       "problems": self.problems, "payloads": self.payloads,
                       "crashes": self.crashes,
                       "accepted": [[i, k] for i, k in self.accepted.items()]}, f)


def connect():
    conn = psycopg.connect(autocommit=True)
    conn.execute("SET application_name = 'stress-arrays'")
    return conn


def call(conn, st, name, sql, params=(), expect=None, allowed=()):
    """Run one statement; its rows, or None when it failed.

    expect: the SQLSTATEs it must fail with (None: it must succeed);
    allowed: others it may fail with besides TRANSIENT.
    """
    st.calls[name] += 1
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            rows = cur.fetchall() if cur.description else []
    except psycopg.Error as e:
        code = e.sqlstate
        if code is None or code in CRASH or conn.closed:
            raise Crash(f"{name}: {code} {e}")
        st.errors[code] += 1
        if expect is not None and code in expect:
            return None
        if code not in TRANSIENT and code not in allowed:
            st.problem(f"{name} raised {code}: {str(e).splitlines()[0]}"
                       + ("" if expect is None else f" (expected {sorted(expect)})"))
        return None
    if expect is not None:
        st.problem(f"{name} succeeded, expected {sorted(expect)}")
        return None
    return rows


# ---- payloads ----

def payload_text(rng, i, big_budget):
    """The JSON text of a payload, and its kind."""
    r = rng.random()
    if r < 0.5:
        return json.dumps({"i": i, "n": rng.randint(0, 10**6)}), "small"
    if r < 0.7:
        return json.dumps({"i": i, "tags": [rng.random() for _ in range(20)],
                           "s": "x" * rng.randint(10, 400)}), "medium"
    if r < 0.78 and big_budget[0] > 0:
        # incompressible, so that the stored row is toasted out of line
        s = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789")
                    for _ in range(rng.randint(2100, 9000)))
        big_budget[0] -= len(s)
        return json.dumps({"i": i, "blob": s}), "toasted"
    if r < 0.84:
        # numbers with trailing zeros: the request hash trims them
        return '{"i": %d, "price": 2.50, "qty": 1.0, "neg": -0.00}' % i, "numbers"
    if r < 0.9:
        return rng.choice(['%d' % i, '"scalar-%d"' % i, 'true', 'null', '%d.000' % i,
                           '[%d, 1.0, [2.50]]' % i]), "scalar"
    if r < 0.95:
        depth = rng.randint(50, 400)
        return "[" * depth + str(i) + "]" * depth, "deep"
    return json.dumps({"i": i, "u": "\u00e9\u4e2d\U0001f600", "esc": "\"\\\n"}), "unicode"


def respell(text):
    """The same request written otherwise: every number with a trailing zero
    in its fraction (7 as 7.0, 1.5 as 1.50), which the request hash trims."""
    def dump(v):
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, int):
            return f"{v}.0"
        if isinstance(v, float):
            r = repr(v)
            return r + "0" if "." in r and "e" not in r else r
        if isinstance(v, list):
            return "[" + ", ".join(dump(x) for x in v) + "]"
        return "{" + ", ".join(json.dumps(k) + ": " + dump(x) for k, x in v.items()) + "}"
    deep = re.fullmatch(r"(\[+)(-?\d+)(\]+)", text)
    if deep:    # deeper than Python's recursion goes
        return f"{deep[1]}{deep[2]}.0{deep[3]}"
    return dump(json.loads(text))


def array_literal(items, lower=1):
    """The text of a one-dimensional array literal, lower bound given."""
    def elem(x):
        if x is None:
            return "NULL"
        return '"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"'
    body = "{" + ",".join(elem(x) for x in items) + "}"
    if lower != 1 and items:
        return f"[{lower}:{lower + len(items) - 1}]={body}"
    return body


def reconnect():
    for _ in range(60):
        try:
            return connect()
        except psycopg.Error:
            time.sleep(2)
    return None


def client(who, seed, deadline, step):
    """Call step(conn, st, rng, state) until the deadline, reconnecting after
    a lost connection (counted as a crash), then save what it saw."""
    rng = random.Random(seed)
    st = Stats(who)
    state = {}
    conn = connect()
    while time.time() < deadline:
        try:
            step(conn, st, rng, state)
        except Crash as e:
            st.crashes += 1
            st.problem(f"connection lost: {e}")
            time.sleep(5)
            conn = reconnect()
            if conn is None:
                break
    st.save()
