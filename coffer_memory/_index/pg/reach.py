"""How ``PostgresIndex`` reaches its server: pooled connections waited for a bounded time, a
read tried again on a connection that broke, and the server's failures said as the typed
``IndexUnavailable`` every face answers (``failures`` tells them apart and keeps the outage).

A request that meets the server down is told so after at most ``POOL_FIRST_WAIT`` (or at once,
when its pooled connection broke): a direct connection (``failures.probe``, a short connect
timeout) says whether the server is down, and from then on the ``Outage`` answers every request
until a probe connects again.
"""

from __future__ import annotations

import abc
import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, ParamSpec, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_chain, wait_fixed, wait_none

from ..._errors import IndexUnavailable
from .deadline import TimedOut, bounded
from .failures import GONE, REFUSED, Outage, first_line, probe, silent, transient, unavailable
from .redact import scrub
from .text import advised

P = ParamSpec("P")
R = TypeVar("R")
# A read (or a write's lock) whose connection broke (the server restarted, or ended the session)
# is asked again at once on a fresh connection when the server accepts a direct connection
# (``_answers``; refused, the read fails at once and the outage begins), then twice more over
# 1.5 s. Connections are not checked as they leave the pool (a round trip on every request: 5-81%
# of a keyword recall, ``bench/pg.py --check-sizes``); after a failure the pool's idle connections
# are checked, so the next try does not meet another ended one.
READ_ATTEMPTS = 4
# Seconds a request waits for a pooled connection before the server is said to be down.
POOL_TIMEOUT = 10.0
# Seconds a request waits for a pooled connection before it asks the server directly whether it
# is up (``_getconn``): a server that went down is said after this, not after ``POOL_TIMEOUT``.
POOL_FIRST_WAIT = 0.5
# A bulk push (``sync`` of a reindex's documents) gets one more ``[index] timeout_seconds`` for
# each this many documents it sends.
ITEMS_PER_TIMEOUT = 500


def reachable(method: Callable[P, R]) -> Callable[P, R]:
    """``method`` with the server being down or unreachable, or refusing the role, reported as
    ``IndexUnavailable``, a typed error every face answers (REST 503), instead of the driver's
    exception."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        index = args[0]
        outage = getattr(index, "outage", None)
        if isinstance(outage, Outage):  # the server known to be down: said at once
            outage.check()
        try:
            try:
                return method(*args, **kwargs)
            except GONE:  # the tables were dropped (to rebuild the index): made again, asked again
                if not isinstance(index, Reaching) or not hasattr(index, "pool"):
                    raise
                index.recreate()
                return method(*args, **kwargs)
        except REFUSED as exc:
            raise (index.unavailable(exc) if isinstance(index, Reaching) else unavailable(exc)) from None

    return wrapper


def retried(method: Callable[P, R]) -> Callable[P, R]:
    """A read (``reachable``) tried again on a broken connection (see ``READ_ATTEMPTS``)."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        index = args[0]
        assert isinstance(index, Reaching)
        return index.retrying()(method, *args, **kwargs)

    return reachable(wrapper)


