"""Bounds on what one HTTP request may send, as mixins for uvicorn's protocols (``coffer-api`` and
``coffer-mcp --transport streamable-http`` both use them): ``BoundedHead`` (how many headers, how
many bytes before the headers end), ``ReadDeadlines`` (how long the head and the body may take) and
``TargetHost`` (an absolute target's host is the request's ``Host``).

**Size.** httptools (uvicorn's parser when installed) bounds neither the number nor the size of a
request's headers, and keeps a header (and the target) whole until it ends: 5,000 headers, or one
header that never ended (hundreds of megabytes), were kept in memory before any token check, and
100,000 header lines of five bytes each fit in the 1 MiB bound the MCP face had. A request past
``MAX_HEADERS`` headers, ``MAX_HEADER_BYTES`` of them, or ``MAX_HEAD_BYTES`` sent before its headers
end is ``400 INVALID_INPUT`` with the error envelope and the connection closes; a target past
``MAX_TARGET_BYTES`` (more than httptools parses) is ``414`` the same way. (h11, uvicorn's
fallback, stops at 16 KiB of head itself.)

A chunked body's framing is bounded the same way: httptools keeps a trailer field (after the last
chunk) whole until it ends, as a header, and the body's deadline grows with the bytes received, so a
trailer that never ended, sent fast, was kept without bound (200 MB sent: the process grew by 50-80
MB and never answered). ``MAX_HEAD_BYTES`` received in a body without a piece of body or a whole
trailer coming of them (a trailer, or a chunk extension, that long) is ``400 INVALID_INPUT``, and the
connection closes. A trailer that ends is dropped (RFC 9110 6.5.1): uvicorn added it to the
request's headers while the app read the body, after every check of them.

**Time.**

uvicorn bounds the idle time between two requests of a kept-alive connection (``timeout_keep_alive``)
and nothing after a request's first byte: a client that sent its head, or its body, one byte a
second (slowloris) held the connection, and the request's task waiting on the body, for as long as
it liked; a few hundred such clients held every connection a process may open. ``coffer-api`` and
``coffer-mcp --transport streamable-http`` now bound both, the way Apache's ``mod_reqtimeout``
does by default:

- the **head** (request line and headers) must end within ``head_timeout`` seconds of the request's
  first byte (of the connection's opening, for its first request: one that never sent a byte was
  held too), one more second for every ``min_rate`` bytes received, at most ``head_timeout_max``;
- the **body** must end within ``body_timeout`` seconds of the head's end, one more second for every
  ``min_rate`` bytes received (no maximum: a large import on a slow link is only held to the rate).

Past a deadline the answer is ``408`` with the error envelope (``REQUEST_TIMEOUT``) when no answer
has started (an app may answer before the body came: a refusal, a GET reading none; a second answer
after it was read as the answer to the next request), and the connection closes either way; the app
reading the body sees the client gone.
While uvicorn holds reading back (the app has not taken what arrived), the clock is not held
against the client.

The mixin relies only on what uvicorn's two protocols share: ``data_received``, ``transport``,
``loop``, ``flow`` and ``cycle`` (a new ``RequestResponseCycle`` once a head has been parsed, whose
``more_body`` turns false when its body has ended). It imports nothing from uvicorn, so either face
may use it over httptools or h11.
"""

from __future__ import annotations

import json
import time
from typing import Any

MAX_HEADERS = 100
"""Headers one request may carry (browsers send about 20)."""
MAX_HEADER_BYTES = 64 * 1024
"""Bytes of header names and values one request may carry (about nginx's default)."""
MAX_TARGET_BYTES = 65535
"""Bytes of a request's target (path and query): httptools parses none longer (its offsets are 16
bits), and such a request was answered "400 the request is not valid HTTP". Past it the answer is
``414 URI Too Long`` (``REQUEST_TOO_LARGE``, ``details.limit``) and the rest of the target is not kept."""
MAX_HEAD_BYTES = 1024 * 1024
"""Bytes one request may send before its headers end (request line, headers, framing). Past it the
answer is 400 at once, while the client may still be sending (it may then see the connection reset
instead); below it a head too large for the bounds above is read to its end and answered cleanly."""


