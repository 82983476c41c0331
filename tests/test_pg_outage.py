"""A PostgreSQL server that is down, or a host that answers nothing, met by a running index and
by one that starts: the first request is told without waiting for the pool, the next ones at
once, and the first request after the server is back is served. Real servers stopped and started,
a port nobody listens on, and a socket that takes connections and never answers."""

from __future__ import annotations

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
