#!/usr/bin/python3
"""Stress every SQL function of durable that takes an array (tools/stress-arrays).

Against a server tools/stress-arrays started (PGHOST, PGPORT, PGUSER,
PGDATABASE), for STRESS_SECONDS: enqueuers call durable_enqueue_batch with
batches of 1 to STRESS_MAX_BATCH payloads (small, medium, toasted, numbers
spelt two ways, top-level scalars, deep nesting; with and without
idempotency and concurrency keys, keys repeated within a batch, replays,
keys shared by every enqueuer, lower bounds other than 1, whole arrays
stored toasted in a table, expanded arrays from PL/pgSQL, savepoints) and
the calls that must fail; workers claim, renew with durable_heartbeat_batch,
commit with durable_commit_batch, fail, abandon leases to the reconciler,
spawn and join children, and use durable_outbox_ack,
durable_idempotency_key, durable_alter_queue(clear) and
durable.execute_in_partition, good and bad.  Each call either succeeds with
a result that is checked, or fails with a SQLSTATE it may fail with.

At the end: no backend crash (a lost connection, or the server log's
"terminated by signal" or "TRAP:"), every task an enqueue accepted present
exactly once and nothing else in the enqueuers' queues, one task per
idempotency key, and durable_verify() empty.  Prints one summary line and
exits 1 on any failure.
"""
import collections
import json
import multiprocessing
import os
import re
import sys
import time

import psycopg
from psycopg.types.json import Jsonb

from stress_common import (ALTERED, CHILDREN, CRASH, ENQUEUERS, LABEL, MAX_BATCH, MAX_KEY, OUT,
                           QUEUES, SECONDS, SEED, SERVER_LOG, TRANSIENT, WORKERS, Crash,
                           array_literal, call, client, connect, payload_text, reconnect,
                           respell)
from stress_workers import alter_clear, key_parts, work_step


# ---- the enqueuers ----

ENQUEUE = ("SELECT durable_enqueue_batch(%s, {p}, {k}, concurrency_keys => {c})")


def enqueue(conn, st, name, queue, texts, keys, ckeys=None, binary=False,
            lower=1, expect=None, allowed=()):
    """durable_enqueue_batch with these payload texts and keys; its ids or None."""
    if binary and lower == 1:
        p = "%b::jsonb[]"
        pv = [None if t is None else Jsonb(json.loads(t)) for t in texts]
        if not pv:
            p, pv = "%t::jsonb[]", "{}"
    else:
        p, pv = "%t::jsonb[]", array_literal(texts, lower)
    k, kv = ("%t::text[]", array_literal(keys, lower)) if keys is not None else ("%t::text[]", None)
    c, cv = ("%t::text[]", array_literal(ckeys)) if ckeys is not None else ("%t::text[]", None)
    rows = call(conn, st, name, ENQUEUE.format(p=p, k=k, c=c), (queue, pv, kv, cv),
                expect=expect, allowed=allowed)
    return None if rows is None else rows[0][0]


def check_ids(st, name, ids, texts, keys, known):
    """The ids of an accepted batch: one per payload, a repeated key (same
    request) gives one id, others distinct; known: key -> id seen before."""
    if ids is None or len(ids) != len(texts):
        st.problem(f"{name}: {len(texts)} payloads, ids {ids if ids is None else len(ids)}")
        return
    by_key = {}
    for pos, tid in enumerate(ids):
        key = keys[pos] if keys is not None else None
        if key is not None:
            if key in by_key and by_key[key] != tid:
                st.problem(f"{name}: key {key} repeated in a batch got {by_key[key]} and {tid}")
            by_key[key] = tid
            if key in known and known[key] != tid:
                st.problem(f"{name}: key {key} was task {known[key]}, now {tid}")
            known[key] = tid
        if tid in st.accepted and (key is None or st.accepted[tid] != key):
            st.problem(f"{name}: task {tid} returned twice")
        st.accepted[tid] = key
    st.payloads += len(texts)


def batch_size(rng):
    r = rng.random()
    if r < 0.15:
        return MAX_BATCH
    if r < 0.5:
        return rng.randint(1, 10)
    return rng.randint(1, MAX_BATCH)


