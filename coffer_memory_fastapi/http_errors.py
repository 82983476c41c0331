"""``EnvelopeProtocol``: uvicorn's HTTP protocol, refusing a request it cannot parse with the envelope.

A request line or header that is not HTTP (an unknown method, a byte over 0x7F in the target, a
NUL in a header) never reaches the app: uvicorn answers it itself, in plain text. ``coffer-api``
serves with this protocol so that answer is ``400`` with ``{"error": {"code": "INVALID_INPUT",
...}}`` like every other refusal. The parser is uvicorn's own (httptools when installed, else h11).

httptools itself bounds neither the number nor the size of a request's headers (h11 stops at
16 KiB): a 200 KB header or 5,000 headers were taken and kept in memory. With httptools a
request past ``MAX_HEADERS`` headers or ``MAX_HEADER_BYTES`` of them is refused the same way, and
so is one that sends more than ``MAX_HEAD_BYTES`` before its headers end (a header that never ends).
A head or body sent too slowly (one byte a second) is ``408``, and an answer the client stops reading
aborts the connection after a minute (``coffer_memory._http_bounds``).
A request with an absolute target (``GET http://name/path``) is the target host's (``TargetHost``).
A connection past ``--max-connections`` held ones is answered ``503 TOO_MANY_CONNECTIONS`` and closed,
and what a connection sends once ``MAX_PIPELINED`` requests wait for their answers is held back
(``coffer_memory._http_conns``).
"""

from __future__ import annotations

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Parser
except ImportError:  # pragma: no cover - uvicorn's own fallback when httptools is missing
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Parser  # type: ignore[assignment]

from coffer_memory._http_bounds import (
    MAX_HEAD_BYTES,
    MAX_HEADER_BYTES,
    MAX_HEADERS,
    BoundedHead,
    ReadDeadlines,
    TargetHost,
    WriteDeadline,
)
from coffer_memory._http_conns import ConnectionLimit, PipelineBound

from . import balance

__all__ = ["MAX_HEADERS", "MAX_HEADER_BYTES", "MAX_HEAD_BYTES", "EnvelopeProtocol"]


class EnvelopeProtocol(
    ConnectionLimit,
    PipelineBound,
    TargetHost,
    BoundedHead,
    ReadDeadlines,
    WriteDeadline,
    balance.CountedConnections,
    _Parser,
):
    """uvicorn's HTTP protocol with its one plain-text answer replaced by the error envelope, a
    head past the bounds refused (``BoundedHead``), an absolute target's host taken for its ``Host``
    (``TargetHost``), a request whose head or body comes too slowly
    answered ``408 REQUEST_TIMEOUT`` (``ReadDeadlines``), a client that stops reading its answer cut
    off (``WriteDeadline``), requests queued ahead of their answers bounded (``PipelineBound``),
    its connections bounded (``ConnectionLimit``) and counted for
    ``coffer-api --workers N`` (``balance``)."""

    face = "coffer-api"