def envelope_answer(
    status: str, code: str, message: str, default_headers: Any = (), details: dict[str, Any] | None = None
) -> bytes:
    """A whole HTTP/1.1 answer (``status`` as ``"400 Bad Request"``) carrying the error envelope
    (``nosniff``, as every answer of the apps), closing the connection: what a protocol writes
    itself, before or instead of the app."""
    body = json.dumps({"error": {"code": code, "message": message, "details": details or {}}}).encode()
    head = [b"HTTP/1.1 " + status.encode() + b"\r\n"]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head += [
        b"content-type: application/json\r\n",
        # As every answer of the apps says: no browser may take it for another type.
        b"x-content-type-options: nosniff\r\n",
        b"content-length: " + str(len(body)).encode() + b"\r\n",
        b"connection: close\r\n\r\n",
    ]
    return b"".join(head) + body


def _default_headers(protocol: Any) -> Any:
    return getattr(getattr(protocol, "server_state", None), "default_headers", ())


class BoundedHead:
    """Mixin for a uvicorn HTTP protocol class refusing a head past the bounds above (``400``).

    The counts use httptools' callbacks (``on_header`` per header, a long one may come in pieces);
    over h11 they are never called and h11's own 16 KiB bound holds.
    """

    _header_bytes = 0
    _target_bytes = 0
    _refusal: tuple[str, str, str, dict[str, Any]] | None = None  # what the next refusal says, if not 400
    _head_bytes = 0  # bytes received since the request began, while its headers have not ended
    _reading_head = True
    _stalled_bytes = 0  # bytes received in a body since the parser last gave a piece of it, or a trailer

    def data_received(self, data: bytes) -> None:
        """Feed the parser, unless the request's head has gone past ``MAX_HEAD_BYTES``, or its body
        has sent that many bytes that were neither body nor a whole trailer."""
        if getattr(self, "parser", None) is None:  # h11, which bounds both itself
            pass
        elif self._reading_head:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._reading_head = False  # answered once; the connection closes
                if not self.transport.is_closing():  # type: ignore[attr-defined]
                    self.send_400_response("the request's head is too large")
                return
        else:
            self._stalled_bytes += len(data)
            if self._stalled_bytes > MAX_HEAD_BYTES:
                self._refuse_framing()
                return
        super().data_received(data)  # type: ignore[misc]

    def on_body(self, body: bytes) -> None:
        """A piece of the body came: the framing before it was what it took."""
        self._stalled_bytes = 0
        super().on_body(body)  # type: ignore[misc]

    def _refuse_framing(self) -> None:
        """``400`` (unless an answer has started: then the connection only closes) and close."""
        transport: Any = self.transport  # type: ignore[attr-defined]
        if transport.is_closing():
            return
        cycle = getattr(self, "cycle", None)
        if cycle is None or not cycle.response_started:
            message = "the request's chunked body has a chunk extension or trailer that is too large"
            transport.write(
                envelope_answer("400 Bad Request", "INVALID_INPUT", message, _default_headers(self))
            )
        if cycle is not None:
            cycle.disconnected = True  # the app's answer, if any, goes nowhere
        transport.close()

    def on_headers_complete(self) -> None:
        """The head ended: what follows is the body, which the app bounds. A target past
        ``MAX_TARGET_BYTES`` is refused here, as one the parser refused (``send_400_response``)."""
        self._reading_head = False
        if self._target_bytes > MAX_TARGET_BYTES:
            message = f"the request's target (its path and query) is longer than {MAX_TARGET_BYTES} bytes"
            self._refusal = ("414 URI Too Long", "REQUEST_TOO_LARGE", message, {"limit": MAX_TARGET_BYTES})
            raise ValueError(message)
        super().on_headers_complete()  # type: ignore[misc]

    def on_message_complete(self) -> None:
        """The request ended: the next one's head starts (on a kept-alive connection)."""
        super().on_message_complete()  # type: ignore[misc]
        self._reading_head, self._head_bytes, self._stalled_bytes = True, 0, 0

    def on_message_begin(self) -> None:
        """A new request: its headers' tally starts again."""
        self._header_bytes = self._target_bytes = 0
        super().on_message_begin()  # type: ignore[misc]

    def on_url(self, url: bytes) -> None:
        """Keep a piece of the target while it is within ``MAX_TARGET_BYTES``; past it nothing more
        is kept, and the head is refused when it ends (``on_headers_complete``): refused at once,
        the rest of the head still coming, the client saw the connection reset, not the ``414``."""
        self._target_bytes += len(url)
        if self._target_bytes <= MAX_TARGET_BYTES:
            super().on_url(url)  # type: ignore[misc]

    def on_header(self, name: bytes, value: bytes) -> None:
        """Keep a header, unless the request is past ``MAX_HEADERS`` or ``MAX_HEADER_BYTES``: an
        exception here ends the parse as one the parser refused, which ``send_400_response`` answers.
        """
        self._header_bytes += len(name) + len(value)
        if len(self.headers) >= MAX_HEADERS or self._header_bytes > MAX_HEADER_BYTES:  # type: ignore[attr-defined]
            raise ValueError("the request's headers are too many or too large")
        if not self._reading_head:
            # A trailer (after a chunked body): uvicorn appended it to the request's headers, which
            # the app reads after the body, where no check had seen it. Dropped, as RFC 9110 6.5.1 allows.
            self._stalled_bytes = 0
            return
        super().on_header(name, value)  # type: ignore[misc]

    def send_400_response(self, msg: str) -> None:
        """Answer a request that does not parse (``msg`` is uvicorn's text for it) and close."""
        transport: Any = self.transport  # type: ignore[attr-defined]
        status, code, message, details = self._refusal or (
            "400 Bad Request",
            "INVALID_INPUT",
            "the request is not valid HTTP",
            {},
        )
        answer = envelope_answer(status, code, message, _default_headers(self), details)
        transport.write(answer)
        transport.close()