def enqueue_step(conn, st, rng, state):
    """A batch of random size and payloads, then one of the other cases."""
    n = state.setdefault("n", int(st.who[len("enqueuer"):]))
    known = state.setdefault("known", {})      # key -> task id
    replays = state.setdefault("replays", [])  # keyed batches accepted
    serial = state["serial"] = state.get("serial", 0) + 1
    queue = rng.choice(QUEUES)
    size = batch_size(rng)
    budget = [2_000_000]
    texts = [payload_text(rng, i, budget)[0] for i in range(size)]
    mode = rng.random()
    keys = ckeys = None
    if 0.4 <= mode < 0.85:
        keys = [None if rng.random() < 0.2 else f"{n}-{serial}-{i}" for i in range(size)]
        for _ in range(rng.randint(0, 3)):   # a key repeated, same request
            a, b = rng.randrange(size), rng.randrange(size)
            if keys[a] is not None:
                keys[b], texts[b] = keys[a], texts[a]
    elif mode >= 0.85:
        # keys every enqueuer uses, each for one request
        keys = [f"shared-{queue}-{rng.randint(0, 2000)}" for _ in range(size)]
        texts = ['{"shared": "%s", "x": 1.50}' % k for k in keys]
    if rng.random() < 0.2:
        ckeys = [None if rng.random() < 0.3 else f"ck{rng.randint(0, 9)}" for _ in range(size)]
    lower = rng.choice([1, 1, 1, 0, -5, 100])
    ids = enqueue(conn, st, "enqueue_batch", queue, texts, keys, ckeys,
                  binary=rng.random() < 0.5, lower=lower)
    if ids is not None:
        check_ids(st, "enqueue_batch", ids, texts, keys, known)
        if keys is not None and rng.random() < 0.3:
            replays.append((queue, texts, keys, ids))
            del replays[:-20]
    extra(conn, st, rng, n, serial, known, replays)


def extra(conn, st, rng, n, serial, known, replays):
    """Between two batches, one of the other cases."""
    queue = rng.choice(QUEUES)
    r = rng.random()
    tag = f"{n}-{serial}"
    if r < 0.15 and replays:
        q, texts, keys, ids = rng.choice(replays)
        # the same requests again, numbers spelt otherwise: the same tasks
        again = enqueue(conn, st, "enqueue_batch replay", q, [respell(t) for t in texts], keys)
        if again is not None:
            if any(k is not None and a != b for k, a, b in zip(keys, again, ids)):
                st.problem("a replayed batch returned other ids for its keys")
            # (its elements without a key are new tasks)
            check_ids(st, "enqueue_batch replay", again, texts, keys, known)
    elif r < 0.25 and replays:
        q, texts, keys, ids = rng.choice(replays)
        pos = next((i for i, k in enumerate(keys) if k is not None), None)
        if pos is not None:
            other = ['{"other": %d}' % i for i in range(len(texts))]
            enqueue(conn, st, "enqueue_batch conflict", q, other, keys, expect={"55U03"})
    elif r < 0.3:
        enqueue(conn, st, "enqueue_batch repeated key, other payload", queue,
                ['{"a": 1}', '{"a": 2}'], [f"dup-{tag}", f"dup-{tag}"], expect={"55U03"})
    elif r < 0.4:
        bad_enqueue(conn, st, rng, queue, tag)
    elif r < 0.47:
        stored_batch(conn, st, rng, queue, tag, known)
    elif r < 0.54:
        expanded_batch(conn, st, rng, queue, tag, known)
    elif r < 0.62:
        savepoints(conn, st, rng, queue, tag, known)
    elif r < 0.7:
        ids = enqueue(conn, st, "enqueue_batch empty", queue, [], None)
        if ids is not None and list(ids) != []:
            st.problem(f"an empty batch returned {ids}")
        enqueue(conn, st, "enqueue_batch empty keyed", queue, [], [])
    elif r < 0.8:
        key_parts(conn, st, rng)
    elif r < 0.85:
        alter_clear(conn, st, rng)
    elif r < 0.88:
        call(conn, st, "execute_in_partition unknown",
             "SELECT * FROM durable.execute_in_partition(1, 'no such statement', %s::bytea[], 5)"
             " AS t(a int)", (["\\x00"],), expect={"22023"})
        call(conn, st, "execute_in_partition 2-D",
             "SELECT * FROM durable.execute_in_partition(1, 'task_get', '{{1},{2}}'::bytea[], 5)"
             " AS t(a int)", expect={"22023", "42804"})


