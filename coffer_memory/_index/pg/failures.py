"""How a PostgreSQL index's failures are told apart and said: the server down or refusing the
role, coffer's tables dropped, a connection worth asking again; and psycopg_pool's log kept to a
line per warning."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from psycopg_pool import PoolTimeout

from ..._errors import IndexUnavailable
from ..._home import append_log

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


class _PoolLines(logging.Handler):
    """Where psycopg_pool's lines go in a process with no handler on the root logger (else they
    go on to the root's handlers, as in coffer-mcp or an application's ``basicConfig``).

    A process that shows coffer's own warnings through a handler on the ``coffer_memory``
    logger (the ``coffer`` CLI, coffer-hook) appends them to the home's ``logs/errors.log``:
    with no handler anywhere, Python's last-resort handler printed them on stderr, so a server
    restarted under a ``coffer`` call put "discarding closed connection: <psycopg.Connection
    [BAD] ...>" beside coffer's one line. Any other (coffer-api under uvicorn, a script) prints
    each on stderr, as the last-resort handler did: a server's log keeps them."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.path: Path | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return
        try:
            message = record.getMessage()
            if self.path is None or not logging.getLogger("coffer_memory").handlers:
                sys.stderr.write(message + "\n")
                return
            line = f"{datetime.now(UTC).isoformat()} {record.name}: {message}\n"
            append_log(self.path, line)
        except (OSError, ValueError):  # a home it may not write, a closed stderr: the line is dropped
            pass


_POOL_LOG = _PoolLines()
_pool_logger = logging.getLogger("psycopg.pool")
_pool_logger.addFilter(_OneLine())
_pool_logger.addHandler(_POOL_LOG)


def keep_pool_log(errors_log: Path) -> None:
    """Where psycopg_pool's lines go in a process that shows coffer's warnings itself (``_PoolLines``):
    the home's error log (a process has one home's index on PostgreSQL; the last one set wins)."""
    _POOL_LOG.path = errors_log


# Seconds the probe's direct connection may take: libpq's least (it rounds less up to 2). A server
# that answers refuses at once; only a host that answers nothing (a dropped route, a firewall that
# discards, a server stopped mid-handshake) costs this, and only the probe pays it.
PROBE_CONNECT_TIMEOUT = 2
# Seconds a request told "down" waits for the probe round it wakes while the host answered
# nothing (the last probe timed out): each request costs this much, not a connect timeout.
PROMPT_SECONDS = 0.5
# ... and while the server refused (it answers): the round ends as soon as a connection is refused
# or made, so the first request after the server's start is served. It is waited for as long as
# the probe may take (twice: a round under way is waited for first), not PROMPT_SECONDS: on a
# loaded machine a connection to a server just started took longer, and that request was told
# "down" by a server that was up. Once the probe connected, the request waits on (up to
# RECOVERY_SECONDS) while the pool's idle connections are checked.
ANSWERED_SECONDS = 2 * PROBE_CONNECT_TIMEOUT + PROMPT_SECONDS
RECOVERY_SECONDS = 10.0


