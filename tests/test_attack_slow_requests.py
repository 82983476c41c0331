"""Slow and header-stuffed requests against a real uvicorn on 127.0.0.1, for both HTTP faces.

uvicorn bounds the idle time between two requests and nothing after a request's first byte: a
client sending its head or its body one byte at a time (slowloris) held the connection, and the
REST request's task, as long as it liked. The servers here are started in this process with the
faces' own protocol classes, their deadlines shortened (a class attribute) so that a test waits
well under a second for what takes 20 s by default; nothing else differs.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from conftest import serve_in_thread

from coffer_memory import MemoryService
from coffer_memory_fastapi import create_app
from coffer_memory_fastapi.http_errors import EnvelopeProtocol
from coffer_memory_mcp._http_head import BoundedHead
from coffer_memory_mcp.cli import http_app
from coffer_memory_mcp.server import build_server


class QuickRest(EnvelopeProtocol):
    head_timeout = head_timeout_max = body_timeout = send_timeout = 0.5


class QuickMcp(BoundedHead):
    head_timeout = head_timeout_max = body_timeout = send_timeout = 0.5


@pytest.fixture(params=["rest", "mcp"])
def face(request: pytest.FixtureRequest, service: MemoryService) -> Iterator[tuple[str, int]]:
    if request.param == "rest":
        with serve_in_thread(create_app(service), QuickRest) as port:
            yield "/api/v1/memory_stores/global/memories", port
    else:
        with serve_in_thread(http_app(build_server(service), "127.0.0.1", None), QuickMcp) as port:
            yield "/mcp", port


def dribble(port: int, start: bytes, more: bytes, bound_s: float = 30.0) -> bytes:
    """Send ``start``, then ``more`` one byte every 50 ms, until the server answers or closes (or
    ``bound_s`` passes: then b"" comes back, the request still held open by the server)."""
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(start)
        deadline = time.monotonic() + bound_s
        for byte in more:
            if time.monotonic() > deadline:
                break
            if select.select([sock], [], [], 0.05)[0]:
                break
            try:
                sock.sendall(bytes([byte]))
            except OSError:  # closed while we were sending
                break
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                answer += chunk
    return answer


def refused(answer: bytes, status: int, code: str) -> dict[str, Any]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), answer[:300]
    assert b"connection: close" in head.lower()
    error: dict[str, Any] = json.loads(body)["error"]
    assert error["code"] == code, error
    return error


def test_a_head_sent_one_byte_at_a_time_is_cut_off(face: tuple[str, int]) -> None:
    path, port = face
    start = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
    # Before: the server took byte after byte for as long as they came, and answered nothing.
    answer = dribble(port, start, b"X-Slow: " + b"a" * 100_000)
    error = refused(answer, 408, "REQUEST_TIMEOUT")
    assert "head" in error["message"]


def test_a_connection_that_sends_nothing_is_closed(face: tuple[str, int]) -> None:
    # uvicorn times the idle time after an answer only: a connection that never sent a byte was
    # held open for ever (a few thousand of them hold every descriptor of the process).
    _, port = face
    answer = dribble(port, b"", b"")
    refused(answer, 408, "REQUEST_TIMEOUT")


def post_head(path: str) -> tuple[bytes, bytes]:
    """The head of a POST of a 10 kB JSON body to ``path``, and that body."""
    body = json.dumps({"text": "x" * 10_000}).encode()
    start = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return start, body


def test_a_body_sent_one_byte_at_a_time_is_cut_off(face: tuple[str, int]) -> None:
    path, port = face
    answer = dribble(port, *post_head(path))
    error = refused(answer, 408, "REQUEST_TIMEOUT")
    assert "body" in error["message"]


def test_a_request_sent_at_once_is_served_on_the_same_server(face: tuple[str, int]) -> None:
    path, port = face
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        time.sleep(1.5)  # longer than every deadline of the server: an idle served request is not cut
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert not answer.startswith(b"HTTP/1.1 408"), answer[:300]
    assert answer.startswith(b"HTTP/1.1 "), answer[:300]


def test_a_hundred_thousand_headers_are_refused(face: tuple[str, int]) -> None:
    # Five bytes a header: 100,000 of them fit under the 1 MiB bound on a head, and the MCP face
    # (httptools, which counts none) kept every one in memory before it answered.
    path, port = face
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode() + b"a: b\r\n" * 100_000 + b"\r\n"
    answer, cut_off = b"", False
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        try:
            sock.sendall(request)
        except OSError:
            cut_off = True
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                answer += chunk
    assert cut_off or answer.startswith(b"HTTP/1.1 400 "), answer[:300]
    if answer:
        refused(answer, 400, "INVALID_INPUT")


class CountedDeadlines(EnvelopeProtocol):
    """coffer-api's protocol, counting the deadline timers it sets."""

    set_timers: ClassVar[list[str]] = []

    def _schedule(self) -> None:
        CountedDeadlines.set_timers.append(str(self._phase))
        super()._schedule()


