"""A real ``tessera serve`` for the tests, and the small servers around it.

The service is the repository's own CLI (``packages/cli/dist/bin.js``, built by ``npm run
build``; ``TESSERA_CLI`` names another), run by ``node`` from a fresh data directory that
``tessera init`` provisions. ``init`` mints one issuer token; the agent principals are added to
its principals file by token digest, as docs/operations.md says an operator does.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tessera_client import TesseraClient, a2ui_function_capability, verify_webhook

REPO = Path(__file__).resolve().parents[3]
CLI = Path(os.environ.get("TESSERA_CLI", REPO / "packages" / "cli" / "dist" / "bin.js"))
NODE = os.environ.get("TESSERA_NODE", "node")

CATALOG_ID = "https://tessera.dev/catalogs/python-client-tests"
CATALOG: dict[str, Any] = {
    "catalogId": CATALOG_ID,
    "functions": {
        "quote": {
            "type": "object",
            "description": "Simulated tool: prices an order.",
            "returnType": "object",
            "allowedCallers": "agentOnly",
            "properties": {
                "call": {"const": "quote"},
                "args": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "quantity": {"type": "integer", "minimum": 1},
                    },
                    "required": ["sku", "quantity"],
                    "additionalProperties": False,
                },
            },
            "required": ["call", "args"],
        }
    },
}


def quote_call(function_call_id: str, quantity: int) -> dict[str, Any]:
    """An A2UI v1.0 ``callRendererFunction`` message for the catalog's one function."""
    return {
        "version": "v1.0",
        "callRendererFunction": {
            "functionCallId": function_call_id,
            "callFunction": {
                "call": "quote",
                "catalogId": CATALOG_ID,
                "args": {"sku": "tile-7", "quantity": quantity},
            },
        },
    }


def skip_reason() -> str | None:
    """Why the service cannot run here, or None."""
    if shutil.which(NODE) is None:
        return f"{NODE} is not on PATH"
    if not CLI.is_file():
        return f"{CLI} is missing: run npm run build first"
    return None


