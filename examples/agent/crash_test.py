#!/usr/bin/env python3
"""The agent example's crash test: runs of examples/agent/agent.py, the
worker killed (SIGKILL, by pgdurable's DURABLE_CRASH_AT) at every step
boundary of a run, one boundary a run, then started again until the run
is done or waits for a person; then what the services saw, as verdicts:

- no tool effect twice: one ticket and one refund per run at most, each
  run's e-mail sent once at most;
- no decided prompt asked again: a model call whose answer was recorded is
  never asked after it (a call cut short before its answer was recorded
  may be, with the same conversation);
- the budget never passed: each run spent at most its limit, the tenant's
  budget was charged exactly what the recorded answers used, and a run
  with a small limit is stopped by it;
- the unsafe e-mail in review when in doubt: a crash between its start
  and its receipt leaves the run in review, the e-mail not sent again;
- the versions pinned: every run pinned to the worker's model and prompt,
  every model call made with them;
- the stream read live: a second process printed a run's tokens as they
  came, and a reader resumes from any position.

    python3 examples/agent/crash_test.py --db DSN

The database needs durable; the test makes queue agent_runs and budget
tenant-acme.  Exit status 0 when every verdict holds.
"""
import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import psycopg
from psycopg.types.json import Jsonb

import pgdurable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import agent  # noqa: E402

# every step boundary of a run, the model's calls each (five of them)
CRASHES = (
    [f"{point}:pure@{n}" for n in range(1, 6) for point in ("before_call", "after_call")]
    + [f"{point}:{cls}" for cls in ("idempotent", "queryable", "unsafe")
       for point in ("before_call", "after_call", "after_receipt")]
    + ["before_wait:await", "after_wait:await", "before_commit", "after_commit"])
IN_DOUBT = {"before_call:unsafe", "after_call:unsafe"}  # the e-mail may have gone
LIMIT = 400  # a run's own spend limit
SMALL_LIMIT = 100  # enough for three model calls' reserves, not four
DONE = ("completed", "failed", "cancelled", "needs_review")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Test:
    def __init__(self, db):
        self.db = db
        port = free_port()
        self.service_url = f"http://127.0.0.1:{port}"
        self.services = subprocess.Popen([sys.executable, os.path.join(HERE, "services.py"),
                                          "--port", str(port)], stdout=subprocess.PIPE)
        self.services.stdout.readline()  # listening
        self.conn = psycopg.connect(db, autocommit=True)
        agent.setup(self.conn)
        self.runs = {}  # task id -> crash point (None: a clean run)
        self.tenant_before = self.tenant()

    def tenant(self):
        """The tenant budget's amount, reserved and spent."""
        return self.conn.execute("SELECT amount, reserved, spent FROM durable.budgets"
                                 " WHERE name = 'tenant-acme'").fetchone()

    def close(self):
        self.services.terminate()
        self.services.wait()
        self.conn.close()

    def worker(self, crash):
        env = {k: v for k, v in os.environ.items() if k != "DURABLE_CRASH_AT"}
        if crash:
            env["DURABLE_CRASH_AT"] = crash
        return subprocess.Popen([sys.executable, os.path.join(HERE, "agent.py"), "worker",
                                 "--db", self.db, "--service", self.service_url,
                                 "--name", f"agent-{crash or 'clean'}"], env=env)

    def state(self, task_id):
        return self.conn.execute("SELECT state FROM durable.tasks WHERE task_id = %s",
                                 (task_id,)).fetchone()[0]

    def drive(self, task_id, crash):
        """Work on the run until it is done or in review: approve its
        refund when it waits, and after each crash end the dead worker's
        lease (as an operator, or its lease running out, would) and start
        a worker again.  Returns (state, whether the worker was killed)."""
        worker, killed = self.worker(crash), False
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                state = self.state(task_id)
                if state in DONE:
                    if crash and not killed:  # after_commit: it dies as the run is done
                        try:
                            worker.wait(timeout=5)
                        except subprocess.TimeoutExpired:
                            pass
                        killed = worker.returncode == -signal.SIGKILL
                    return state, killed
                if state == "waiting":
                    self.conn.execute("SELECT durable_emit(%s, %s, %s)",
                                      (agent.QUEUE, f"approval:{task_id}",
                                       Jsonb({"approved": True})))
                if worker.poll() is not None:
                    killed |= worker.returncode == -signal.SIGKILL
                    if state == "running":
                        self.conn.execute("SELECT durable_expire_lease(%s, 'killed by the crash test')",
                                          (task_id,))
                    worker = self.worker(None)
                time.sleep(0.05)
            raise TimeoutError(f"run {task_id} ({crash}) is still {self.state(task_id)}")
        finally:
            worker.terminate()
            worker.wait()

    def run(self, crash, limit=LIMIT, watch=False):
        task_id = agent.start(self.conn, "A-100", "acme", limit)
        self.runs[task_id] = crash
        watcher = None
        if watch:  # a second process prints the run's tokens as they come
            watcher = subprocess.Popen([sys.executable, os.path.join(HERE, "agent.py"), "watch",
                                        str(task_id), "--db", self.db],
                                       stdout=subprocess.PIPE, text=True)
        state, killed = self.drive(task_id, crash)
        output = watcher.communicate(timeout=30)[0] if watcher else None
        print(f"  run {task_id:>20}  crash at {crash or '(none)':<26} "
              f"{'killed' if killed else 'no crash':<8}  {state}", flush=True)
        return task_id, state, killed, output

    def stats(self):
        with urllib.request.urlopen(self.service_url + "/stats") as r:
            return json.loads(r.read())

    def steps(self, task_ids):
        rows = self.conn.execute(
            "SELECT task_id, step, state::text, updated_at, result, idempotency_key"
            " FROM durable.steps WHERE task_id = ANY (%s)", (list(task_ids),)).fetchall()
        return rows


