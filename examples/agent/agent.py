#!/usr/bin/env python3
"""An agent loop on durable: a model decides, tools act, a person approves.

Each run is a task of queue agent_runs.  Every model call is a step whose
result (the model's decision) is recorded and replayed, never asked again
once recorded; every tool is a step of its class: the order lookup reads
only (pure), the ticket system is idempotent by key, payments are
queryable by key, e-mail is unsafe (sent, it cannot be taken back or
looked up: in doubt, a person decides).  A refund waits for a person's
approval (an event, with a timeout).  Each model call reserves from the
run's own spend limit and its tenant's budget before it is made and is
charged the tokens it used; the model's tokens go to the run's stream
"tokens" as they come, which `watch` prints live from another process.
The worker runs the model and prompt versions a run was pinned to.

    agent.py setup   --db DSN                       # queue and tenant budget
    agent.py worker  --db DSN --service URL         # work on runs
    agent.py start   --db DSN --order A-100 [--tenant acme] [--limit 400]
    agent.py watch   --db DSN TASK_ID [--after N]   # print a run's tokens live
    agent.py approve --db DSN TASK_ID [--deny]

The services it calls are examples/agent/services.py; crash_test.py kills
the worker at every step boundary and checks what the world saw.
"""
import argparse
import asyncio
import json
import logging
import sys
import urllib.request
from http.client import HTTPConnection
from urllib.parse import urlparse

try:
    import pgdurable  # first: without psycopg it says how to install it
    import psycopg
    from psycopg.types.json import Jsonb
except ImportError as e:
    sys.exit(f"{e}: pip install clients/python" if e.name == "pgdurable" else str(e))

QUEUE = "agent_runs"
# what this worker runs; a run is pinned to them at its first claim
VERSIONS = {"model": "m-1", "prompt": "refund-agent-2", "tools": "t-1"}
TOOL_CLASSES = {"lookup_order": "pure", "open_ticket": "idempotent",
                "refund": "queryable", "send_email": "unsafe"}
MAX_TURNS = 8
RESERVE = 60  # tokens a model call may use at most: reserved before it


class Services:
    def __init__(self, url):
        self.url = url.rstrip("/")

    def request(self, method, path, body=None, key=None):
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Idempotency-Key"] = key
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=10) as response:
            return json.loads(response.read())

    def ask_model(self, task, turn, messages):
        """The model's next action; its tokens go to the run's stream as
        they arrive."""
        url = urlparse(self.url)
        conn = HTTPConnection(url.hostname, url.port, timeout=30)
        conn.request("POST", "/model", json.dumps({
            "prompt_id": f"{task.id}:model-{turn}", "order": task.payload["order"],
            "model": task.versions.get("model"), "prompt": task.versions.get("prompt"),
            "messages": messages}), {"Content-Type": "application/json"})
        response = conn.getresponse()
        text = []
        try:
            while True:
                line = response.readline()
                if not line:
                    raise ConnectionError("the model's answer ended early")
                part = json.loads(line)
                if "token" in part:
                    task.stream("tokens", {"turn": turn, "i": len(text), "token": part["token"]})
                    text.append(part["token"])
                else:
                    return {"action": part["action"], "usage": part["usage"], "text": "".join(text)}
        finally:
            conn.close()

    def call_tool(self, task, tool, args, key):
        if tool == "lookup_order":
            return self.request("GET", f"/orders/{args['order']}")
        if tool == "open_ticket":
            return self.request("POST", "/tickets", args, key)
        if tool == "refund":
            return self.request("POST", "/payments", args, key)
        if tool == "send_email":
            order = self.request("GET", f"/orders/{args['order']}")
            return self.request("POST", "/emails", {"to": order["customer"], "body": args["body"],
                                                    "task": task.id})
        raise pgdurable.Failed(f"no tool {tool}", "permanent")

    def lookup(self, step, key):
        """A queryable step's outcome, by its key: the refund, or None."""
        found = self.request("GET", f"/payments?key={key}")
        return found[0] if found else None


