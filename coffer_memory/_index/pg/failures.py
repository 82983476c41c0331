"""How a PostgreSQL index's failures are told apart and said: the server down or refusing the
role, coffer's tables dropped, a connection worth asking again; and psycopg_pool's log kept to a
line per warning."""

from __future__ import annotations

import logging
import threading
import time

import psycopg
from psycopg_pool import PoolTimeout

from ..._errors import IndexUnavailable

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
