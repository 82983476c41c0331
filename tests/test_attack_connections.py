"""Many connections to either face: each process holds at most ``--max-connections`` (default
``DEFAULT_MAX_CONNECTIONS``); a new connection past them takes the place of the oldest idle one
(that sent nothing, or waits between requests), else it is answered ``503 TOO_MANY_CONNECTIONS``
with the envelope, ``Retry-After`` and ``Connection: close`` (``coffer_memory._http_conns``).

Nothing bounded them: a client could open thousands of idle connections, each a descriptor the
server held (until the head deadline, 20 s, and again the next moment), and starve the agents and
the store's own files. Real servers on 127.0.0.1, raw sockets.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from served import Served
from test_http_faces_agree import INIT

from coffer_memory._http_conns import (
    DEFAULT_MAX_CONNECTIONS,
    IDLE_GRACE_S,
    LINGER_S,
    RETRY_AFTER_S,
    SLOW_AFTER_S,
)

LIMIT = 4
WARNING = "a new one is answered 503"


class Face:
    """A real server of one face with ``LIMIT`` connections; ``request()`` is one it serves (200)."""

    def __init__(self, name: str, server: Served) -> None:
        self.name, self.server, self.port = name, server, server.port

    def request(self, close: bool = True) -> bytes:
        last = ["Connection: close"] if close else []
        if self.name == "rest":
            lines = ["GET /api/v1/memory_stores HTTP/1.1", f"Host: 127.0.0.1:{self.port}", *last]
            return "\r\n".join([*lines, "", ""]).encode()
        lines = [
            "POST /mcp HTTP/1.1",
            f"Host: 127.0.0.1:{self.port}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"Content-Length: {len(INIT)}",
            *last,
        ]
        return "\r\n".join([*lines, "", ""]).encode() + INIT

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=60)

    def busy(self) -> socket.socket:
        """A connection that has sent the first line of ``request()``: not idle (its head is coming)."""
        sock = self.connect()
        sock.sendall(self.request().split(b"\r\n", 1)[0] + b"\r\n")
        return sock

    def finish(self, sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
        """The rest of ``request()`` on a ``busy()`` connection, and its answer."""
        return answer(sock, self.request().split(b"\r\n", 1)[1])


def _server(name: str, home: Path, args: list[str], env: dict[str, str] | None = None) -> Served:
    environ = {**os.environ, "COFFER_HOME": str(home), **(env or {})}
    if name == "rest":
        command = [str(Path(sys.executable).parent / "coffer-api"), "--log-level", "warning"]
    else:
        command = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
    return Served([*command, *args], environ)


@pytest.fixture(scope="module", params=["rest", "mcp"])
def face(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Face]:
    home = tmp_path_factory.mktemp(f"connections-{request.param}") / "home"
    with _server(request.param, home, ["--max-connections", str(LIMIT)]) as server:
        yield Face(request.param, server)


def answer(sock: socket.socket, request: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` (if any), read to the end: the status, the headers, the body."""
    if request is not None:
        sock.sendall(request)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), fields, body