def read_answer(sock: socket.socket) -> bytes:
    """One whole answer on a kept-alive connection (its head and its Content-Length's body)."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_a_request_that_comes_in_one_piece_sets_no_deadline_timer(service: MemoryService) -> None:
    # A timer set for the head and another for the body, each cancelled by the same bytes, cost an
    # agent's recall more than parsing it; a request that arrives in pieces is still timed.
    CountedDeadlines.set_timers.clear()
    request = b"GET /api/v1/memory_stores HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with (
        serve_in_thread(create_app(service), CountedDeadlines) as port,
        socket.create_connection(("127.0.0.1", port), timeout=30) as sock,
    ):
        for _ in range(2):
            sock.sendall(request)
            assert read_answer(sock).startswith(b"HTTP/1.1 200 ")
            assert CountedDeadlines.set_timers == ["head"]  # the connection's, from its opening
        sock.sendall(request[:20])
        deadline = time.monotonic() + 60  # a bound on a loaded machine, not an assertion
        while len(CountedDeadlines.set_timers) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # the server read the first piece alone and timed its head
        sock.sendall(request[20:])
        assert read_answer(sock).startswith(b"HTTP/1.1 200 ")
    assert CountedDeadlines.set_timers == ["head", "head"]


@pytest.fixture(params=["rest", "mcp"])
def guarded_face(request: pytest.FixtureRequest, service: MemoryService) -> Iterator[tuple[str, int]]:
    """A face with a bearer token: a request without it is refused before its body is read."""
    if request.param == "rest":
        with serve_in_thread(create_app(service, token="t0ken"), QuickRest) as port:
            yield "/api/v1/memory_stores/global/memories", port
    else:
        with serve_in_thread(http_app(build_server(service), "127.0.0.1", "t0ken"), QuickMcp) as port:
            yield "/mcp", port


def test_a_request_answered_before_its_body_came_gets_no_second_answer(guarded_face: tuple[str, int]) -> None:
    # The 401 went out at once; when the body's deadline came, a 408 was written after it on the
    # same connection: two answers to one request, the second read as the answer to the next one.
    path, port = guarded_face
    answer = dribble(port, *post_head(path))
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:300]
    assert answer.count(b"HTTP/1.1 ") == 1, answer


def chunked_head(path: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()


def test_a_trailer_that_never_ends_is_refused_before_it_is_held(face: tuple[str, int]) -> None:
    # httptools keeps a trailer whole until it ends, and a body's deadline grows with what it
    # receives: a trailer sent fast and never ended was kept without bound, and never answered.
    path, port = face
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(chunked_head(path) + b"2\r\n{}\r\n0\r\nX-Trailer: ")
        with contextlib.suppress(OSError):  # refused and closed while still sending
            for _ in range(64):
                sock.sendall(b"a" * 65536)  # 4 MiB: more than a head may send
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                answer += chunk
    error = refused(answer, 400, "INVALID_INPUT")
    assert "trailer" in error["message"], error


async def _headers_echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app answering with the names of its request's headers, read after its body."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    body = json.dumps([name.decode() for name, _ in scope["headers"]]).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]}
    )
    await send({"type": "http.response.body", "body": body})


@pytest.mark.parametrize("protocol", [QuickRest, QuickMcp], ids=["rest", "mcp"])
def test_a_trailer_is_not_a_header_and_small_chunks_are_served(protocol: type) -> None:
    # uvicorn appended a chunked body's trailers to the request's headers while the app read the
    # body, after every check of them (an app reads If-Match, Content-Type... after the body).
    with serve_in_thread(_headers_echo, protocol) as port:
        body = b"".join(b"1\r\n" + bytes([byte]) + b"\r\n" for byte in b"[0]" * 50_000)  # 150 kB
        request = chunked_head("/").replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
        request += body + b"0\r\nX-Trailer: yes\r\nHost: evil.example\r\n\r\n"
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.sendall(request)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    names = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert "x-trailer" not in names and names.count("host") == 1, names


class _BigAnswer:
    """An ASGI app answering every request with 64 MiB, in 64 KiB pieces; ``done`` is set when its
    call returns (the answer sent, or its sends returning because the client is gone)."""

    def __init__(self) -> None:
        self.done = threading.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        try:
            piece = b"a" * 65536
            fields = [(b"content-length", str(1024 * len(piece)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": fields})
            for _ in range(1023):
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": piece})
        finally:
            self.done.set()


@pytest.mark.parametrize("protocol", [QuickRest, QuickMcp], ids=["rest", "mcp"])
def test_a_client_that_never_reads_its_answer_does_not_hold_the_request(protocol: type) -> None:
    # uvicorn waits for a full write buffer to drain with no bound: a client that asked for a large
    # answer (an export) and never read it held the connection and the request's task for ever.
    app = _BigAnswer()
    with serve_in_thread(app, protocol) as port, socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the buffer fills
        sock.settimeout(30)
        sock.connect(("127.0.0.1", port))
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        # Nothing is read meanwhile. 30 s bound a loaded machine, the deadline is 0.5 s.
        assert app.done.wait(30), "the request's task still waits for the client to read"
        received = 0
        with contextlib.suppress(OSError):  # the connection was aborted: a reset
            while chunk := sock.recv(1 << 20):
                received += len(chunk)
    assert received < 64 * 1024 * 1024, received  # cut off, not sent whole once read