def bad_enqueue(conn, st, rng, queue, tag):
    """Calls that must fail, and add nothing."""
    size = rng.randint(1, 50)
    texts = ['{"bad": %d}' % i for i in range(size)]
    which = rng.randrange(9)
    if which == 0:
        texts[rng.randrange(size)] = None
        enqueue(conn, st, "enqueue_batch null payload", queue, texts, None,
                binary=rng.random() < 0.5, expect={"22004"})
    elif which == 1:
        enqueue(conn, st, "enqueue_batch keys too few", queue, texts,
                [f"k-{tag}-{i}" for i in range(size + 1)], expect={"22023"})
    elif which == 2:
        call(conn, st, "enqueue_batch 2-D", "SELECT durable_enqueue_batch(%s, %t::jsonb[])",
             (queue, '{{"{}","{}"},{"{}","{}"}}'), expect={"2202E"})
    elif which == 3:
        keys = [f"k-{tag}-{i}" for i in range(size)]
        keys[-1] = rng.choice(["", "k" * (MAX_KEY + 1)])
        enqueue(conn, st, "enqueue_batch bad key", queue, texts, keys, expect={"22023"})
    elif which == 4:
        with conn.transaction():
            conn.execute("SET LOCAL durable.max_payload_size = '64kB'")
            texts[0] = json.dumps({"s": "y" * (64 * 1024 - 200)})
            texts[-1] = json.dumps({"s": "y" * (64 * 1024 + 100)})
            enqueue(conn, st, "enqueue_batch payload too large", queue, texts, None,
                    expect={"54000"})
            raise psycopg.Rollback()
    elif which == 5:
        enqueue(conn, st, "enqueue_batch unknown queue", f"no_such_queue_{tag}", texts, None,
                expect={"42704"})
    elif which == 6:
        call(conn, st, "enqueue_batch null array", "SELECT durable_enqueue_batch(%s, NULL)",
             (queue,), expect={"22004"})
    elif which == 7:
        call(conn, st, "enqueue_batch over the limit",
             "SELECT durable_enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[10001]))",
             (queue,), expect={"54000"})
    else:
        enqueue(conn, st, "enqueue_batch concurrency keys too many", queue, texts, None,
                ckeys=[None] * (size + 2), expect={"22023"})


def stored_batch(conn, st, rng, queue, tag, known):
    """A batch stored in a table first: the array argument arrives toasted
    (compressed, or out of line uncompressed)."""
    size = rng.randint(100, MAX_BATCH)
    texts = [json.dumps({"stored": i, "pad": "z" * rng.randint(0, 300)}) for i in range(size)]
    keys = [f"st-{tag}-{i}" for i in range(size)] if rng.random() < 0.5 else None
    column = rng.choice(["payloads_external", "payloads_extended"])
    rows = call(conn, st, "store batch",
                f"INSERT INTO stress.batches ({column}, keys) VALUES (%t::jsonb[], %t::text[])"
                " RETURNING id", (array_literal(texts), None if keys is None else array_literal(keys)))
    if not rows:
        return
    rows = call(conn, st, "enqueue_batch toasted",
                f"SELECT durable_enqueue_batch(%s, {column}, keys) FROM stress.batches WHERE id = %s",
                (queue, rows[0][0]))
    if rows is not None:
        check_ids(st, "enqueue_batch toasted", rows[0][0], texts, keys, known)


def expanded_batch(conn, st, rng, queue, tag, known):
    """The arrays built element by element in PL/pgSQL: expanded arrays."""
    size = rng.randint(1, 200)
    texts = [json.dumps({"expanded": i}) for i in range(size)]
    keys = [f"ex-{tag}-{i}" for i in range(size)] if rng.random() < 0.5 else None
    rows = call(conn, st, "enqueue_batch expanded", "SELECT stress.enqueue_expanded(%s, %t::jsonb[], %t::text[])",
                (queue, array_literal(texts), None if keys is None else array_literal(keys)))
    if rows is not None:
        check_ids(st, "enqueue_batch expanded", rows[0][0], texts, keys, known)