class Reaching(abc.ABC):
    """The connection side of ``PostgresIndex`` (its pool, its outage, its URL); a subclass
    says how its tables are made again (``recreate``)."""

    pool: ConnectionPool[psycopg.Connection[Any]]
    outage: Outage
    _url: str
    timeout: float  # seconds a statement waits for the server (``[index] timeout_seconds``)

    def _reach(self, url: str) -> None:
        """Set up what reaching ``url`` needs beside the pool (called as the index starts)."""
        self._url = url
        self.outage = Outage(lambda: probe(url), self.pool.check)
        self._probe_lock = threading.Lock()
        self._up_at = 0.0  # when a probe of ``_confirm_up`` last found the server up (monotonic)

    @abc.abstractmethod
    def recreate(self) -> None:
        """Create the tables again after they were dropped (``PostgresIndex``)."""

    def retrying(self) -> Retrying:
        """Tries of a statement on a connection that may have broken (see ``READ_ATTEMPTS``)."""
        return Retrying(
            stop=stop_after_attempt(READ_ATTEMPTS),
            wait=wait_chain(wait_none(), wait_fixed(0.5), wait_fixed(1.0)),
            retry=retry_if_exception(lambda exc: transient(exc) and self._answers()),
            before_sleep=lambda _: self.pool.check(),
            reraise=True,
        )

    def unavailable(self, exc: BaseException) -> IndexUnavailable:
        """The typed error for the driver's ``exc``. When the pool gave no connection in time (or
        a connection broke), it says why: the server's refusal when a direct connection fails
        too, and then every request is told so at once (``outage``) until the server is back;
        else every pooled connection being busy (the pool's own message says neither)."""
        outage: Outage | None = getattr(self, "outage", None)  # None: the start's own connection failed
        if not isinstance(exc, PoolTimeout) and (outage is None or not transient(exc)):
            return self._said(exc)
        known = outage.error() if outage is not None else None
        if known is not None:  # found down while this request ran (``_confirm_up``)
            return known
        try:
            probe(self._url)
        except psycopg.Error as refused:
            said = self._said(refused)
            if outage is not None:
                outage.begin(said.reason, silent=silent(refused))
            return said
        if not isinstance(exc, PoolTimeout):
            return self._said(exc)
        return IndexUnavailable(
            "postgresql",
            f"no pooled connection within {POOL_TIMEOUT:g} s though the server accepts connections "
            "(every one busy: raise [index] pool_size or the server's max_connections; or the pool "
            "still reconnecting after the server ended its sessions)",
        )

    def _answers(self) -> bool:
        """Whether the server accepts a direct connection, asked before a read whose connection
        broke is tried again: a server that is down is said at once, not after the pool's wait
        for a connection it cannot make. Not answering begins the ``outage``."""
        try:
            self._confirm_up()
        except IndexUnavailable:
            return False
        return True

    def _confirm_up(self) -> None:
        """``IndexUnavailable`` (and the ``outage`` begun) unless the server accepts a direct
        connection; one probe at a time, and none within a second of one that connected."""
        with self._probe_lock:
            known = self.outage.error()
            if known is not None:
                raise known
            if time.monotonic() - self._up_at < 1.0:
                return
            try:
                probe(self._url)
            except psycopg.Error as refused:
                said = self._said(refused)
                self.outage.begin(said.reason, silent=silent(refused))
                raise said from None
            self._up_at = time.monotonic()

    def _getconn(self) -> psycopg.Connection[Any]:
        """A pooled connection. Waited for ``POOL_FIRST_WAIT``, then the server is asked directly:
        down, that is said at once (``_confirm_up``); up, the wait goes on to ``POOL_TIMEOUT``."""
        try:
            return self.pool.getconn(timeout=POOL_FIRST_WAIT)
        except PoolTimeout:
            self._confirm_up()
        return self.pool.getconn(timeout=POOL_TIMEOUT - POOL_FIRST_WAIT)

    @contextmanager
    def _pooled(self, items: int = 0, *, bounded: bool = True) -> Iterator[psycopg.Connection[Any]]:
        """``pool.connection()`` through ``_getconn``, used within its deadline (``_bounded``)
        unless not ``bounded`` (an index build that may take minutes)."""
        conn = self._getconn()
        try:
            with self._bounded(conn, items) if bounded else nullcontext(conn):
                yield conn
        finally:
            self.pool.putconn(conn)

    @contextmanager
    def _bounded(self, conn: psycopg.Connection[Any], items: int = 0) -> Iterator[psycopg.Connection[Any]]:
        """``conn`` used for at most ``timeout`` seconds (``deadline``), once more for each
        ``ITEMS_PER_TIMEOUT`` of ``items`` a bulk push sends: a server that does not answer by
        then is said as ``IndexUnavailable``, and when it accepts no connection either the outage
        begins (``_answers``), so the next requests are told at once."""
        seconds = self.timeout * (1 + items // ITEMS_PER_TIMEOUT)
        try:
            with bounded(conn, seconds):
                yield conn
        except TimedOut:
            up = self._answers()
            raise IndexUnavailable(
                "postgresql",
                f"the server did not answer within {seconds:g} s ([index] timeout_seconds)"
                + ("" if up else "; it accepts no connection either"),
            ) from None

    def _said(self, exc: BaseException) -> IndexUnavailable:
        """``exc``'s first line as ``IndexUnavailable``, never with the URL's password in it."""
        return IndexUnavailable("postgresql", advised(scrub(first_line(exc), getattr(self, "_url", ""))))
