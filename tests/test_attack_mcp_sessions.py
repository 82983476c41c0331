"""Many MCP sessions over HTTP: ``coffer-mcp --transport streamable-http`` keeps at most
``MAX_SESSIONS`` at once and answers a new one past them ``503`` (the SDK's JSON-RPC error), said
in its log once a minute, not once a session.

A session outlives the connections that made it (about 40 KB each), so ``--max-connections`` does
not bound them: the SDK's own most was 10,000 (400 MB), and mcp 2.0 and 2.1, which coffer admitted,
kept every session for ever. A real server on 127.0.0.1, raw sockets.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

from served import Served
from test_mcp_handshake import initialize

from coffer_memory_mcp.cli import MAX_SESSIONS

INIT = json.dumps(initialize(1)).encode()


def _open_session(port: int) -> tuple[int, bytes]:
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(INIT)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + INIT
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), data


def test_sessions_past_the_most_are_refused_and_said_once(tmp_path: Path) -> None:
    env = {**os.environ, "COFFER_HOME": str(tmp_path / "home")}
    args = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
    with Served(args, env) as server:
        for _ in range(MAX_SESSIONS):
            status, data = _open_session(server.port)
            assert status == 200, data[:500]
        for _ in range(20):
            status, data = _open_session(server.port)
            assert status == 503, data[:500]  # the SDK's own most was 10,000
            body = json.loads(data.partition(b"\r\n\r\n")[2])
            assert body["jsonrpc"] == "2.0" and "Too many open sessions" in body["error"]["message"], body
        assert server.stderr().count("Refusing to open a new session") == 1, server.stderr()[-3000:]
