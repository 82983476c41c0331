"""A PostgreSQL server that is down, or a host that answers nothing, met by a running index and
by one that starts: the first request is told without waiting for the pool, the next ones at
once, and the first request after the server is back is served. Real servers stopped and started,
a port nobody listens on, and a socket that takes connections and never answers."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_pg_faults
from pg_server import PgServer
from test_pg_faults import _pg_ctl, member, texts

from coffer_memory import IndexUnavailable

psycopg = pytest.importorskip(
    "psycopg", reason="PostgreSQL tests need psycopg: pip install 'coffer-memory[postgresql]'"
)
from coffer_memory._index.pg.reach import POOL_TIMEOUT  # noqa: E402  (imports psycopg)

own_server = test_pg_faults.own_server  # a server of the test's own, to stop and start (a fixture)


class Blackhole:
    """A port that takes TCP connections and never answers a byte (a server stopped mid-start, a
    firewall that lets the handshake through): libpq waits its connect timeout on it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.taken: list[socket.socket] = []
        self._thread = threading.Thread(target=self._take, daemon=True)
        self._thread.start()

    def _take(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.taken.append(conn)  # held open, never read nor answered

    def close(self) -> None:
        self.sock.close()
        for conn in self.taken:
            conn.close()


@pytest.fixture
def blackhole() -> Iterator[Blackhole]:
    hole = Blackhole()
    yield hole
    hole.close()


@pytest.mark.timeout(300)
def test_a_host_that_answers_nothing_costs_the_first_request_of_a_start_only(
    blackhole: Blackhole, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each request of a service whose index could not start tried to start it again, and each
    waited the connect timeout on a host that answers nothing: now the first does, and the next
    ones are told at once that the server is down (a probe asks again meanwhile)."""
    url = f"postgresql://coffer@127.0.0.1:{blackhole.port}/nowhere?connect_timeout=2"
    with member(tmp_home, url, monkeypatch) as svc:
        with pytest.raises(IndexUnavailable, match="timeout") as first:
            texts(svc, "anything")
        assert "down since" not in str(first.value)
        taken = len(blackhole.taken)
        for _ in range(3):
            with pytest.raises(IndexUnavailable, match=r"timeout.*\(down since .* UTC; asked again"):
                texts(svc, "anything")
        # The probe's connections alone (at most one a round, each waiting its connect timeout):
        # the three requests made none of their own, where each made one and waited 2 s on it.
        assert len(blackhole.taken) - taken <= 2


@pytest.mark.timeout(300)
def test_a_start_against_a_stopped_server_is_told_at_once_and_served_once_it_starts(
    own_server: PgServer,
    tmp_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A port nobody listens on: the first request of the start is refused, the next ones are
    told at once that the server is down, and the first request after the server started is
    served (the request wakes the probe, which finds it up)."""
    url = own_server.url()
    with member(tmp_home, url, monkeypatch) as svc:
        svc.remember("the weir floods in spring", store="global")
    _pg_ctl(own_server, "-m", "fast", "stop")
    with member(tmp_home, url, monkeypatch) as svc:
        with pytest.raises(IndexUnavailable, match="refused") as first:
            texts(svc, "weir")
        assert "down since" not in str(first.value)
        for _ in range(3):
            with pytest.raises(IndexUnavailable, match=r"refused.*\(down since"):
                texts(svc, "weir")
            with pytest.raises(IndexUnavailable, match=r"refused.*\(down since"):
                svc.remember("written while the server is down", store="global")
        _pg_ctl(own_server, "start")
        assert texts(svc, "weir") == ["the weir floods in spring"]


@pytest.mark.timeout(300)
def test_a_stop_is_told_without_the_pools_wait_and_the_start_is_served_at_once(
    own_server: PgServer,
    tmp_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pool's connections found broken and dropped, a request waited the pool's 10 s for one
    it could not make before the server was said to be down; and once the server was back,
    requests were told it was down until the probe's next round (up to a second). Now the
    request waits ``POOL_FIRST_WAIT``, asks the server directly and is told; and the first
    request after the start is served."""
    url = own_server.url()
    with member(tmp_home, url, monkeypatch) as svc:
        svc.remember("the sluice gate sticks", store="global")
        assert texts(svc, "sluice") == ["the sluice gate sticks"]
        _pg_ctl(own_server, "-m", "fast", "stop")
        pool = svc.index._shared.backend.pool  # type: ignore[union-attr]
        pool.check()  # the idle connections found broken and dropped: the pool has none to give
        waited = pool.get_stats().get("requests_wait_ms", 0)
        with pytest.raises(IndexUnavailable, match="refused"):
            texts(svc, "sluice")
        # Which path ran, not a timing: the pool's own timeout makes a request that waits for it
        # wait all of POOL_TIMEOUT; the new path gives up its wait after POOL_FIRST_WAIT.
        assert pool.get_stats().get("requests_wait_ms", 0) - waited < POOL_TIMEOUT * 1000
        with pytest.raises(IndexUnavailable, match="down since"):
            texts(svc, "sluice")
        _pg_ctl(own_server, "start")
        assert texts(svc, "sluice") == ["the sluice gate sticks"]  # no wait for the probe's round
        svc.remember("the sluice gate was oiled", store="global")
        assert len(texts(svc, "sluice")) == 2


class SlowDoor:
    """A TCP door to a real server that a loaded machine makes slow: each connection is passed
    on only after ``delay`` seconds; ``shut`` refuses every connection (the server down, its
    sessions broken), ``open`` lets them in again on the same port."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.delay = 0.0
        self.port = 0
        self._socks: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.open()

    def open(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.05)  # accept() wakes to see the door shut
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._take, args=(listener,), daemon=True).start()

    def _take(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed
                return
            client.settimeout(None)
            threading.Thread(target=self._pass, args=(client,), daemon=True).start()

    def _pass(self, client: socket.socket) -> None:
        self._socks.append(client)
        threading.Event().wait(self.delay)
        try:
            server = socket.create_connection(("127.0.0.1", self.upstream))
        except OSError:
            client.close()
            return
        self._socks.append(server)
        for src, dst in ((client, server), (server, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def shut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._socks.clear()


@pytest.mark.timeout(300)
def test_the_first_request_after_the_start_is_served_when_connecting_is_slow(
    own_server: PgServer, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a loaded machine (load 16 on 2 cores) a connection to a server that is up took longer
    than the request's wait for the probe round it woke (``PROMPT_SECONDS``), so the first request
    after the server's start was told "down since". A server that refused answers: the request
    now waits for that round, which the probe's connect timeout bounds. The door makes every
    connection take 0.7 s, as that load did (a real server behind it; no timing is asserted)."""
    door = SlowDoor(own_server.port)
    url = own_server.url().replace(f":{own_server.port}/", f":{door.port}/")
    try:
        with member(tmp_home, url, monkeypatch) as svc:
            svc.remember("the lock keeper rings twice", store="global")
            door.shut()  # the server stops: its sessions break, connections are refused
            pool = svc.index._shared.backend.pool  # type: ignore[union-attr]
            pool.check()
            with pytest.raises(IndexUnavailable, match="refused"):
                texts(svc, "keeper")
            with pytest.raises(IndexUnavailable, match=r"refused.*down since"):
                texts(svc, "keeper")
            # The server is back, on a machine where connecting takes 0.7 s: longer than the old
            # wait (PROMPT_SECONDS), well within the probe's 2 s connect timeout.
            door.delay = 0.7
            door.open()
            assert texts(svc, "keeper") == ["the lock keeper rings twice"]
    finally:
        door.shut()
