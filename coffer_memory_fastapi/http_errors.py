"""``EnvelopeProtocol``: uvicorn's HTTP protocol, refusing a request it cannot parse with the envelope.

A request line or header that is not HTTP (an unknown method, a byte over 0x7F in the target, a
NUL in a header) never reaches the app: uvicorn answers it itself, in plain text. ``coffer-api``
serves with this protocol so that answer is ``400`` with ``{"error": {"code": "INVALID_INPUT",
...}}`` like every other refusal. The parser is uvicorn's own (httptools when installed, else h11).

httptools itself bounds neither the number nor the size of a request's headers (h11 stops at
16 KiB): a 200 KB header or 5,000 headers were taken and kept in memory. With httptools a
request past ``MAX_HEADERS`` headers or ``MAX_HEADER_BYTES`` of them is refused the same way, and
so is one that sends more than ``MAX_HEAD_BYTES`` before its headers end (a header that never ends).
"""

from __future__ import annotations

import json

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Parser
except ImportError:  # pragma: no cover - uvicorn's own fallback when httptools is missing
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Parser  # type: ignore[assignment]

from . import balance

MAX_HEADERS = 100
"""Headers one request may carry (browsers send about 20)."""
MAX_HEADER_BYTES = 64 * 1024
"""Bytes of header names and values one request may carry (about nginx's default)."""

MAX_HEAD_BYTES = 1024 * 1024
"""Bytes one request may send before its headers end (request line, headers, framing). Past it the
answer is 400 at once, while the client may still be sending (it may then see the connection reset
instead); below it a head too large for the bounds above is read to its end and answered cleanly."""
# httptools keeps a header (and the target) whole until it ends before calling on_header (on_url
# appends), so neither bound above applied to one header that never ends: 300 MB of it were held
# in memory, before any token check. h11 stops at 16 KiB itself.
_COUNTS_HEAD = _Parser.__name__ == "HttpToolsProtocol"

_BODY = json.dumps(
    {"error": {"code": "INVALID_INPUT", "message": "the request is not valid HTTP", "details": {}}}
).encode()


class EnvelopeProtocol(balance.CountedConnections, _Parser):
    """uvicorn's HTTP protocol with its one plain-text answer replaced by the error envelope (and
    its connections counted for ``coffer-api --workers N``, ``balance``)."""

    _header_bytes = 0
    _head_bytes = 0  # bytes received since the request began, while its headers have not ended
    _reading_head = True

    def data_received(self, data: bytes) -> None:
        """Feed the parser, unless the request's head has gone past ``MAX_HEAD_BYTES``."""
        if _COUNTS_HEAD and self._reading_head:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._reading_head = False  # answered once; the connection closes
                if not self.transport.is_closing():
                    self.send_400_response("the request's head is too large")
                return
        super().data_received(data)

    def on_headers_complete(self) -> None:
        """The head ended: what follows is the body, which the app bounds."""
        self._reading_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        """The request ended: the next one's head starts (on a kept-alive connection)."""
        super().on_message_complete()
        self._reading_head, self._head_bytes = True, 0

    def on_message_begin(self) -> None:
        """A new request: its headers' tally starts again."""
        self._header_bytes = 0
        super().on_message_begin()

    def on_header(self, name: bytes, value: bytes) -> None:
        """Keep a header, unless the request is past ``MAX_HEADERS`` or ``MAX_HEADER_BYTES``.

        httptools calls this per header (a long one may come in pieces); an exception here ends
        the parse as one the parser refused, which ``send_400_response`` answers.
        """
        self._header_bytes += len(name) + len(value)
        if len(self.headers) >= MAX_HEADERS or self._header_bytes > MAX_HEADER_BYTES:
            raise ValueError("the request's headers are too many or too large")
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        """Answer a request that does not parse (``msg`` is uvicorn's text for it) and close."""
        head = [b"HTTP/1.1 400 Bad Request\r\n"]
        head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
        head += [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(_BODY)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + _BODY)
        self.transport.close()