def savepoints(conn, st, rng, queue, tag, known):
    """Batches in one transaction, one of them rolled back to a savepoint:
    only what commits is there."""
    a = [json.dumps({"sp": "a", "i": i}) for i in range(rng.randint(1, 300))]
    b = [json.dumps({"sp": "b", "i": i}) for i in range(rng.randint(1, 300))]
    commit = rng.random() < 0.8
    keep_b = rng.random() < 0.5
    try:
        with conn.transaction(force_rollback=not commit):
            ids_a = enqueue(conn, st, "enqueue_batch in a transaction", queue, a, None)
            if ids_a is None:
                raise psycopg.Rollback()
            ids_b = None
            try:
                with conn.transaction(force_rollback=not keep_b):
                    ids_b = enqueue(conn, st, "enqueue_batch in a savepoint", queue, b,
                                    [f"sp-{tag}-{i}" for i in range(len(b))])
                    if ids_b is None:
                        raise psycopg.Rollback()
            except psycopg.Error:
                ids_b = None
            call(conn, st, "enqueue_batch bad in a savepoint", "SAVEPOINT bad")
            call(conn, st, "enqueue_batch null array", "SELECT durable_enqueue_batch(%s, NULL)",
                 (queue,), expect={"22004"})
            call(conn, st, "rollback to savepoint", "ROLLBACK TO SAVEPOINT bad")
    except psycopg.Error as e:
        if e.sqlstate is None or e.sqlstate in CRASH:
            raise Crash(str(e))
        st.errors[e.sqlstate] += 1
        if e.sqlstate not in TRANSIENT:
            st.problem(f"savepoints: {e.sqlstate} {e}")
        return
    if commit:
        check_ids(st, "enqueue_batch in a transaction", ids_a, a, None, known)
        if keep_b and ids_b is not None:
            check_ids(st, "enqueue_batch in a savepoint", ids_b, b,
                      [f"sp-{tag}-{i}" for i in range(len(b))], known)


# ---- set-up and the checks at the end ----

SETUP = f"""
CREATE EXTENSION IF NOT EXISTS durable;
SELECT durable_create_queue('{QUEUES[0]}', partitions => 1);
SELECT durable_create_queue('{QUEUES[1]}', partitions => 4, max_attempts => 1000);
SELECT durable_create_queue('{CHILDREN}', partitions => 2);
SELECT durable_create_queue('{ALTERED}', deadline => '1 day', retry_capacity => 5,
                            progress_timeout => '1 hour', concurrency_limit => 2);
CREATE SCHEMA stress;
CREATE TABLE stress.batches (id bigserial PRIMARY KEY,
                             payloads_external jsonb[], payloads_extended jsonb[], keys text[]);
ALTER TABLE stress.batches ALTER payloads_external SET STORAGE EXTERNAL;
CREATE FUNCTION stress.enqueue_expanded(queue text, payloads jsonb[], keys text[])
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
    p jsonb[] := '{{}}';
    k text[] := '{{}}';
BEGIN
    FOR i IN 1 .. coalesce(array_length(payloads, 1), 0) LOOP
        p := p || payloads[i];
        k := k || keys[i];
    END LOOP;
    RETURN durable_enqueue_batch(queue, p, CASE WHEN keys IS NULL THEN NULL ELSE k END);
END
$$;
"""


def server_log_crashes():
    if not SERVER_LOG or not os.path.exists(SERVER_LOG):
        return []
    found = []
    with open(SERVER_LOG, errors="replace") as f:
        for line in f:
            if ("terminated by signal" in line or "TRAP:" in line
                    or "was terminated by exception" in line
                    or "Failed process was running" in line
                    or re.search(r"process \(PID \d+\) exited with exit code [1-9]", line)):
                found.append(line.rstrip()[:2000])
    return found


