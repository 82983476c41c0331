"""Bounds on connections, for ``coffer-api`` and ``coffer-mcp --transport streamable-http``, as
mixins for uvicorn's HTTP protocols: how many one server process holds (``ConnectionLimit``), and
how many requests one connection may send ahead of their answers (``PipelineBound``, at the end).

Nothing bounded them: a client could open thousands of connections, idle or slow, and each cost the
process a file descriptor (and a parser, timers, a task while a request ran). Past the process's
descriptor limit (``ulimit -n``: 256 by default on macOS, 1024 on most Linux) ``accept`` fails, and
so do the store's own opens, SQLite's and git's; the local agents that use the server were starved.

**What uvicorn has, and why it is not the bound.** ``limit_concurrency`` is judged when a request's
head has been parsed, not when a connection is made: a connection that sends nothing (or one byte a
second) is held however many there are, so it bounds no descriptor; and past it every request is
answered ``503`` in plain text, on the connections already held too, with a warning logged per
request. ``backlog`` is the kernel's queue of connections not yet accepted (they cost the process
nothing) and ``timeout_keep_alive`` closes a connection idle between requests (5 s, kept). So the
number is uvicorn's own setting (``Config(limit_concurrency=N)``, which ``--max-connections`` sets),
judged here when a connection is made, and uvicorn's request-time check is turned off.

**At the bound** a new connection takes the place of the oldest idle one, if any: one between two
requests (uvicorn's keep-alive timeout would close it within 5 s) or one that has sent nothing in
its first ``IDLE_GRACE_S`` (the head deadline would close it within 20 s); else that of the request
still arriving after ``SLOW_AFTER_S`` at the lowest rate (answered ``408``: a body sent at the
least rate that earns more time, 500 bytes a second, held its connection for over half an hour a
MiB); else that of the stream the app ranks lowest (``STREAM_RANK``: coffer-mcp's event streams,
one of a session never used first, then the one open longest). It is closed, unanswered,
as those would close it (nginx frees idle kept-alive connections the same way when it runs out): idle
connections, however many a client opens, starve nobody. **Past the bound** (every held connection
busy) a new connection is answered at once, whatever it sends: ``503
TOO_MANY_CONNECTIONS`` with the error envelope (``details.limit``), ``Retry-After`` and
``Connection: close``; what it sends is read and dropped for up to ``LINGER_S`` (closing a socket
with unread bytes resets it, and the client could lose the answer), then it closes. It never holds
a slot; and at most as many linger as may be held: past them (a flood of new connections, each of
which would hold a descriptor for ``LINGER_S``) a connection is reset at once, unanswered. A
refused ``accept`` (leaving connections in the backlog) was the other choice: a client would hang
with no word of why, and asyncio has no public way to pause accepting. The connections already held
are served as before. One ``WARNING`` line says the bound was reached, at most once a
``LOG_EVERY_S``, with the number turned away since the last line: never a line per connection.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from typing import Any

from ._http_bounds import envelope_answer

DEFAULT_MAX_CONNECTIONS = 100
"""Connections one server process holds at most. An agent keeps one or two (a kept-alive client,
an MCP session's event stream beside its POSTs), a browser six per host, so a machine's agents need
tens; and 100 descriptors leave more than half of the smallest usual limit (256, macOS) to the
store's files, SQLite and git."""
RETRY_AFTER_S = 5
"""``Retry-After`` of the ``503``: uvicorn closes a connection idle for ``timeout_keep_alive`` (5 s),
so a slot held by an idle client frees within it."""
IDLE_GRACE_S = 1.0
"""A new connection that has sent nothing is idle (may give its place to a newer one) after this long."""
SLOW_AFTER_S = 10.0
"""A request still arriving (its head or body) this long after it began may give its connection to a
new one at the bound (``408``): on this machine a request arrives in milliseconds."""
LINGER_S = 1.0
"""Seconds a turned-away connection may still send (dropped) before it is closed."""
LOG_EVERY_S = 60.0
"""The bound is said in the log at most once in this many seconds."""

log = logging.getLogger("uvicorn.error")
STREAM_RANK = "coffer.stream_rank"
"""A key an app may set in a request's ASGI scope: a callable giving a comparable rank to an answer
that streams without end (an MCP session's event stream). At the bound, with no idle connection, the
stream ranked lowest is closed for a new connection; a stream is a request in flight, never idle, so
silent streams held every connection."""


def max_connections(value: str) -> int:
    """``--max-connections`` (and its environment variable): a whole number, at least 1."""
    if not is_count(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of connections (1 or more)")
    return int(value)


def is_count(value: str) -> bool:
    """Whether ``value`` is a whole number of 1 or more, in ASCII digits: ``str.isdigit`` takes
    ``²`` (and other scripts' digits), which ``int`` refuses with a ``ValueError`` that no
    caller of an option's check expects (an environment variable's was a raw traceback)."""
    value = value.strip()
    return value.isascii() and value.isdigit() and int(value) >= 1


class RepeatedWarnings(logging.Filter):
    """A filter for the ``uvicorn.error`` logger: uvicorn's warnings about one request each (a
    request that is not HTTP, or that a bound of ``_http_bounds`` refused; an upgrade it cannot
    make) are said at most once a ``LOG_EVERY_S`` each, with how many were not said since.

    uvicorn logged one line per such request: 500 lines of garbage sent to either face were 500
    ``WARNING`` lines, as fast as a client could send them, into a terminal or a journal."""

    PER_REQUEST = frozenset(
        {
            "Invalid HTTP request received.",
            "Unsupported upgrade request.",
            "Refusing to open a new session: %d sessions are already open",  # the MCP SDK's
        }
    )
    """The messages logged per request (by their text: they have no other mark)."""

    def __init__(self) -> None:
        super().__init__()
        self._said: dict[str, float] = {}
        self._unsaid: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """Pass ``record`` unless it repeats a per-request warning said less than a minute ago."""
        text = record.msg
        if not isinstance(text, str) or not (
            text in self.PER_REQUEST or text.startswith("No supported WebSocket")
        ):
            return True
        now = time.monotonic()
        said = self._said.get(text)
        if said is not None and now - said < LOG_EVERY_S:
            self._unsaid[text] = self._unsaid.get(text, 0) + 1
            return False
        self._said[text] = now
        unsaid = self._unsaid.pop(text, 0)
        if unsaid:
            record.msg = f"{text} ({unsaid} more since this was last said; said at most once a minute)"
        return True


def connections_option(parser: argparse.ArgumentParser, given: int | None, env: str) -> int | None:
    """``--max-connections`` when ``given``, else the environment variable ``env`` (None when
    neither: the default); a bad value of the variable is ``parser``'s one-line error, as a bad
    option is."""
    value = os.environ.get(env, "").strip()
    if given is not None or not value:
        return given
    try:
        return max_connections(value)
    except argparse.ArgumentTypeError as exc:
        parser.error(f"${env}: {exc}")


class OnceAMinute:
    """An event counted, and said in the log at most once a ``LOG_EVERY_S`` with how many came
    since it was last said: never a line per connection or session."""

    def __init__(self) -> None:
        self.count = 0
        self.logged_at: float | None = None

    def due(self) -> int | None:
        """Count one more; how many to say (this one included) when a line is due now, else None."""
        self.count += 1
        now = time.monotonic()
        if self.logged_at is not None and now - self.logged_at < LOG_EVERY_S:
            return None
        count, self.count, self.logged_at = self.count, 0, now
        return count


class _Tally:
    """Per server: the connections held, oldest first; how many were turned away since the last log
    line, and when it was; how many turned-away ones linger (answered, not yet closed)."""

    def __init__(self) -> None:
        self.held: dict[Any, None] = {}
        self.turned_away = OnceAMinute()
        self.lingering = 0

    def evict_idle(self, connections: set[Any]) -> bool:
        """Close the oldest held connection that waits for nothing (True), if there is one: as
        uvicorn's keep-alive timeout, or the head deadline, would close it a little later; else
        answer ``408`` to the slowest request still arriving after ``SLOW_AFTER_S``; else close
        the stream the app ranks lowest (``STREAM_RANK``). ``connections`` is uvicorn's set: one
        no longer in it (upgraded to another protocol) is uvicorn's business no more, nor this
        tally's."""
        slow: tuple[float, Any] | None = None
        stream: tuple[Any, Any] | None = None
        for connection in list(self.held):
            if connection not in connections:
                del self.held[connection]
            elif connection._idle():
                connection.transport.close()
                del self.held[connection]
                return True
            elif (rate := connection._slow_rate()) is not None:
                if slow is None or rate < slow[0]:
                    slow = (rate, connection)
            elif (rank := connection._stream_rank()) is not None and (stream is None or rank < stream[0]):
                stream = (rank, connection)
        if slow is not None:
            del self.held[slow[1]]
            slow[1]._time_out()  # 408, as its read deadline would answer it
            return True
        if stream is None:
            return False
        stream[1].transport.close()  # the app's stream ends as when its client goes
        del self.held[stream[1]]
        return True

    def turn_away(self, limit: int, face: str) -> None:
        count = self.turned_away.due()
        if count is None:
            return
        log.warning(
            "%s holds %d connections, its --max-connections: a new one is answered 503 until one "
            "closes (%d turned away since this was last said, at most once a minute)",
            face,
            limit,
            count,
        )


class ConnectionLimit:
    """Mixin for a uvicorn HTTP protocol class, first in its bases: a connection past
    ``config.limit_concurrency`` (``DEFAULT_MAX_CONNECTIONS`` when unset) held connections is
    answered ``503`` and closed (see the module docstring); ``face`` names the server in the log.
    What a turned-away connection sends is dropped; when it is done sending, uvicorn's
    ``eof_received`` lets asyncio close it."""

    face = "the server"
    max_connections = DEFAULT_MAX_CONNECTIONS
    limit_concurrency: int | None  # uvicorn's, set by its protocol's __init__
    _turned_away = False
    _lingering = False
    _heard = False  # a byte came (a connection that sent none is idle)
    _made_at = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Judged per connection here; uvicorn's own check would answer requests on held ones.
        self.max_connections = self.limit_concurrency or DEFAULT_MAX_CONNECTIONS
        self.limit_concurrency = None

    def connection_made(self, transport: Any) -> None:
        """Hold the connection (in the place of the oldest idle one when as many are held as the
        limit allows), or turn it away."""
        super().connection_made(transport)  # type: ignore[misc]
        self._made_at = time.monotonic()
        connections: set[Any] = self.connections  # type: ignore[attr-defined]
        tally = self._tally()
        if len(connections) > self.max_connections and not tally.evict_idle(connections):
            self._turn_away(transport, connections, tally)
            return
        tally.held[self] = None

    def _idle(self) -> bool:
        """Open and waiting for nothing: between two requests, or never sent a byte in its first
        ``IDLE_GRACE_S`` (a client connects, then sends: its bytes may not have been read yet)."""
        transport = getattr(self, "transport", None)
        if transport is None or transport.is_closing():
            return False
        if getattr(self, "timeout_keep_alive_task", None) is not None:
            return True
        return not self._heard and time.monotonic() - self._made_at > IDLE_GRACE_S

    def _slow_rate(self) -> float | None:
        """Bytes a second of the request this connection is still receiving (head or body) after
        ``SLOW_AFTER_S``, or None (``_http_bounds.ReadDeadlines`` times it: none without)."""
        phase, start = getattr(self, "_phase", None), getattr(self, "_phase_start", 0.0)
        if phase is None or not self._heard or not hasattr(self, "_time_out"):
            return None
        if getattr(getattr(self, "flow", None), "read_paused", False):
            return None  # the app has not taken what came: not the client's slowness
        took = time.monotonic() - start
        return None if took < SLOW_AFTER_S else getattr(self, "_phase_bytes", 0) / took

    def _stream_rank(self) -> Any:
        """The app's rank of the stream this connection is answering (``STREAM_RANK``), or None."""
        cycle = getattr(self, "cycle", None)
        if cycle is None or not cycle.response_started or cycle.response_complete:
            return None
        rank = cycle.scope.get(STREAM_RANK)
        return None if rank is None else rank()

    def _turn_away(self, transport: Any, connections: set[Any], tally: _Tally) -> None:
        # Out of uvicorn's set at once: a turned-away connection holds no slot, and a shutdown
        # does not wait for it (it closes within LINGER_S).
        connections.discard(self)
        self._turned_away = True
        state = self.server_state  # type: ignore[attr-defined]
        tally.turn_away(self.max_connections, self.face)
        if tally.lingering >= self.max_connections:
            # A flood: each answered connection lingers up to LINGER_S, a descriptor each; past
            # as many as may be held, the connection is reset at once, unanswered.
            transport.abort()
            return
        tally.lingering += 1
        self._lingering = True
        message = (
            f"the server holds as many connections as it may ({self.max_connections}); try again shortly"
        )
        headers = [*getattr(state, "default_headers", ()), (b"retry-after", str(RETRY_AFTER_S).encode())]
        details = {"limit": self.max_connections}
        transport.write(
            envelope_answer("503 Service Unavailable", "TOO_MANY_CONNECTIONS", message, headers, details)
        )
        if transport.can_write_eof():
            transport.write_eof()  # the answer, then end of stream: the client may read it all
        self.loop.call_later(LINGER_S, transport.close)  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection ended: it holds no slot, and a turned-away one lingers no more."""
        tally = self._tally()
        tally.held.pop(self, None)
        if self._lingering:
            self._lingering = False
            tally.lingering -= 1
        super().connection_lost(exc)  # type: ignore[misc]

    def _tally(self) -> _Tally:
        state = self.server_state  # type: ignore[attr-defined]
        tally: _Tally | None = getattr(state, "coffer_turned_away", None)
        if tally is None:
            tally = state.coffer_turned_away = _Tally()
        return tally

    def data_received(self, data: bytes) -> None:
        """Parse what a held connection sends; drop what a turned-away one does."""
        if not self._turned_away:
            self._heard = True
            super().data_received(data)  # type: ignore[misc]


MAX_PIPELINED = 16
"""Requests of one connection queued ahead of their answers (HTTP/1.1 pipelining) past which no more
is parsed (a slice of ``_SLICE`` bytes given to the parser may add what it holds: about 50 small
GETs). No browser pipelines, and a client gains nothing by sending more ahead; each one queued cost
the server about 2 KB (its scope, its cycle: 20,000 small GETs, 42 MB)."""
_SLICE = 4096  # bytes given to the parser at a time when requests may be queued


class PipelineBound:
    """Mixin for uvicorn's httptools protocol, before the parser's other mixins: at most
    ``MAX_PIPELINED`` requests of a connection queued ahead of their answers; what comes after them
    waits unparsed, and the connection is not read, until the answers go out.

    uvicorn parses all it receives (up to 256 KiB a read) and queues every request in it, and resumes
    reading after each answer with the queue still full: a client that sent requests without reading
    the answers had all of them queued: 1.66 MB of small GETs on one connection grew the process by
    42 MB, and each other connection as much. Received bytes are now given to the parser a slice at a
    time while a request may be queued, and kept back (reading paused) once the queue is full.
    """

    _held = b""

    def data_received(self, data: bytes) -> None:
        """Parse ``data``, or as much of it as the queue allows; keep the rest for later."""
        if not self._held and len(data) <= _SLICE and not getattr(self, "pipeline", None):
            super().data_received(data)  # type: ignore[misc]  # an agent's request: as it was
            return
        self._held += data
        self._feed()

    def _feed(self) -> None:
        pipeline = getattr(self, "pipeline", ())  # h11 parses one request at a time itself
        data, self._held = self._held, b""
        view, offset = memoryview(data), 0
        while offset < len(data):
            if len(pipeline) >= MAX_PIPELINED:
                self._held = bytes(view[offset:])
                self.flow.pause_reading()  # type: ignore[attr-defined]
                return
            super().data_received(bytes(view[offset : offset + _SLICE]))  # type: ignore[misc]
            offset += _SLICE
            if self.transport.is_closing():  # type: ignore[attr-defined]  # refused, timed out
                return

    def on_response_complete(self) -> None:
        """An answer went out (uvicorn resumes reading and starts the next queued request): parse
        what was kept back, once this callback is done."""
        super().on_response_complete()  # type: ignore[misc]
        if self._held:
            self.loop.call_soon(self._feed_held)  # type: ignore[attr-defined]

    def _feed_held(self) -> None:
        if self._held and not self.transport.is_closing():  # type: ignore[attr-defined]
            self._feed()