class Outage:
    """The server known to be down: while it is, every request is answered the refusal at once,
    where each waited the pool's timeout (10 s) for a connection the pool could not make; a
    thread of its own asks the server again every ``PROBE_SECONDS``, and at once when a request
    wakes it (``check``), and ends the outage once a connection is made, so requests recover
    with no restart and without waiting for the next round.

    ``probe`` makes one connection (raising ``psycopg.Error`` while the server refuses);
    ``recovered`` runs once it succeeded (the pool's idle connections checked). ``idle_stop``:
    seconds without a ``check`` after which the watcher stops and the outage is forgotten (an
    outage of a start that nobody retries; None: it lasts until the server is back or ``close``).
    """

    PROBE_SECONDS = 1.0

    def __init__(
        self, probe: Callable[[], None], recovered: Callable[[], None], *, idle_stop: float | None = None
    ) -> None:
        self._probe = probe
        self._recovered = recovered
        self._idle_stop = idle_stop
        self._lock = threading.Lock()
        self._round_done = threading.Condition(self._lock)
        self._rounds = 0  # probe rounds finished, so a request waits for one that began after it
        self._probing = False  # a round under way (its answer may predate the request)
        self._recovering = False  # the probe connected: the pool is being checked
        self._asked = time.monotonic()
        self._reason: str | None = None
        self._silent = False  # the last refusal was a connect timeout: the host answers nothing
        self._since = ""
        self._closed = threading.Event()
        self._wake = threading.Event()
        self._watcher: threading.Thread | None = None
        self._unexpected: str | None = None  # the last failure of a round that was no psycopg.Error

    @property
    def down(self) -> bool:
        """Whether the server is known to be down (no probe succeeded since it was found so)."""
        return self._reason is not None

    def error(self) -> IndexUnavailable | None:
        """What a request is told while the server is known to be down (None: it is not)."""
        reason, since = self._reason, self._since
        if reason is None:
            return None
        return IndexUnavailable(
            "postgresql", f"{reason} (down since {since}; asked again every {self.PROBE_SECONDS:g} s)"
        )

    def check(self) -> None:
        """``IndexUnavailable`` while the server is known to be down, after a probe round this
        call woke (at most ``PROMPT_SECONDS`` while the host answers nothing, else
        ``ANSWERED_SECONDS``): a server back by now is served at once."""
        if self._reason is None:
            return
        with self._lock:
            self._asked = time.monotonic()
            if self._reason is not None and self._watcher is not None:
                wanted = self._rounds + (2 if self._probing else 1)  # a round begun after this call
                self._wake.set()
                self._round_done.wait_for(
                    lambda: self._reason is None or self._rounds >= wanted,
                    timeout=PROMPT_SECONDS if self._silent else ANSWERED_SECONDS,
                )
                if self._recovering:
                    self._round_done.wait_for(lambda: self._reason is None, timeout=RECOVERY_SECONDS)
        error = self.error()
        if error is not None:
            raise error

    def begin(self, reason: str, *, silent: bool = False) -> None:
        """The server refused a connection for ``reason`` (``silent``: the host answered nothing
        in time): requests fail at once from now on, until the watcher's probe connects."""
        with self._lock:
            if self._closed.is_set():
                return
            if self._reason is None:
                self._since = datetime.now(UTC).strftime("%H:%M:%S UTC")
            self._reason = reason
            self._silent = silent
            self._asked = time.monotonic()
            if self._watcher is None:
                self._probing = False
                self._wake.clear()
                self._watcher = threading.Thread(target=self._watch, name="coffer-pg-probe", daemon=True)
                self._watcher.start()

    def _watch(self) -> None:
        while True:
            self._wake.wait(self.PROBE_SECONDS)
            with self._lock:
                self._wake.clear()
                idle = self._idle_stop is not None and time.monotonic() - self._asked > self._idle_stop
                if self._closed.is_set() or idle:
                    self._reason = None if idle else self._reason
                    self._watcher = None
                    self._round_done.notify_all()
                    return
                self._probing = True
            failed = self._ask(self._probe, "probe")
            up = failed is None
            if up:
                with self._lock:
                    self._recovering = True
                self._ask(self._recovered, "check of the pooled connections")  # failing: served anyway
            with self._lock:
                self._probing = self._recovering = False
                self._rounds += 1
                self._silent = silent(failed)
                if up:
                    self._reason, self._watcher = None, None
                self._round_done.notify_all()
            if up:
                log.info("PostgreSQL accepts connections again")
                return

    def _ask(self, step: Callable[[], None], what: str) -> BaseException | None:
        """Run one step of a probe round; its failure (None: it succeeded). A ``psycopg.Error``
        is the server refusing (or, for the pool's check, the pool closed meanwhile); any other
        exception is logged with its traceback (once per kind of failure) and taken as a refusal:
        it ended the thread, and with it the outage's probing, and requests were told "down" for
        good."""
        try:
            step()
        except psycopg.Error as exc:
            return exc
        except Exception as exc:
            said = f"{type(exc).__name__}: {first_line(exc)}"
            if said != self._unexpected:
                self._unexpected = said
                log.error("the PostgreSQL %s failed unexpectedly (asked again)", what, exc_info=True)
            return exc
        return None

    def close(self, timeout: float = 5.0) -> None:
        """Stop the watcher (the index closes)."""
        with self._lock:
            self._closed.set()
            self._wake.set()
            watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout)


_STARTS: dict[str, Outage] = {}
_STARTS_LOCK = threading.Lock()
# A start's outage is forgotten after this long without a request (its watcher stops probing).
START_IDLE_SECONDS = 60.0


def start_outage(url: str) -> Outage:
    """The outage of starting an index on ``url``, shared by every start in this process: a start
    that found the server down (refusing, or not answering within the connect timeout) tells the
    next ones at once, where each waited that timeout again, until a probe connects."""
    with _STARTS_LOCK:
        outage = _STARTS.get(url)
        if outage is None:
            outage = _STARTS[url] = Outage(lambda: probe(url), lambda: None, idle_stop=START_IDLE_SECONDS)
        return outage


def probe(url: str) -> None:
    """One direct connection to ``url``, closed at once: ``psycopg.Error`` while the server
    refuses, or answers nothing within ``PROBE_CONNECT_TIMEOUT``."""
    psycopg.connect(url, connect_timeout=PROBE_CONNECT_TIMEOUT).close()


def silent(exc: BaseException | None) -> bool:
    """Whether ``exc`` says the host answered nothing within the connect timeout (``Outage``
    waits only ``PROMPT_SECONDS`` for a probe round then), not a refusal."""
    return isinstance(exc, psycopg.errors.ConnectionTimeout)


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