def main():
    conn = connect()
    conn.execute(SETUP)
    server = conn.execute("SELECT version()").fetchone()[0].split(",")[0]
    start = time.time()
    deadline = start + SECONDS
    procs = [multiprocessing.Process(target=client, args=(f"enqueuer{i}", SEED * 1000 + i,
                                                          deadline, enqueue_step))
             for i in range(ENQUEUERS)]
    procs += [multiprocessing.Process(target=client, args=(f"worker{i}", SEED * 1000 + 500 + i,
                                                           deadline, work_step))
              for i in range(WORKERS)]
    for p in procs:
        p.start()
    failures = []
    for p in procs:
        p.join(max(60.0, deadline - time.time() + 900))
        if p.is_alive():
            failures.append(f"a client ({p.pid}) did not stop in time")
            p.kill()
    elapsed = time.time() - start

    calls = collections.Counter()
    errors = collections.Counter()
    accepted = {}
    payloads = crashes = 0
    for name in [f"enqueuer{i}" for i in range(ENQUEUERS)] + [f"worker{i}" for i in range(WORKERS)]:
        path = os.path.join(OUT, f"{name}.json")
        if not os.path.exists(path):
            failures.append(f"{name} left no result (it died)")
            continue
        with open(path) as f:
            r = json.load(f)
        calls.update(r["calls"])
        errors.update(r["errors"])
        failures += r["problems"]
        payloads += r["payloads"]
        crashes += r["crashes"]
        for tid, key in r["accepted"]:
            if tid in accepted and accepted[tid] != key:
                failures.append(f"task {tid} accepted for key {accepted[tid]} and for {key}")
            accepted[tid] = key

    conn = reconnect()
    if conn is None:
        failures.append("the server does not answer after the run")
    else:
        # every accepted task exactly once, nothing else in the enqueuers' queues
        conn.execute("CREATE TEMP TABLE accepted (task_id bigint PRIMARY KEY)")
        with conn.cursor().copy("COPY accepted FROM STDIN") as copy:
            for tid in accepted:
                copy.write_row((tid,))
        queues = QUEUES
        rows = conn.execute("""
            WITH t AS (SELECT task_id FROM durable.live_tasks WHERE queue_name = ANY (%s)
                       UNION ALL
                       SELECT task_id FROM durable.task_history WHERE queue_name = ANY (%s)),
                 c AS (SELECT task_id, count(*) AS n FROM t GROUP BY task_id)
            SELECT (SELECT count(*) FROM accepted a LEFT JOIN c USING (task_id) WHERE c.n IS NULL),
                   (SELECT count(*) FROM c WHERE n > 1),
                   (SELECT count(*) FROM c LEFT JOIN accepted a USING (task_id) WHERE a.task_id IS NULL),
                   (SELECT count(*) FROM c)""", (queues, queues)).fetchone()
        missing, twice, unknown, stored = rows
        if missing:
            failures.append(f"{missing} accepted tasks are missing")
        if twice:
            failures.append(f"{twice} tasks are stored twice")
        if unknown:
            failures.append(f"{unknown} tasks no enqueue accepted are in the queues")
        keyed = conn.execute("""
            SELECT count(*) FROM (SELECT 1 FROM durable.task_keys WHERE queue_name = ANY (%s)
                                  GROUP BY queue_name, idempotency_key HAVING count(DISTINCT task_id) > 1) d""",
                             (queues,)).fetchone()[0]
        if keyed:
            failures.append(f"{keyed} idempotency keys name more than one task")
        verify = conn.execute("SELECT task_id, problem FROM durable_verify() LIMIT 5").fetchall()
        if verify:
            failures.append(f"durable_verify(): {verify}")
        by_state = dict(conn.execute("SELECT state, count(*) FROM durable.tasks GROUP BY 1").fetchall())
    logged = server_log_crashes()
    crashes += len([x for x in logged if "terminated by signal" in x or "TRAP:" in x
                    or "terminated by exception" in x])
    failures += [f"server log: {x}" for x in logged[:10]]

    total_calls = sum(calls.values())
    print("stress-arrays: %d calls (%d durable_enqueue_batch), %d payloads enqueued (%d tasks), "
          "%.0f s on %s (%s), %d clients; errors by SQLSTATE: %s; crashes: %d"
          % (total_calls, sum(v for k, v in calls.items() if k.startswith("enqueue_batch")),
             payloads, len(accepted), elapsed, LABEL, server, ENQUEUERS + WORKERS,
             " ".join(f"{k}={v}" for k, v in sorted(errors.items())) or "none", crashes))
    if conn is not None:
        print("stress-arrays: tasks by state: "
              + " ".join(f"{k}={v}" for k, v in sorted(by_state.items())), file=sys.stderr)
    print("stress-arrays: calls: " + ", ".join(f"{k} {v}" for k, v in sorted(calls.items())),
          file=sys.stderr)
    for f in failures[:40]:
        print(f"FAIL: {f}", file=sys.stderr)
    if failures or crashes:
        print(f"stress-arrays: FAILED ({len(failures)} problems, seed {SEED})")
        sys.exit(1)
    print(f"stress-arrays: passed (seed {SEED})")


if __name__ == "__main__":
    main()