class TargetHost:
    """Mixin for uvicorn's httptools protocol: a request whose target is absolute (``GET
    http://name/path``) has the target's authority as its ``Host``.

    RFC 9112 (3.2.2) has a server ignore ``Host`` then and take the target's host; uvicorn keeps the
    ``Host`` header and drops the target's authority, so ``GET http://evil.example/... Host:
    127.0.0.1`` passed every check of a foreign ``Host`` (coffer-api's guard, the MCP SDK's). The
    header is replaced here, before the request reaches the app: a target with a userinfo
    (``user@name``) or no authority gives a ``Host`` that those checks refuse.
    """

    def on_headers_complete(self) -> None:
        """Put the absolute target's authority in the place of the ``Host`` header(s)."""
        url: bytes = getattr(self, "url", b"/")
        scheme, sep, rest = url.partition(b"://") if url[:1] != b"/" else (b"", b"", b"")  # origin-form
        if sep and scheme.isalpha():
            authority = rest.split(b"/", 1)[0].split(b"?", 1)[0]
            headers: list[tuple[bytes, bytes]] = self.headers  # type: ignore[attr-defined]
            headers[:] = [(b"host", authority), *((k, v) for k, v in headers if k != b"host")]
        super().on_headers_complete()  # type: ignore[misc]


