"""A bound on how long a statement waits for the PostgreSQL server to answer.

A server that stopped answering mid-connection (its processes stopped, a host or proxy that
holds the connection open and sends nothing) left a recall waiting forever: the kernel still
acknowledges the packets, so neither TCP keepalives nor ``tcp_user_timeout`` end the wait, and
libpq has no timeout of its own for a statement. Each use of a connection is given a deadline
(``[index] timeout_seconds``); one watcher thread per process shuts the socket of a connection
whose deadline passed, so the waiting statement fails at once with the driver's "server closed
the connection", which ``PostgresIndex`` then says as ``IndexUnavailable``. A connection is made within ``connect_timeout`` (the same bound), and TCP keepalives and
``tcp_user_timeout`` notice a peer gone from the network.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

# Seconds a statement (or a connection's making) waits for the server: ``[index] timeout_seconds``.
DEFAULT_TIMEOUT = 30.0


class TimedOut(Exception):
    """A statement's connection was cut because the server did not answer in time."""


class _Watcher:
    """The deadlines of every connection in use in this process, and the thread that keeps them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._live: dict[int, psycopg.Connection[Any]] = {}
        self._cut: set[int] = set()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, conn: psycopg.Connection[Any], seconds: float) -> int:
        token = next(self._ids)
        with self._cond:
            self._live[token] = conn
            due = time.monotonic() + seconds
            # The watcher is woken only for a deadline before every other: with one bound for
            # all, the first after an idle spell (a request costs no thread switch).
            first = not self._heap or due < self._heap[0][0]
            heapq.heappush(self._heap, (due, token))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="coffer-pg-deadlines", daemon=True)
                self._thread.start()
            elif first:
                self._cond.notify()
        return token

    def remove(self, token: int) -> bool:
        """Forget ``token``; True when its connection was cut (its deadline passed)."""
        with self._cond:
            self._live.pop(token, None)
            if token in self._cut:
                self._cut.discard(token)
                return True
            return False

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)  # ended in time
                if not self._heap:
                    self._cond.wait(60.0)
                    if not self._heap:
                        self._thread = None
                        return
                    continue
                due, token = self._heap[0]
                left = due - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)
                conn = self._live.pop(token)
                self._cut.add(token)
            _shut(conn)


def _shut(conn: psycopg.Connection[Any]) -> None:
    """Shut ``conn``'s socket: the statement waiting on it wakes with the connection closed."""
    try:
        fd = conn.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, psycopg.Error):  # closed meanwhile: nothing waits on it
        pass


_WATCHER = _Watcher()


@contextmanager
def bounded(conn: psycopg.Connection[Any], seconds: float) -> Iterator[psycopg.Connection[Any]]:
    """Use ``conn`` for at most ``seconds``: past that its socket is shut, and the failure the
    block meets is raised as ``TimedOut``."""
    token = _WATCHER.add(conn, seconds)
    try:
        yield conn
    except BaseException as exc:
        if _WATCHER.remove(token):
            raise TimedOut(str(exc)) from exc
        raise
    else:
        if _WATCHER.remove(token):  # cut as the block ended: to libpq it looks well, but it is not
            conn.close()  # so the pool discards it, not the next request


def connection_options(given: dict[str, Any], seconds: float) -> dict[str, Any]:
    """libpq options bounding the connection's waits (those the URL sets itself stay its own):
    ``connect_timeout``, TCP keepalives (a peer gone from the network) and ``tcp_user_timeout``
    (sent data never acknowledged)."""
    whole = max(1, round(seconds))
    options: dict[str, Any] = {
        "connect_timeout": whole,
        "keepalives": 1,
        "keepalives_idle": max(1, min(30, whole)),
        "keepalives_interval": max(1, min(10, whole)),
        "keepalives_count": 3,
        "tcp_user_timeout": int(seconds * 1000),
    }
    return {k: v for k, v in options.items() if k not in given}