def verdict(name, holds, detail):
    print(f"verdict: {name}: {'yes' if holds else 'NO'} ({detail})", flush=True)
    return holds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    args = parser.parse_args()
    test = Test(args.db)
    ok = True
    try:
        print(f"{len(CRASHES) + 2} agent runs, the worker killed at a step boundary in each:")
        watched, watched_state, _, printed = test.run(None, watch=True)
        results = {crash: test.run(crash) for crash in CRASHES}
        small, small_state, _, _ = test.run(None, limit=SMALL_LIMIT)
        stats = test.stats()
        steps = test.steps(test.runs)
        tasks = {r[0]: r[1:] for r in test.conn.execute(
            "SELECT task_id, state, result, versions FROM durable.tasks WHERE task_id = ANY (%s)",
            (list(test.runs),)).fetchall()}

        # no tool effect twice
        keys = {key: task for task, step, _, _, _, key in steps}
        tickets_by_run, payments_by_run, emails_by_run = {}, {}, {}
        for key in stats["tickets"]:
            tickets_by_run[keys.get(key)] = tickets_by_run.get(keys.get(key), 0) + 1
        for key in stats["payments"]:
            payments_by_run[keys.get(key)] = payments_by_run.get(keys.get(key), 0) + 1
        for email in stats["emails"]:
            emails_by_run[email["task"]] = emails_by_run.get(email["task"], 0) + 1
        calls = sum(t["calls"] for t in stats["tickets"].values())
        ok &= verdict("no tool effect twice",
                      all(n == 1 for n in tickets_by_run.values()) and None not in tickets_by_run
                      and all(n == 1 for n in payments_by_run.values()) and None not in payments_by_run
                      and all(n == 1 for n in emails_by_run.values()),
                      f"{len(stats['tickets'])} tickets from {calls} calls, {len(stats['payments'])}"
                      f" refunds, {len(stats['emails'])} e-mails, for {len(test.runs)} runs; none twice")

        # no decided prompt asked again
        decided = {f"{task}:{step}": at.timestamp() for task, step, state, at, _, _ in steps
                   if step.startswith("model-") and state == "committed"}
        after = [p for p, at in decided.items() if any(a["at"] > at for a in stats["asks"].get(p, []))]
        again = [p for p, asks in stats["asks"].items() if len(asks) > 1]
        same = all(len({a["conversation"] for a in asks}) == 1 for asks in stats["asks"].values())
        ok &= verdict("no decided prompt asked again", not after and same,
                      f"{len(stats['asks'])} prompts asked, {len(decided)} answers recorded, none asked"
                      f" after; {len(again)} cut short by a crash before their answer was recorded"
                      f" were asked again, with the same conversation")

        # the budget never passed
        used = {}
        for task, step, state, _, result, _ in steps:
            if step.startswith("model-") and state == "committed":
                used[task] = used.get(task, 0) + result["usage"]
        amount, reserved, spent = test.tenant()
        charged = spent - test.tenant_before[2]  # by these runs
        limits = {t: SMALL_LIMIT if t == small else LIMIT for t in test.runs}
        stopped = (tasks[small][1] or {}).get("stopped") == "budget"
        ok &= verdict("the budget never passed",
                      all(used.get(t, 0) <= limits[t] for t in test.runs)
                      and charged == sum(used.values()) and reserved == 0
                      and spent <= amount and stopped and small_state == "completed",
                      f"most a run spent {max(used.values())} of {LIMIT}; the tenant was charged"
                      f" {charged}, what the recorded answers used ({sum(used.values())}), with"
                      f" {reserved} still reserved; the run limited to {SMALL_LIMIT} stopped after"
                      f" {(tasks[small][1] or {}).get('turns')} model calls, spending {used.get(small, 0)}")

        # the unsafe e-mail in review when in doubt
        reviewed = {c: r for c, r in results.items() if r[1] == "needs_review"}
        ok &= verdict("the unsafe e-mail in review when in doubt",
                      set(reviewed) == IN_DOUBT and all(r[2] for r in results.values())
                      and all(emails_by_run.get(r[0], 0) <= 1 for r in reviewed.values())
                      and all(r[1] == "completed" for c, r in results.items() if c not in IN_DOUBT),
                      f"{len(results)} crashes; the {len(reviewed)} between the e-mail's start and"
                      f" its receipt left their runs in review with"
                      f" {sum(emails_by_run.get(r[0], 0) for r in reviewed.values())} e-mails sent"
                      f" (one for the crash after the call, none before), every other run completed")

        # the versions pinned
        asks = [a for asks in stats["asks"].values() for a in asks]
        ok &= verdict("the model and prompt versions pinned",
                      all(t[2] == agent.VERSIONS for t in tasks.values())
                      and all(a["model"] == agent.VERSIONS["model"]
                              and a["prompt"] == agent.VERSIONS["prompt"] for a in asks),
                      f"{len(tasks)} runs pinned to {json.dumps(agent.VERSIONS, sort_keys=True)},"
                      f" {len(asks)} model calls made with them")

        # the stream: printed live by a second process, resumed from any position
        texts = [r[4]["text"] for r in sorted(
            (s for s in steps if s[0] == watched and s[1].startswith("model-")),
            key=lambda s: int(s[1].split("-")[1]))]
        whole = asyncio.run(read_all(args.db, watched, 0))
        tail = asyncio.run(read_all(args.db, watched, len(whole) // 2))
        lines = [line for line in printed.splitlines() if line]
        ok &= verdict("the stream read live",
                      watched_state == "completed" and len(lines) == len(texts)
                      and all(line.endswith(text.rstrip()) or line.rstrip().endswith(text.rstrip())
                              for line, text in zip(lines, texts))
                      and tail == whole[len(whole) // 2:],
                      f"a second process printed {len(whole)} tokens of {len(texts)} model calls as"
                      f" they came; a reader after position {len(whole) // 2} read the rest")
        if printed:
            print("the watched run, as the second process printed it:")
            print("\n".join("  " + line for line in lines))
    finally:
        test.close()
    return 0 if ok else 1


async def read_all(db, task_id, after):
    return [c async for c in pgdurable.read_stream(db, task_id, "tokens", after=after)]


if __name__ == "__main__":
    sys.exit(main())