def handler(services):
    def handle(task):
        order = task.payload["order"]
        messages = [{"role": "user", "content": f"My order {order} is late. What can you do?"}]
        for turn in range(1, MAX_TURNS + 1):
            try:
                answer = task.step(f"model-{turn}", "pure",
                                   lambda key: services.ask_model(task, turn, messages),
                                   request={"turn": turn, **task.versions},
                                   reserve=RESERVE, spent=lambda r: r["usage"])
            except pgdurable.BudgetExhausted as e:
                return {"stopped": "budget", "turns": turn - 1, "detail": str(e)}
            action = answer["action"]
            if action["type"] == "final":
                task.close_stream("tokens")
                return {"answer": action["answer"], "turns": turn}
            messages.append({"role": "assistant", "tool_call": action})
            messages.append({"role": "tool", "name": action["tool"],
                             "content": run_tool(task, turn, action)})
        raise pgdurable.Failed(f"no answer after {MAX_TURNS} turns", "permanent")

    def run_tool(task, turn, action):
        tool, args = action["tool"], action["args"]
        if tool == "refund":
            approval = task.await_event(f"approval-{turn}", f"approval:{task.id}", timeout="1 hour")
            if approval.status != "received" or not (approval.value or {}).get("approved"):
                return {"refund": "not approved"}
        return task.step(f"tool-{turn}-{tool}", TOOL_CLASSES[tool],
                         lambda key: services.call_tool(task, tool, args, key),
                         request=args, effect_id=lambda r: r.get("id"))

    return handle


def setup(conn):
    conn.execute("SELECT durable_create_queue(%s, lease => '30 seconds', retry_base => 1, retry_cap => 2)"
                 " WHERE NOT EXISTS (SELECT FROM durable.queues WHERE queue_name = %s)", (QUEUE, QUEUE))
    conn.execute("SELECT durable_create_budget('tenant-acme', 100000, '1 day')"
                 " WHERE NOT EXISTS (SELECT FROM durable.budgets WHERE name = 'tenant-acme')")


def start(conn, order, tenant, limit):
    (task_id,) = conn.execute(
        "SELECT durable_enqueue(%s, %s, budgets => ARRAY[%s], spend_limit => %s)",
        (QUEUE, Jsonb({"order": order, "tenant": tenant}), f"tenant-{tenant}", limit)).fetchone()
    return task_id


async def watch(dsn, task_id, after):
    """Print a run's tokens as they come, each model call on a line."""
    turn = None
    async for chunk in pgdurable.read_stream(dsn, task_id, "tokens", after=after):
        token = chunk.chunk
        if token["i"] == 0:  # a model call begins (again, if a crash cut it short)
            again = " (asked again: its answer was never recorded)" if token["turn"] == turn else ""
            print(("\n" if turn is not None else "") + f"[model-{token['turn']}{again}] ", end="")
            turn = token["turn"]
        print(token["token"], end="", flush=True)
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["setup", "worker", "start", "watch", "approve"])
    parser.add_argument("task_id", nargs="?", type=int)
    parser.add_argument("--db", required=True)
    parser.add_argument("--service", default="http://127.0.0.1:8765")
    parser.add_argument("--name")
    parser.add_argument("--order", default="A-100")
    parser.add_argument("--tenant", default="acme")
    parser.add_argument("--limit", type=float, default=400)
    parser.add_argument("--after", type=int, default=0)
    parser.add_argument("--deny", action="store_true")
    parser.add_argument("--idle-exit", type=float)
    args = parser.parse_args()
    if args.command == "worker":
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
        services = Services(args.service)
        pgdurable.Worker(args.db, QUEUE, handler(services), name=args.name, lookup=services.lookup,
                         versions=VERSIONS, idle_exit=args.idle_exit, poll=0.2).run()
        return
    if args.command == "watch":
        asyncio.run(watch(args.db, args.task_id, args.after))
        return
    with psycopg.connect(args.db, autocommit=True) as conn:
        if args.command == "setup":
            setup(conn)
        elif args.command == "start":
            print(start(conn, args.order, args.tenant, args.limit))
        elif args.command == "approve":
            conn.execute("SELECT durable_emit(%s, %s, %s)",
                         (QUEUE, f"approval:{args.task_id}", Jsonb({"approved": not args.deny})))


if __name__ == "__main__":
    main()
