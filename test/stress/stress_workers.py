"""The workers of tools/stress-arrays: claims, durable_heartbeat_batch,
durable_commit_batch, failures, abandoned leases, spawns and durable_join,
durable_outbox_ack; and the other functions that take arrays
(durable_idempotency_key, durable_alter_queue's clear)."""
import json
import time

from psycopg.types.json import Jsonb

from stress_common import ALTERED, CHILDREN, QUEUES, array_literal, call


def key_parts(conn, st, rng):
    parts = ["p" * rng.choice([1, 10, 3000, 100000]) for _ in range(rng.randint(1, 5))]
    rows = call(conn, st, "idempotency_key", "SELECT durable_idempotency_key(VARIADIC %t::text[])",
                (array_literal(parts),))
    again = call(conn, st, "idempotency_key", "SELECT durable_idempotency_key(VARIADIC %t::text[])",
                 (array_literal(parts, lower=0),))
    if rows and again and rows[0][0] != again[0][0]:
        st.problem("durable_idempotency_key depends on the array's lower bound")
    call(conn, st, "idempotency_key null part", "SELECT durable_idempotency_key(VARIADIC %t::text[])",
         (array_literal(["a", None]),), expect={"22004"})
    call(conn, st, "idempotency_key no part", "SELECT durable_idempotency_key(VARIADIC '{}'::text[])",
         expect={"22023"})
    call(conn, st, "idempotency_key 2-D", "SELECT durable_idempotency_key(VARIADIC '{{a},{b}}'::text[])",
         expect={"22023"})


def alter_clear(conn, st, rng):
    good = rng.sample(["deadline", "retry_capacity", "progress_timeout",
                       "concurrency_limit", "version_timeout"], rng.randint(0, 5))
    call(conn, st, "alter_queue clear", "SELECT durable_alter_queue(%s, clear => %t::text[])",
         (ALTERED, array_literal(good, lower=rng.choice([1, 0]))))
    call(conn, st, "alter_queue clear unknown", "SELECT durable_alter_queue(%s, clear => %t::text[])",
         (ALTERED, array_literal(good + [rng.choice(["lease", "x" * 5000, None])])), expect={"22023"})


# ---- the workers ----

def work_step(conn, st, rng, state):
    """Claim a batch, renew it, and finish it one way or another."""
    name = f"stress-{st.who}"
    queue = rng.choice(QUEUES + [CHILDREN])
    abandon = rng.random() < 0.05   # to the reconciler when its lease ends
    rows = call(conn, st, "claim",
                "SELECT task_id, fence, payload FROM durable_claim(%s, %s, %s::interval, %s)",
                (queue, name, "1 second" if abandon else "5 minutes", rng.randint(1, 100)))
    if not rows:
        time.sleep(0.05)
        return
    if abandon:
        return
    heartbeat(conn, st, rng, rows)
    finish(conn, st, rng, rows)
    if rng.random() < 0.2:
        outbox(conn, st, rng, name)


def heartbeat(conn, st, rng, rows):
    ids = [r[0] for r in rows]
    fences = [r[1] for r in rows]
    # with stale fences and unknown tasks among them: NULL for those only
    stale = [rng.random() < 0.2 for _ in ids]
    sent_ids = ids + [rng.randint(1, 2**40) << 16]
    sent_fences = [f - 1 if s else f for f, s in zip(fences, stale)] + [1]
    got = call(conn, st, "heartbeat_batch",
               "SELECT task_id, lease_until FROM durable_heartbeat_batch(%b::int8[], %t::int8[])",
               (sent_ids, array_literal([str(f) for f in sent_fences], lower=rng.choice([1, 0]))))
    if got is not None:
        if [g[0] for g in got] != sent_ids:
            st.problem("heartbeat_batch returned other tasks, or out of order")
        for g, s in zip(got, stale + [True]):
            if s and g[1] is not None:
                st.problem(f"heartbeat_batch renewed task {g[0]} under a stale fence")
    which = rng.randrange(6)
    if which == 0:
        call(conn, st, "heartbeat_batch lengths", "SELECT * FROM durable_heartbeat_batch(%b::int8[], %b::int8[])",
             (ids, fences + [1]), expect={"22023"})
    elif which == 1:
        call(conn, st, "heartbeat_batch null", "SELECT * FROM durable_heartbeat_batch(%s::int8[], %s::int8[])",
             (ids, fences[:-1] + [None]), expect={"22004"})
    elif which == 2:
        call(conn, st, "heartbeat_batch 2-D", "SELECT * FROM durable_heartbeat_batch('{{1},{2}}', '{1,2}')",
             expect={"22023"})
    elif which == 3:
        call(conn, st, "heartbeat_batch empty", "SELECT * FROM durable_heartbeat_batch('{}', '{}')")


def result_of(rng):
    r = rng.random()
    if r < 0.3:
        return None
    if r < 0.9:
        return json.dumps({"ok": rng.randint(0, 100)})
    return json.dumps({"big": "".join(rng.choice("0123456789abcdef") for _ in range(rng.randint(2100, 6000)))})


