"""``BoundedHead``: uvicorn's HTTP protocol for ``coffer-mcp --transport streamable-http``, with a
bound on what a request may send before its headers end.

httptools (uvicorn's parser) keeps a header value, and the target, whole until it ends and bounds
neither: one header that never ended was held in memory, hundreds of megabytes per connection,
before the token was checked. Past ``MAX_HEAD_BYTES`` the answer is uvicorn's ``400`` at once and
the connection closes. (h11, uvicorn's fallback parser, stops at 16 KiB itself.)
"""

from __future__ import annotations

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Parser
except ImportError:  # pragma: no cover - uvicorn's own fallback when httptools is missing
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Parser  # type: ignore[assignment]

MAX_HEAD_BYTES = 1024 * 1024
"""Bytes one request may send before its headers end (request line, headers, framing)."""
_COUNTS_HEAD = _Parser.__name__ == "HttpToolsProtocol"


class BoundedHead(_Parser):
    """uvicorn's HTTP protocol, refusing a request whose head goes past ``MAX_HEAD_BYTES``."""

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
        """The head ended: what follows is the body."""
        self._reading_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        """The request ended: the next one's head starts (on a kept-alive connection)."""
        super().on_message_complete()
        self._reading_head, self._head_bytes = True, 0
