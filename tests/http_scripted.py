"""A scripted JSON HTTP server on 127.0.0.1 for provider tests (embeddings, chat completions).

``script`` replies are consumed in order, then ``default`` answers; every request is recorded
(path, lower-cased headers, parsed JSON body) so tests can assert what left the process.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""


Behaviour = Callable[[Any], Reply]


def fail(status: int, message: str = "upstream trouble", headers: dict[str, str] | None = None) -> Behaviour:
    """An OpenAI-style error reply."""
    return lambda body: Reply(status, {"error": {"message": message, "type": "server_error"}}, headers or {})


def chat_body(
    content: Any = '{"lanes": ["journal"]}',
    *,
    finish_reason: str | None = "stop",
    usage: dict[str, int] | None = None,
    refusal: str | None = None,
    model: str = "test-chat-0613",
) -> dict[str, Any]:
    """An OpenAI chat-completions response carrying ``content``."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish_reason,
            }
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def answer(content: str, finish_reason: str = "stop", **extra: Any) -> Behaviour:
    """A chat completion answering ``content``."""
    return lambda body: Reply(
        200, chat_body(content, finish_reason=finish_reason, model=body["model"], **extra)
    )


class ScriptedServer:
    """A JSON endpoint on an ephemeral loopback port."""

    def __init__(self, default: Behaviour) -> None:
        self.script: deque[Behaviour] = deque()
        self.default = default
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                reply = outer._take(
                    Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw)
                )
                if reply.delay:
                    time.sleep(reply.delay)
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client timed out and went away

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.closed = False

    def _take(self, seen: Seen) -> Reply:
        with self._lock:
            self.requests.append(seen)
            behaviour = self.script.popleft() if self.script else self.default
        return behaviour(seen.body)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.httpd.shutdown()
            self.httpd.server_close()
            self.thread.join(timeout=5)


def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback requests must not go through a proxy from the environment."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def serve(monkeypatch: pytest.MonkeyPatch, default: Behaviour) -> Iterator[ScriptedServer]:
    """Fixture body: a server that is closed after the test."""
    no_proxies(monkeypatch)
    srv = ScriptedServer(default)
    try:
        yield srv
    finally:
        srv.close()
