#!/usr/bin/env python3
"""The world the agent example acts on, in one local HTTP service that
counts everything done to it:

- a model: POST /model answers a conversation with the next tool call or a
  final answer, decided only by the conversation (the same prompt gets the
  same answer), streamed a token per line; it records every time each
  prompt was asked, with what conversation and model version;
- an order lookup (GET /orders/ID): reads only;
- a ticket system (POST /tickets): idempotent, one ticket per
  Idempotency-Key;
- payments (POST /payments, GET /payments?key=K): one refund per key, and
  queryable by it;
- e-mail (POST /emails): sends every time it is called, as a mail server
  does;
- GET /stats: every count, for the crash test's verdicts.

    python3 examples/agent/services.py --port 8765
"""
import argparse
import hashlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

ORDERS = {
    "A-100": {"order": "A-100", "customer": "ada@example.com", "total": 120, "late_days": 9},
    "B-200": {"order": "B-200", "customer": "bob@example.com", "total": 80, "late_days": 4},
}

# the model's script: what it does after how many tool results
PLAN = ["lookup_order", "open_ticket", "refund", "send_email"]


class World:
    def __init__(self, token_ms):
        self.lock = threading.Lock()
        self.token_ms = token_ms
        self.asks = {}  # prompt id -> every ask: when, with what conversation, model, prompt
        self.tickets = {}  # key -> {"id", "summary", "calls"}
        self.payments = {}  # key -> {"id", "amount", "created"}
        self.emails = []  # every e-mail sent

    def decide(self, request):
        """The next action: a tool call, or the final answer."""
        messages = request["messages"]
        order = request["order"]
        done = [m for m in messages if m["role"] == "tool"]
        if len(done) < len(PLAN):
            tool = PLAN[len(done)]
            args = {
                "lookup_order": {"order": order},
                "open_ticket": {"summary": f"order {order} is late"},
                "refund": {"order": order, "amount": 15},
                "send_email": {"order": order, "body": f"Your order {order} is on its way; "
                                                      "we refunded the shipping."},
            }[tool]
            text = f"I will call {tool} with {json.dumps(args, sort_keys=True)}."
            return {"type": "tool_call", "tool": tool, "args": args}, text
        text = f"Order {order} was late; a ticket is open, the refund is decided and the customer told."
        return {"type": "final", "answer": text}, text

    def ask(self, request):
        prompt = request["prompt_id"]
        digest = hashlib.sha256(json.dumps(request["messages"], sort_keys=True).encode()).hexdigest()
        with self.lock:
            self.asks.setdefault(prompt, []).append({"at": time.time(), "conversation": digest,
                                                     "model": request.get("model"),
                                                     "prompt": request.get("prompt")})
        action, text = self.decide(request)
        tokens = [w + " " for w in text.split(" ")]
        return action, tokens


def make_handler(world):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def body(self):
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"{}")

        def reply(self, status, value):
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            url = urlparse(self.path)
            if url.path.startswith("/orders/"):
                order = ORDERS.get(url.path.rsplit("/", 1)[1])
                return self.reply(200 if order else 404, order or {"error": "no such order"})
            if url.path == "/payments":
                key = parse_qs(url.query).get("key", [""])[0]
                with world.lock:
                    found = world.payments.get(key)
                return self.reply(200, [found] if found else [])
            if url.path == "/stats":
                with world.lock:
                    return self.reply(200, {
                        "asks": world.asks,
                        "tickets": world.tickets, "payments": world.payments,
                        "emails": world.emails})
            self.reply(404, {"error": "not found"})

        def do_POST(self):
            url = urlparse(self.path)
            request = self.body()
            key = self.headers.get("Idempotency-Key")
            if url.path == "/model":
                action, tokens = world.ask(request)
                # newline-delimited JSON: a token a line, then the action
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for token in tokens:
                    self.chunk({"token": token})
                    time.sleep(world.token_ms / 1000)
                self.chunk({"action": action, "usage": 10 + len(tokens)})
                self.wfile.write(b"0\r\n\r\n")
                return
            with world.lock:
                if url.path == "/tickets":
                    # a key's first call opens the ticket, the others find it
                    ticket = world.tickets.setdefault(key, {"id": f"T-{len(world.tickets) + 1}",
                                                            "summary": request["summary"], "calls": 0})
                    ticket["calls"] += 1
                    return self.reply(200, {"id": ticket["id"]})
                if url.path == "/payments":
                    payment = world.payments.get(key)
                    if payment is None:
                        payment = world.payments[key] = {"id": f"P-{len(world.payments) + 1}",
                                                         "amount": request["amount"], "key": key}
                    return self.reply(200, payment)
                if url.path == "/emails":
                    world.emails.append({"to": request["to"], "body": request["body"],
                                         "task": request["task"], "at": time.time()})
                    return self.reply(200, {"id": f"M-{len(world.emails)}"})
            self.reply(404, {"error": "not found"})

        def chunk(self, value):
            data = json.dumps(value).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # a worker killed in the middle of a call: what a service sees daily
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-ms", type=int, default=5, help="the model's pause between tokens")
    args = parser.parse_args()
    server = Server(("127.0.0.1", args.port), make_handler(World(args.token_ms)))
    print(f"listening on 127.0.0.1:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
