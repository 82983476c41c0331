"""A request body larger than any valid request, to a real ``coffer-api`` and a real ``coffer-mcp``
over HTTP on 127.0.0.1: declared too large, or chunked and never ending.

Both servers read a body whole into memory before looking at it (the REST guard to check it for
lone surrogates, the MCP SDK's transport to parse it): gigabytes were taken. The answer is now
``413 REQUEST_TOO_LARGE`` while the body is still coming, and the server's peak memory does not
follow what the client sends.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from served import Served

from coffer_memory.vocabulary import MAX_HANDOFF_CHARS, MAX_REQUEST_BODY_BYTES

OFFERED = 96 * 1024 * 1024
"""What a client offers at most: far past the bound, and far past what a server may take in."""
GROWTH = 32 * 1024 * 1024
"""How much a server's peak memory may grow meanwhile (interpreter noise, one bounded body)."""
_CHUNK = b"a" * 65536
JSON = {"Content-Type": "application/json"}


@contextlib.contextmanager
def _server(args: list[str], home: Path) -> Iterator[tuple[int, int]]:
    """A server started with ``args`` (on a port of its own) serving ``home``: (port, pid)."""
    with Served(args, {**os.environ, "COFFER_HOME": str(home)}) as served:
        yield served.port, served.proc.pid


@pytest.fixture(params=["coffer-api", "coffer-mcp"])
def server(request: pytest.FixtureRequest, tmp_home: Path) -> Iterator[tuple[str, int, int]]:
    """(the path a body goes to, port, pid) of a real server on 127.0.0.1."""
    bindir = Path(sys.executable).parent
    if request.param == "coffer-api":
        args, path = (
            [str(bindir / "coffer-api"), "--log-level", "warning"],
            "/api/v1/memory_stores/global/facts",
        )
    else:
        args = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
        path = "/mcp"
    with _server(args, tmp_home) as (port, pid):
        yield path, port, pid


def peak_rss(pid: int) -> int:
    """The process's peak resident memory, in bytes (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def offer(port: int, head: bytes, chunked: bool) -> bytes:
    """Send ``head``, then body bytes up to ``OFFERED`` (from a thread) while reading the answer."""
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)

        def feed() -> None:
            with contextlib.suppress(OSError):  # refused and closed while still sending
                for _ in range(OFFERED // len(_CHUNK)):
                    sock.sendall(b"10000\r\n" + _CHUNK + b"\r\n" if chunked else _CHUNK)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        # Before the fix no answer came (the server was still taking the body): the recv timed out.
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                answer += chunk
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # ends a feeder still blocked in sendall
        feeder.join(timeout=30)
    return answer


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_past_any_valid_request_is_413_and_not_held(
    server: tuple[str, int, int], framing: str
) -> None:
    path, port, pid = server
    length = "Transfer-Encoding: chunked" if framing == "chunked" else f"Content-Length: {10 * 1024**3}"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n{length}\r\n\r\n"
    ).encode()
    before = peak_rss(pid)
    answer = offer(port, head, chunked=framing == "chunked")
    grown = peak_rss(pid) - before
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 413"), answer[:300]
    fields, _, body = rest.partition(b"\r\n\r\n")
    assert b"connection: close" in fields.lower()
    error = json.loads(body)["error"]
    assert error["code"] == "REQUEST_TOO_LARGE" and set(error) == {"code", "message", "details"}
    assert grown < GROWTH, f"the server's peak memory grew by {grown} bytes"


def test_the_largest_valid_request_fits_the_bound(tmp_home: Path, repo: Path) -> None:
    # The bound is no new limit on what coffer takes: the longest handoff, every character an
    # astral one JSON writes as an escape pair, goes through coffer-mcp and is saved.
    text = "\U0001f600" * MAX_HANDOFF_CHARS
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    args = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
    with (
        _server(args, tmp_home) as (port, _),
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http,
    ):
        opened = http.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers=accept
        )
        session = {**accept, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        params = {"name": "coffer__handoff", "arguments": {"cwd": str(repo), "text": text}}
        # json.dumps escapes every non-ASCII character: the largest body this text can make.
        body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}).encode()
        assert 12 * MAX_HANDOFF_CHARS < len(body) <= MAX_REQUEST_BODY_BYTES
        called = http.post("/mcp", content=body, headers=session)
    assert called.status_code == 200, called.text[:300]
    [data] = [line.removeprefix("data: ") for line in called.text.splitlines() if line.startswith("data: ")]
    result = json.loads(data)["result"]
    assert not result.get("isError"), data[:300]


def test_the_import_upload_has_its_own_larger_bound(svc: Any) -> None:
    # The import takes an export as base64 (up to 64 MiB of it): a 2 MiB upload is read and judged
    # as an export, while the same size is past the bound of every other route.
    from fastapi.testclient import TestClient

    from coffer_memory_fastapi import create_app

    body = json.dumps({"content_base64": "A" * (2 * 1024 * 1024)})
    with TestClient(create_app(svc)) as client:
        fact = client.post("/api/v1/memory_stores/global/facts", content=body, headers=JSON)
        upload = client.post("/api/v1/import", content=body, headers=JSON)
    assert fact.status_code == 413 and fact.json()["error"]["details"] == {"limit": MAX_REQUEST_BODY_BYTES}
    assert upload.status_code != 413 and upload.json()["error"]["code"] != "REQUEST_TOO_LARGE", upload.text