def finish(conn, st, rng, rows):
    joiners = [r for r in rows if isinstance(r[2], dict) and r[2].get("i", 1) % 97 == 0
               and rng.random() < 0.5]
    for r in joiners:
        join(conn, st, rng, r)
    rest = [r for r in rows if r not in joiners]
    failing = [r for r in rest if rng.random() < 0.1]
    rest = [r for r in rest if r not in failing]
    for r in failing:
        call(conn, st, "fail", "SELECT durable_fail(%s, %s, 'transient')", (r[0], r[1]),
             allowed={"55U01", "55U04"})
    if not rest:
        return
    ids = [r[0] for r in rest]
    fences = [r[1] for r in rest]
    which = rng.randrange(8)
    if which == 0:
        call(conn, st, "commit_batch lengths", "SELECT durable_commit_batch(%b::int8[], %b::int8[])",
             (ids, fences[1:] if len(fences) > 1 else fences + [1]), expect={"22023"})
    elif which == 1:
        call(conn, st, "commit_batch repeated task", "SELECT durable_commit_batch(%b::int8[], %b::int8[])",
             (ids + ids[:1], fences + fences[:1]), expect={"22023"})
    elif which == 2:
        call(conn, st, "commit_batch null", "SELECT durable_commit_batch(%s::int8[], %s::int8[])",
             (ids, [None] + fences[1:]), expect={"22004"})
    elif which == 3:
        call(conn, st, "commit_batch results 2-D",
             "SELECT durable_commit_batch(%b::int8[], %b::int8[], array_fill('{}'::jsonb, ARRAY[%s, 1]))",
             (ids, fences, len(ids)), expect={"22023"})
    results = [result_of(rng) for _ in rest]
    if rng.random() < 0.5:
        sql = "SELECT durable_commit_batch(%b::int8[], %b::int8[], %b::jsonb[])"
        res = [None if x is None else Jsonb(json.loads(x)) for x in results]
    else:
        sql = "SELECT durable_commit_batch(%b::int8[], %b::int8[], %t::jsonb[])"
        res = array_literal(results, lower=rng.choice([1, 0, 7]))
    got = call(conn, st, "commit_batch", sql, (ids, fences, res), allowed={"55U01"})
    if got is not None and got[0][0] != len(ids):
        st.problem(f"commit_batch committed {got[0][0]} of {len(ids)}")


def join(conn, st, rng, row):
    tid, fence = row[0], row[1]
    for name in ("c1", "c2"):
        if call(conn, st, "spawn", "SELECT durable_spawn(%s, %s, %s, %s, %s)",
                (tid, fence, name, CHILDREN, Jsonb({"child": name})), allowed={"55U01"}) is None:
            return
    call(conn, st, "join null child", "SELECT * FROM durable_join(%s, %s, 'j', ARRAY['c1', NULL])",
         (tid, fence), expect={"22004"})
    # (55U03 once the join below has started: its replay with other children)
    call(conn, st, "join unknown child", "SELECT * FROM durable_join(%s, %s, 'j', ARRAY['c1', 'c9'])",
         (tid, fence), expect={"22023"}, allowed={"55U03"})
    call(conn, st, "join 2-D", "SELECT * FROM durable_join(%s, %s, 'j', '{{c1},{c2}}')",
         (tid, fence), expect={"2202E"})
    got = call(conn, st, "join", "SELECT status FROM durable_join(%s, %s, 'j', %t::text[])",
               (tid, fence, array_literal(["c2", "c1"], lower=rng.choice([1, 0]))), allowed={"55U01"})
    if got and got[0][0] == "done":
        call(conn, st, "commit", "SELECT durable_commit(%s, %s)", (tid, fence), allowed={"55U01"})


def outbox(conn, st, rng, name):
    for i in range(rng.randint(1, 5)):
        call(conn, st, "outbox_emit", "SELECT durable_outbox_emit(%s, 'stress', %s)",
             (QUEUES[0], Jsonb({"m": i})))
    rows = call(conn, st, "outbox_claim",
                "SELECT message_id, fence FROM durable_outbox_claim(%s, %s, 20)", (QUEUES[0], name))
    if not rows:
        return
    ids = [r[0] for r in rows]
    fence = rows[0][1]
    call(conn, st, "outbox_ack null", "SELECT durable_outbox_ack(%s, %s::int8[], %s)",
         (QUEUES[0], ids + [None], fence), expect={"22004"})
    call(conn, st, "outbox_ack stale", "SELECT durable_outbox_ack(%s, %b::int8[], %s)",
         (QUEUES[0], ids, fence - 1), expect={"55U01"})
    got = call(conn, st, "outbox_ack", "SELECT durable_outbox_ack(%s, %t::int8[], %s)",
               (QUEUES[0], array_literal([str(i) for i in ids], lower=rng.choice([1, 0])), fence))
    if got is not None and got[0][0] != len(ids):
        st.problem(f"outbox_ack acked {got[0][0]} of {len(ids)}")
    call(conn, st, "outbox_ack 2-D", "SELECT durable_outbox_ack(%s, %s::int8[], %s)",
         (QUEUES[0], "{{%d}}" % ids[0], fence), expect={"2202E"})
    call(conn, st, "outbox_ack empty", "SELECT durable_outbox_ack(%s, '{}', %s)", (QUEUES[0], fence))