def write_private(path: Path, value: Any) -> None:
    """A JSON file only its owner reads: principals, webhooks and A2UI files hold secrets."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(value, out, indent=2)
    os.chmod(path, 0o600)


@dataclass
class Receiver:
    """A local HTTP endpoint that verifies the service's signature before it reads the body."""

    secret: str
    answer: Callable[[Any], Any]
    received: list[Any] = field(default_factory=list)
    rejected: int = 0
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_port}/"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if not verify_webhook(receiver.secret, self.headers, body):
                    receiver.rejected += 1
                    self.send_response(401)
                    self.end_headers()
                    return
                payload = json.loads(body)
                receiver.received.append(payload)
                out = json.dumps(receiver.answer(payload)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@dataclass(frozen=True)
class Agent:
    token: str
    actor: str
    owner: str
    session: str


class Service:
    """``tessera init`` + ``tessera serve --port 0`` with webhooks and A2UI configured."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="tessera-py-"))
        self.data = self.root / "data"
        self.webhook = Receiver(secrets.token_hex(16), lambda p: {"ok": True, "echo": p["payload"]})
        self.function = Receiver(
            secrets.token_hex(16),
            lambda c: {"value": {"sku": c["args"]["sku"], "total": c["args"]["quantity"] * 3}},
        )
        self.agents: dict[str, Agent] = {}
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.issuer_token = ""
        self._spare = [f"recipient-{n:02d}" for n in range(40)]

    def start(self) -> Service:
        made = subprocess.run(
            [NODE, str(CLI), "init", str(self.data), "--json"],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.issuer_token = json.loads(made.stdout)["issuerToken"]
        principals_file = self.data / "principals.json"
        principals = json.loads(principals_file.read_text())
        for name, owner in (("asker", "alice"), ("other", "oscar"), ("stranger", "sam")):
            agent = Agent(f"tsk_{secrets.token_urlsafe(24)}", name, owner, f"session-{name}")
            self.agents[name] = agent
            principals["principals"].append(
                {
                    "tokenSha256": hashlib.sha256(agent.token.encode()).hexdigest(),
                    "namespaceId": "default",
                    "actor": agent.actor,
                    "authority": "host",
                    "owner": agent.owner,
                    "session": agent.session,
                }
            )
        write_private(principals_file, principals)
        self.webhook.start()
        self.function.start()
        webhooks = self.root / "webhooks.json"
        # bob, and recipients a test can hold a ticket of its own for (fresh_recipient).
        endpoint = {"url": self.webhook.url, "secret": self.webhook.secret}
        names = ["bob", *self._spare]
        write_private(webhooks, {"recipients": {name: endpoint for name in names}})
        a2ui = self.root / "a2ui.json"
        write_private(
            a2ui,
            {
                "catalogs": [CATALOG],
                "functionEndpoint": {"url": self.function.url, "secret": self.function.secret},
            },
        )
        self.process = subprocess.Popen(
            [NODE, str(CLI), "serve", "--data", str(self.data), "--port", "0", "--json",
             "--webhooks", str(webhooks), "--a2ui", str(a2ui)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.url = wait_listening(self.process)
        # A2UI calls are acts the kernel decides: asker and other may call the catalog's
        # functions; stranger holds no grant, so its calls are refused by policy.
        issuer = TesseraClient(self.url, self.issuer_token)
        for name in ("asker", "other"):
            issuer.issue_grant(name, [a2ui_function_capability(CATALOG_ID)])
        return self

    def fresh_recipient(self) -> str:
        """A webhook recipient no test has used: its tickets are the caller's alone."""
        return self._spare.pop()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.communicate()
        self.webhook.stop()
        self.function.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def wait_listening(process: subprocess.Popen[str]) -> str:
    """The URL from serve's ``{"event":"listening"}`` line (its log lines come first)."""
    assert process.stdout is not None
    for line in process.stdout:
        if '"event":"listening"' in line:
            url: str = json.loads(line)["url"]
            # Keep draining the pipe so the service's log lines never block it.
            threading.Thread(target=lambda: [None for _ in process.stdout or []], daemon=True).start()
            return url
    stderr = process.stderr.read() if process.stderr else ""
    raise RuntimeError(f"tessera serve exited before listening: {stderr.strip()[:2000]}")


class Proxy:
    """A TCP proxy in front of the service that misbehaves on cue, once per scripted action.

    Each new connection takes the next action: ``"forward"`` relays the exchange; ``"drop"``
    forwards the request, lets the service answer, and closes the client's connection without
    the answer (a response lost on the way back); ``"cut"`` forwards it too, but passes on only
    the answer's head and the first half of its body before closing (a service or proxy that
    died mid-answer); ``(status, body)`` answers that itself without reaching the service. When
    the script is used up, every connection is forwarded.
    """

    def __init__(self, upstream: str, script: list[Any]) -> None:
        host, port = upstream.removeprefix("http://").rstrip("/").split(":")
        self.upstream = (host, int(port))
        self.script = list(script)
        self.connections = 0
        self.forwarded = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                action = self.script.pop(0) if self.script else "forward"
            threading.Thread(target=self._serve, args=(client, action), daemon=True).start()

    def _serve(self, client: socket.socket, action: Any) -> None:
        with client:
            request = read_http_message(client)
            if isinstance(action, tuple):
                status, body = action
                data = json.dumps(body).encode()
                client.sendall(
                    b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                    b"connection: close\r\n\r\n%s" % (status, len(data), data)
                )
                return
            with socket.create_connection(self.upstream) as upstream:
                upstream.sendall(request)
                answer = read_http_message(upstream)
                with self._lock:
                    self.forwarded += 1
            if action == "drop":
                client.shutdown(socket.SHUT_RDWR)
                return
            if action == "cut":
                head, _, body = answer.partition(b"\r\n\r\n")
                client.sendall(head + b"\r\n\r\n" + body[: len(body) // 2])
                client.shutdown(socket.SHUT_RDWR)
                return
            client.sendall(answer)


def read_http_message(sock: socket.socket) -> bytes:
    """One HTTP/1.1 message (head and a Content-Length body) read from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return head + b"\r\n\r\n" + rest


class RawServer:
    """A local TCP listener that runs ``handler(connection)`` for each connection, in a thread.

    For answers no real service gives on cue: a body that is not its route's shape, an answer
    trickled a byte at a time, a 413 sent before the request was read. ``requests`` keeps what
    ``read_request`` read; ``connections`` counts the connections accepted.
    """

    def __init__(self, handler: Callable[[RawServer, socket.socket], None]) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()

    def read_request(self, connection: socket.socket) -> bytes:
        request = read_http_message(connection)
        with self._lock:
            self.requests.append(request)
        return request

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            try:
                self.handler(self, connection)
            except OSError:
                pass  # the client went away (a timeout it enforced, a test that is over)


def raw_answer(status: int, body: bytes, extra_headers: bytes = b"") -> bytes:
    """One whole HTTP/1.1 answer with ``body`` as it is (not re-encoded)."""
    return (
        b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"connection: close\r\n%s\r\n%s" % (status, len(body), extra_headers, body)
    )


def canned(status: int, body: bytes) -> Callable[[RawServer, socket.socket], None]:
    """A handler that reads the request and answers ``body`` byte for byte."""

    def handle(server: RawServer, connection: socket.socket) -> None:
        server.read_request(connection)
        connection.sendall(raw_answer(status, body))

    return handle
