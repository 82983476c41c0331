"""How a PostgreSQL index's failures are told apart and said: the server down or refusing the
role, coffer's tables dropped, a connection worth asking again; and psycopg_pool's log kept to a
line per warning."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime

import psycopg
from psycopg_pool import PoolTimeout

from ..._errors import IndexUnavailable

log = logging.getLogger("coffer_memory.postgresql")

DOWN = (psycopg.OperationalError, PoolTimeout)
"""What the driver raises when the server is down or unreachable (not a bad query: that is a bug)."""
REFUSED = (*DOWN, psycopg.errors.InsufficientPrivilege)
"""... and when the role may not do what was asked (a read-only member pushing rows)."""
GONE = psycopg.errors.UndefinedTable
"""What a statement meets once an administrator dropped coffer's tables (docs/team.md: the files
are the truth, the index is rebuilt from them)."""


class _OneLine(logging.Filter):
    """psycopg_pool's warnings as one line each, and each once a minute: with the server down,
    every reconnection attempt of every pool logged libpq's two-line refusal ('Connection
    refused', then a tab-indented hint), dozens of lines per request in a server's log."""

    REPEAT_AFTER = 60.0

    def __init__(self) -> None:
        super().__init__()
        self._said: dict[str, float] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        message = " ".join(record.getMessage().split())
        now = time.monotonic()
        with self._lock:
            if now - self._said.get(message, -self.REPEAT_AFTER) < self.REPEAT_AFTER:
                return False
            self._said = {m: t for m, t in self._said.items() if now - t < self.REPEAT_AFTER}
            self._said[message] = now
        record.msg, record.args = message, None
        return True


logging.getLogger("psycopg.pool").addFilter(_OneLine())


class Outage:
    """The server known to be down: while it is, every request is answered the refusal at once,
    where each waited the pool's timeout (10 s) for a connection the pool could not make; a
    thread of its own asks the server again every ``PROBE_SECONDS`` and ends the outage once a
    connection is made, so requests recover with no restart.

    ``probe`` makes one connection (raising ``psycopg.Error`` while the server refuses);
    ``recovered`` runs once it succeeded (the pool's idle connections checked)."""

    PROBE_SECONDS = 1.0

    def __init__(self, probe: Callable[[], None], recovered: Callable[[], None]) -> None:
        self._probe = probe
        self._recovered = recovered
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._since = ""
        self._closed = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def down(self) -> bool:
        """Whether the server is known to be down (no probe succeeded since it was found so)."""
        return self._reason is not None

    def check(self) -> None:
        """``IndexUnavailable`` at once while the server is known to be down."""
        reason, since = self._reason, self._since
        if reason is not None:
            raise IndexUnavailable(
                "postgresql", f"{reason} (down since {since}; asked again every {self.PROBE_SECONDS:g} s)"
            )

    def begin(self, reason: str) -> None:
        """The server refused a connection for ``reason``: requests fail at once from now on,
        until the watcher's probe connects."""
        with self._lock:
            if self._closed.is_set():
                return
            if self._reason is None:
                self._since = datetime.now(UTC).strftime("%H:%M:%S UTC")
            self._reason = reason
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="coffer-pg-probe", daemon=True)
                self._watcher.start()

    def _watch(self) -> None:
        while not self._closed.wait(self.PROBE_SECONDS):
            try:
                self._probe()
            except psycopg.Error:
                continue
            with suppress(psycopg.Error):  # the pool closed meanwhile: nothing to check
                self._recovered()
            with self._lock:
                self._reason, self._watcher = None, None
            log.info("PostgreSQL accepts connections again")
            return
        with self._lock:
            self._watcher = None

    def close(self, timeout: float = 5.0) -> None:
        """Stop the watcher (the index closes)."""
        with self._lock:
            self._closed.set()
            watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout)


def transient(exc: BaseException) -> bool:
    """A failure a second try may not meet: a connection that broke. Not a statement timeout (it
    would only time out again), nor the pool's timeout (it waited for a connection already)."""
    return isinstance(exc, psycopg.OperationalError) and not isinstance(
        exc, (psycopg.errors.QueryCanceled, PoolTimeout)
    )


def unavailable(exc: BaseException) -> IndexUnavailable:
    """``exc`` as the typed error every face answers (REST 503), its first line as the reason."""
    return IndexUnavailable("postgresql", first_line(exc))


def first_line(exc: BaseException) -> str:
    """The first line of ``exc`` (libpq adds hints on further lines), or its type's name."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