class ReadDeadlines:
    """Mixin for a uvicorn HTTP protocol class: ``class P(ReadDeadlines, HttpToolsProtocol)``."""

    head_timeout: float = 20.0
    """Seconds a request's head may take from its first byte (plus one per ``min_rate`` bytes)."""
    head_timeout_max: float = 40.0
    """The most seconds a head may take, however fast its bytes come."""
    body_timeout: float = 20.0
    """Seconds a request's body may take from the head's end (plus one per ``min_rate`` bytes)."""
    min_rate: float = 500.0
    """Bytes a second that earn one more second (``mod_reqtimeout``'s ``MinRate``)."""

    # Per connection: what is being timed ("head", "body" or None), since when, the bytes it
    # received, the cycle seen when the head began (a new one means the head was parsed), the timer.
    _phase: str | None = None
    _phase_start = 0.0
    _phase_bytes = 0
    _head_cycle: Any = None
    _deadline_timer: Any = None

    def data_received(self, data: bytes) -> None:
        """Start timing a request's head at its first byte; count what the phase received.

        The timer of a phase begun here is set only if the phase is still on once these bytes
        are parsed: a request whose head and body came in one piece (an agent's recall) ends
        both phases at once, and setting and cancelling two timers for it cost more than parsing it.
        """
        if self._phase is None and not self._transport().is_closing() and self._idle():
            self._start("head", timed=False)
        self._phase_bytes += len(data)
        super().data_received(data)  # type: ignore[misc]
        self._advance()
        if self._phase is not None and self._deadline_timer is None:
            self._schedule()

    def connection_made(self, transport: Any) -> None:
        """A new connection: its first request's head is timed from now (uvicorn held a connection
        that never sent a byte for ever; its keep-alive timer starts only after an answer)."""
        super().connection_made(transport)  # type: ignore[misc]
        self._start("head")

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection ended: nothing more to time."""
        self._stop()
        super().connection_lost(exc)  # type: ignore[misc]

    # -- phases ---------------------------------------------------------------------------------

    def _transport(self) -> Any:
        return getattr(self, "transport", None) or _CLOSED

    def _cycle(self) -> Any:
        return getattr(self, "cycle", None)

    def _idle(self) -> bool:
        """No request is being received: none yet, or the last one's body has ended."""
        cycle = self._cycle()
        return cycle is None or not cycle.more_body

    def _start(self, phase: str, *, timed: bool = True) -> None:
        self._stop()
        self._phase, self._phase_start, self._phase_bytes = phase, time.monotonic(), 0
        self._head_cycle = self._cycle()
        if timed:
            self._schedule()

    def _stop(self) -> None:
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        self._phase, self._deadline_timer = None, None

    def _advance(self) -> None:
        """Move on when what was received ended the head (to the body, timed by the caller) or the
        body (to nothing)."""
        if self._phase == "head" and self._cycle() is not self._head_cycle:
            self._start("body", timed=False)
        if self._phase == "body" and not self._cycle().more_body:
            self._stop()

    def _deadline(self) -> float:
        if self._phase == "head":
            allowed = min(self.head_timeout + self._phase_bytes / self.min_rate, self.head_timeout_max)
        else:
            allowed = self.body_timeout + self._phase_bytes / self.min_rate
        return self._phase_start + allowed

    def _schedule(self) -> None:
        delay = max(self._deadline() - time.monotonic(), 0.05)
        self._deadline_timer = self.loop.call_later(delay, self._check)  # type: ignore[attr-defined]

    def _check(self) -> None:
        """The deadline came: refuse the request, unless it earned more time or is held back by us."""
        self._deadline_timer = None
        if self._phase is None or self._transport().is_closing():
            return
        if getattr(self._transport(), "get_protocol", lambda: self)() is not self:
            self._phase = None  # upgraded (a WebSocket): the connection is another protocol's now
            return
        flow = getattr(self, "flow", None)
        if time.monotonic() < self._deadline():
            self._schedule()
        elif flow is not None and getattr(flow, "read_paused", False):
            self._phase_start = time.monotonic()  # the app has not taken what came; not the client's fault
            self._phase_bytes = 0
            self._schedule()
        else:
            self._time_out()

    def _time_out(self) -> None:
        phase, self._phase = self._phase, None
        cycle = self._cycle()
        transport = self._transport()
        # A late head's request has no cycle yet (``cycle`` is the one before, if any); a late body's
        # is ``cycle``. The 408 goes out only where a whole answer may: not after or into another
        # (an app may answer before the body came: a refusal, a GET that reads none).
        free = (cycle is None or cycle.response_complete) if phase == "head" else not cycle.response_started
        if free:
            message = f"the request's {phase} did not arrive in time (it came too slowly)"
            transport.write(
                envelope_answer("408 Request Timeout", "REQUEST_TIMEOUT", message, _default_headers(self))
            )
        if cycle is not None:
            cycle.disconnected = True  # the app's answer, if any, goes nowhere
        transport.close()


class WriteDeadline:
    """Mixin for a uvicorn HTTP protocol class: a client that stops reading an answer is cut off.

    uvicorn stops the app's sending while the connection's write buffer is full (``pause_writing``)
    and waits for the client to read, with no bound: a client that asked for an answer (an export,
    pipelined requests) and never read it held the connection, and the request's task blocked in
    its ``send``, for ever (and a server shutting down waited for it). Writing paused for
    ``send_timeout`` seconds with nothing read (nginx's ``send_timeout``: 60 s) aborts the
    connection: the app's ``send`` returns, its answer goes nowhere. A slow reader that reads at
    all (the buffer drains to uvicorn's low mark) restarts the clock.
    """

    send_timeout: float = 60.0
    """Seconds the write buffer may stay full with nothing read before the connection is aborted."""
    _write_timer: Any = None

    def pause_writing(self) -> None:
        """The write buffer is full: the client has that long to read some of it."""
        super().pause_writing()  # type: ignore[misc]
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.send_timeout, self._write_stalled)  # type: ignore[attr-defined]

    def resume_writing(self) -> None:
        """The client read: no deadline until the buffer is full again."""
        self._cancel_write_timer()
        super().resume_writing()  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection ended: nothing more to time."""
        self._cancel_write_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def _cancel_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _write_stalled(self) -> None:
        # Aborted, not closed: a close waits for the buffer to be sent, which the client never reads.
        self._write_timer = None
        self.transport.abort()  # type: ignore[attr-defined]


class _Closed:
    @staticmethod
    def is_closing() -> bool:
        return True


_CLOSED = _Closed()
