"""Many MCP sessions over HTTP: ``coffer-mcp --transport streamable-http`` keeps at most
``--max-sessions`` (default ``MAX_SESSIONS``) at once. Past them a new session takes the place of
an idle one: one never used past its opening, else the one idle longest (session 28; the fewest
requests before): a flood of sessions ends its own, not an agent's; only when every session has a request in flight (an open event
stream counts) is a new one answered ``503`` (the SDK's JSON-RPC error). Each is said in the log
once a minute, not once a session.

A session outlives the connections that made it (about 40 KB each), so ``--max-connections`` does
not bound them: the SDK's own most was 10,000 (400 MB), and mcp 2.0 and 2.1, which coffer admitted,
kept every session for ever. Then one client filled the 1,000 in seconds, and every agent after it
was turned away for as long as it kept them full. A real server on 127.0.0.1, raw sockets.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from served import Served
from test_mcp_handshake import INITIALIZED, initialize, request

from coffer_memory_mcp.cli import MAX_SESSIONS

ARGS = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
ENDED = "ended an idle session"
REFUSED = "Refusing to open a new session"


def _post(port: int, message: dict[str, object], session: str | None = None) -> tuple[int, str, bytes]:
    """``message`` POSTed (in ``session``, if any): the status, the session id answered, the body."""
    body = json.dumps(message).encode()
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    if session is not None:
        lines += [f"Mcp-Session-Id: {session}", "Mcp-Protocol-Version: 2025-06-18"]
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall("\r\n".join([*lines, "", ""]).encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    found = re.search(rb"(?i)\r\nmcp-session-id: (\S+)", head)
    return int(head.split()[1]), found.group(1).decode() if found else "", rest


def _open(port: int) -> tuple[int, str, bytes]:
    return _post(port, initialize(1))


def _agent(port: int) -> str:
    """A session as an agent opens and uses it: initialize, initialized, a tools/list."""
    status, session, body = _open(port)
    assert status == 200 and session, body[:500]
    assert _post(port, INITIALIZED, session)[0] == 202
    assert _tools(port, session) == 200
    return session


def _tools(port: int, session: str) -> int:
    status, _, body = _post(port, request(2, "tools/list"), session)
    assert status != 200 or b"coffer__recall" in body, body[:500]
    return status


def _stream(port: int, session: str) -> socket.socket:
    """The session's event stream (GET), held open: a request in flight as long as it is."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(
        (
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
            f"Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-06-18\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 200 "), head
    return sock


def _logged(server: Served, needle: str, deadline_s: float = 10.0) -> str:
    end = time.monotonic() + deadline_s
    while needle not in server.stderr() and time.monotonic() < end:
        time.sleep(0.05)
    return server.stderr()


def test_a_flood_of_sessions_ends_its_own_not_an_agents(tmp_path: Path) -> None:
    env = {**os.environ, "COFFER_HOME": str(tmp_path / "home")}
    with Served(ARGS, env) as server:
        agent = _agent(server.port)
        flood = []
        for _ in range(MAX_SESSIONS + 100):  # one client, as fast as it goes: ~3 s filled them
            status, session, body = _open(server.port)
            assert status == 200, body[:500]  # was 503 past MAX_SESSIONS, for the agents too
            flood.append(session)
        # The agent's session, older than every flooding one, is still served.
        assert _tools(server.port, agent) == 200
        # The flood's oldest sessions gave their places; its latest are kept.
        assert _tools(server.port, flood[0]) == 404
        assert _tools(server.port, flood[-1]) == 200
        assert _logged(server, ENDED).count(ENDED) == 1, server.stderr()[-3000:]  # once a minute


def test_a_session_is_refused_only_when_every_one_is_busy(tmp_path: Path) -> None:
    env = {**os.environ, "COFFER_HOME": str(tmp_path / "home"), "COFFER_MCP_MAX_SESSIONS": "3"}
    with Served(ARGS, env) as server, ExitStack() as stack:
        sessions = [_agent(server.port) for _ in range(3)]
        streams = [stack.enter_context(_stream(server.port, s)) for s in sessions]
        for _ in range(5):
            status, _, body = _open(server.port)
            assert status == 503, body[:500]
            data = body.decode(errors="replace")
            assert "Too many open sessions" in data, data
        assert _logged(server, REFUSED).count(REFUSED) == 1, server.stderr()[-3000:]
        streams[1].close()  # that session waits for nothing now: it gives its place
        end = time.monotonic() + 20
        while (status := _open(server.port)[0]) == 503 and time.monotonic() < end:
            time.sleep(0.1)
        assert status == 200
        assert _tools(server.port, sessions[1]) == 404
        assert _tools(server.port, sessions[0]) == 200 and _tools(server.port, sessions[2]) == 200


def test_the_most_sessions_comes_from_the_option_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    import subprocess

    env = {**os.environ, "COFFER_HOME": str(tmp_path / "home")}
    with Served([*ARGS, "--max-sessions", "2"], env) as server, ExitStack() as stack:
        for session in (_agent(server.port), _agent(server.port)):
            stack.enter_context(_stream(server.port, session))
        assert _open(server.port)[0] == 503
    # "²" is a digit to str.isdigit and none to int(): the variable's was a raw traceback (review25).
    bad = [(["--max-sessions", v], {}) for v in ("0", "\u00b2")]
    for args, extra in (*bad, *(([], {"COFFER_MCP_MAX_SESSIONS": v}) for v in ("many", "\u00b2"))):
        done = subprocess.run(
            [*ARGS, *args, "--port", "0"], env={**env, **extra}, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, (args, extra, done.stderr[-2000:])
        assert "Traceback" not in done.stderr and "not a number of sessions" in done.stderr, done.stderr


def test_silent_event_streams_give_their_connections_to_an_agent(tmp_path: Path) -> None:
    # Every connection held by an event stream (GET /mcp) of a session opened for it: a stream is
    # a request in flight, never idle, so each new connection was 503 TOO_MANY_CONNECTIONS (the
    # agents' POSTs too) for as long as the streams stayed open. At the bound the stream of the
    # session that has done least now gives its place; an agent's, whose session did more, stays.
    env = {**os.environ, "COFFER_HOME": str(tmp_path / "home")}
    with Served([*ARGS, "--max-connections", "4"], env) as server, ExitStack() as stack:
        agent = _agent(server.port)
        kept = stack.enter_context(_stream(server.port, agent))
        flood = [_open(server.port)[1] for _ in range(3)]  # opened, then only streamed
        streams = [stack.enter_context(_stream(server.port, s)) for s in flood]
        assert _tools(server.port, agent) == 200  # a new connection, past 4 streams: was 503
        ended = [s for s in streams if _ended(s)]
        assert len(ended) == 1 and ended[0] is streams[0], "the oldest of the flood's streams"
        assert not _ended(kept), "the agent's stream stays"
        assert _tools(server.port, agent) == 200 and not _ended(kept)


def _ended(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (an event stream: what it sent so far is read and dropped)."""
    sock.settimeout(2)
    try:
        while chunk := sock.recv(65536):
            del chunk
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