def one_answer(sock: socket.socket) -> bytes:
    """Read one whole answer of a kept-alive connection (by its length, or to its last chunk)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)\r\ncontent-length: (\d+)", head)
    while (len(body) < int(length.group(1))) if length else not body.endswith(b"0\r\n\r\n"):
        body += sock.recv(65536)
    return head


def served_again(face: Face, deadline_s: float = 20.0) -> int:
    """The status of a fresh request once the server holds fewer than ``LIMIT`` again."""
    end = time.monotonic() + deadline_s
    while True:
        with face.connect() as sock:
            status = answer(sock, face.request())[0]
        if status != 503 or time.monotonic() > end:
            return status
        time.sleep(0.1)


def held_by_server(face: Face, socks: list[socket.socket], bound_s: float = 120.0) -> None:
    """Wait until the server process holds a descriptor for each of ``socks`` (it accepted them:
    its ``/proc/net/tcp`` row, by the client's port, names an inode among its descriptors'). A
    connection the kernel completed may wait in the listen queue under load, and the server
    counts a connection's age (idle, slow) from its accept: a sleep from the client's connect
    was too short once a loaded server accepted late. A bound for a hung server, not a timing."""
    ports = {sock.getsockname()[1] for sock in socks}
    end = time.monotonic() + bound_s
    while True:
        inodes = {}
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = (int(a.split(":")[1], 16) for a in fields[1:3])
            if local == face.port and remote in ports:
                inodes[remote] = fields[9]
        held = set()
        for fd in Path(f"/proc/{face.server.proc.pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                held.add(os.readlink(fd))
        missing = [port for port in ports if f"socket:[{inodes.get(port)}]" not in held]
        if not missing:
            return
        assert time.monotonic() < end, f"the server accepted none of ports {missing}"
        time.sleep(0.05)


def assert_turned_away(status: int, fields: dict[str, str], body: bytes, limit: int) -> None:
    assert status == 503, (status, body[:300])
    assert fields["retry-after"] == str(RETRY_AFTER_S) and fields["connection"] == "close", fields
    assert fields["x-content-type-options"] == "nosniff", fields  # as every other answer
    error = json.loads(body)["error"]
    assert error["code"] == "TOO_MANY_CONNECTIONS" and error["details"] == {"limit": limit}, error


def test_a_connection_past_the_limit_is_turned_away_and_held_ones_are_served(face: Face) -> None:
    assert served_again(face) == 200
    with ExitStack() as stack:
        held = [stack.enter_context(face.busy()) for _ in range(LIMIT)]  # each sending a request
        # Accepted in the order they came: this one after the held ones, whatever the load.
        with face.connect() as extra:
            assert_turned_away(*answer(extra, face.request()), LIMIT)
        # A client that sends nothing is answered too, and the connection ends by itself.
        with face.connect() as quiet:
            assert_turned_away(*answer(quiet), LIMIT)
        # The held connections are served as before (uvicorn's limit_concurrency refused them too).
        status, _, body = face.finish(held[0])
        assert status == 200, body[:300]
    assert served_again(face) == 200  # a slot freed is taken again


def test_an_idle_connection_gives_its_place_to_a_new_one(face: Face) -> None:
    # Idle connections held every slot (until their head deadline, 20 s, and the next ones after):
    # the agents got 503s. An idle one, the oldest, now makes room, as its deadline would have.
    assert served_again(face) == 200
    with ExitStack() as stack:
        kept = stack.enter_context(face.connect())
        kept.sendall(face.request(close=False))  # served, then idle between requests
        assert one_answer(kept).startswith(b"HTTP/1.1 200 ")
        idle = [stack.enter_context(face.connect()) for _ in range(LIMIT - 1)]  # never send a byte
        held_by_server(face, idle)
        time.sleep(IDLE_GRACE_S + 0.2)  # a connection that has sent nothing yet is not idle at once
        with face.connect() as new:
            status, _, body = answer(new, face.request())
            assert status == 200, body[:300]
        assert kept.recv(65536) == b"", "the oldest idle connection is closed, unanswered"
        stack.enter_context(face.busy())  # every slot taken again: 3 idle, 1 busy
        with face.connect() as new:
            assert answer(new, face.request())[0] == 200
        assert idle[0].recv(65536) == b""  # then the next oldest
    assert served_again(face) == 200


def test_thousands_of_idle_connections_hold_no_descriptor_past_the_limit(face: Face) -> None:
    if not Path(f"/proc/{face.server.proc.pid}/fd").is_dir():
        pytest.skip("counts the server's descriptors in /proc")
    assert served_again(face) == 200

    def descriptors() -> int:
        return len(os.listdir(f"/proc/{face.server.proc.pid}/fd"))

    time.sleep(LINGER_S + 0.2)  # no connection turned away by an earlier test lingers
    before = descriptors()
    with ExitStack() as stack:
        idle = [stack.enter_context(face.connect()) for _ in range(300)]
        end = time.monotonic() + 120  # a bound on a loaded machine, not a timing
        while descriptors() > before + LIMIT + 5 and time.monotonic() < end:
            time.sleep(0.2)
        # Before, the server held all 300 (until each one's head deadline, 20 s).
        assert descriptors() <= before + LIMIT + 5, (before, descriptors())
        time.sleep(IDLE_GRACE_S + 0.2)
        assert served_again(face) == 200  # an idle one gives its place
        assert idle[0].recv(65536) == b""  # the oldest
    assert served_again(face) == 200


def test_a_flood_of_new_connections_lingers_no_more_than_may_be_held(face: Face) -> None:
    # A turned-away connection is answered and kept for up to a second (so that closing does not
    # reset the answer away): a flood of them held a descriptor each for that second.
    if not Path(f"/proc/{face.server.proc.pid}/fd").is_dir():
        pytest.skip("counts the server's descriptors in /proc")
    assert served_again(face) == 200
    fds = Path(f"/proc/{face.server.proc.pid}/fd")
    said = len(face.server.stderr())
    with ExitStack() as stack:
        busy = [
            stack.enter_context(face.busy()) for _ in range(LIMIT)
        ]  # every slot held by a request under way
        held_by_server(face, busy)  # counted in ``before``: a loaded server may accept them late
        before = len(os.listdir(fds))
        flood = [stack.enter_context(face.connect()) for _ in range(300)]
        # Each one answered (503, then end of stream) or reset: the server got to every one, and
        # holds no descriptor for one it has not got to yet (asyncio accepts many at once, which a
        # loaded machine delays). An answered one lingers up to LINGER_S from its answer: the
        # last ones still would now.
        answered = sum(turned_away_or_reset(sock) for sock in flood)
        least = min(len(os.listdir(fds)) for _ in range(30))
    # At most LIMIT lingering, a few on their way.
    assert least <= before + LIMIT + 5, (before, least, answered)
    assert answered >= 1, answered  # the first ones are answered (more once those closed)
    assert served_again(face) == 200
    # Said at most once for the flood (at most once a minute), not once a connection turned away;
    # this module's earlier tests may have said it within the minute.
    assert face.server.stderr()[said:].count(WARNING) <= 1, face.server.stderr()[-2000:]
    assert face.server.stderr().count(WARNING) >= 1, face.server.stderr()[-2000:]


def turned_away_or_reset(sock: socket.socket) -> bool:
    """Read ``sock`` to its end: True when it was answered 503 (a lingering one), False when the
    server reset it unanswered."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        return False
    assert data.startswith(b"HTTP/1.1 503 ") or not data, data[:300]
    return bool(data)


@pytest.mark.parametrize("name", ["rest", "mcp"])
def test_the_limit_comes_from_the_environment_and_defaults_to_100(name: str, tmp_path: Path) -> None:
    env_name = "COFFER_API_MAX_CONNECTIONS" if name == "rest" else "COFFER_MCP_MAX_CONNECTIONS"
    with _server(name, tmp_path / "home", [], {env_name: "2"}) as server:
        served = Face(name, server)
        with served.busy(), served.busy(), served.connect() as extra:
            assert_turned_away(*answer(extra, served.request()), 2)
    with _server(name, tmp_path / "home", []) as server:  # the default
        served = Face(name, server)
        with ExitStack() as stack:
            for _ in range(DEFAULT_MAX_CONNECTIONS):
                stack.enter_context(served.busy())
            with served.connect() as extra:
                assert_turned_away(*answer(extra, served.request()), DEFAULT_MAX_CONNECTIONS)


@pytest.mark.parametrize("name", ["rest", "mcp"])
# "²" is a digit to str.isdigit and none to int(): the variable's was a raw traceback (review25).
@pytest.mark.parametrize("value", ["0", "many", "-3", "\u00b2"])
def test_a_bad_limit_is_one_line_and_status_2(name: str, value: str, tmp_path: Path) -> None:
    import subprocess

    env_name = "COFFER_API_MAX_CONNECTIONS" if name == "rest" else "COFFER_MCP_MAX_CONNECTIONS"
    if name == "rest":
        command = [str(Path(sys.executable).parent / "coffer-api")]
    else:
        command = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
    env = {**os.environ, "COFFER_HOME": str(tmp_path / "home")}
    for args, extra in (([f"--max-connections={value}"], {}), ([], {env_name: value})):
        done = subprocess.run(
            [*command, *args], env={**env, **extra}, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, (args, extra, done.stderr[-2000:])
        assert "Traceback" not in done.stderr and "not a number of connections" in done.stderr, done.stderr


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_requests_sent_ahead_of_their_answers_are_not_all_queued(face: Face) -> None:
    # uvicorn parsed and queued every pipelined request it received, and read on after each
    # answer: 1.66 MB of small GETs on one connection, answers unread, grew the process by 42 MB.
    if not Path(f"/proc/{face.server.proc.pid}/status").is_file():
        pytest.skip("reads the server's memory in /proc")
    assert served_again(face) == 200
    if face.name == "rest":
        one = (
            f"GET /api/v1/memory_stores/global/recall?query=x HTTP/1.1\r\nHost: 127.0.0.1:{face.port}\r\n\r\n"
        )
    else:  # refused by the SDK (no session): an answer as cheap as it gets
        one = f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{face.port}\r\nAccept: text/event-stream\r\n\r\n"
    with face.connect() as sock:  # the first recall loads what every later one uses
        answer(sock, one.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n").encode())
    before = _rss_mb(face.server.proc.pid)
    with ExitStack() as stack:
        for _ in range(3):
            sock = stack.enter_context(socket.socket())
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # answers are not read
            sock.connect(("127.0.0.1", face.port))
            sock.setblocking(False)
            sent, data = 0, one.encode() * 20_000
            end = time.monotonic() + 5
            while sent < len(data) and time.monotonic() < end:  # what the kernel takes in 5 s
                try:
                    sent += sock.send(data[sent : sent + 65536])
                except BlockingIOError:
                    time.sleep(0.05)
        time.sleep(1)
        grown = _rss_mb(face.server.proc.pid) - before
    assert grown < 20, f"the server grew by {grown:.0f} MB"
    assert served_again(face) == 200


def test_pipelined_requests_are_all_answered_in_order(face: Face) -> None:
    # Parsed a few at a time now: every one is still answered, in order, when the client reads.
    assert served_again(face) == 200
    count = 300
    request = face.request(close=False)
    with face.connect() as sock:
        sock.sendall(request * (count - 1) + face.request(close=True))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", data)
    assert statuses == [b"200"] * count, (len(statuses), set(statuses))


def test_requests_that_are_not_http_are_logged_once_a_minute_not_once_each(face: Face) -> None:
    # uvicorn logged "Invalid HTTP request received." for each one: 500 of them, 500 lines.
    for _ in range(200):
        with face.connect() as sock:
            sock.sendall(b"\x00\x01 nonsense\r\n\r\n")
            status, fields, body = answer(sock)
            assert status == 400 and json.loads(body)["error"]["code"] == "INVALID_INPUT", body[:300]
            assert fields["x-content-type-options"] == "nosniff", fields  # the protocol's answers had none
    assert served_again(face) == 200
    assert face.server.stderr().count("Invalid HTTP request received.") == 1, face.server.stderr()[-3000:]


def test_requests_sent_slowly_give_their_places_to_a_new_connection(face: Face) -> None:
    # A body sent at the least rate that earns more time (500 bytes a second) is not cut for as
    # long as it lasts: 1 MiB of it held its connection for over half an hour, and LIMIT of them
    # every connection (503 TOO_MANY_CONNECTIONS for everyone). At the bound, a request still
    # arriving after SLOW_AFTER_S now gives its place (408), the slowest first.
    import threading

    assert served_again(face) == 200
    path = "/api/v1/memory_stores/global/facts" if face.name == "rest" else "/mcp"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{face.port}\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Length: 1000000\r\n\r\n"
    ).encode()
    stop = threading.Event()
    with ExitStack() as stack:
        slow = [stack.enter_context(face.connect()) for _ in range(LIMIT)]
        for sock in slow:
            sock.sendall(head + b"{")
        held_by_server(face, slow)  # their time counts from the server's accept

        def trickle() -> None:
            rate = {sock: 100 * (i + 2) for i, sock in enumerate(slow)}  # bytes each 0.1 s: slow[0] slowest
            while not stop.wait(0.1):
                for sock in slow:
                    with contextlib.suppress(OSError):
                        sock.sendall(b" " * rate[sock])

        sender = threading.Thread(target=trickle, daemon=True)
        sender.start()
        try:
            time.sleep(SLOW_AFTER_S + 1)
            with face.connect() as new:
                status, _, body = answer(new, face.request())
            assert status == 200, body[:300]  # was 503
        finally:
            stop.set()
            sender.join()
        slow[0].settimeout(10)
        assert slow[0].recv(65536).startswith(b"HTTP/1.1 408 "), "the slowest sender"
    assert served_again(face) == 200
