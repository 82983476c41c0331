"""``BoundedHead``: uvicorn's HTTP protocol for ``coffer-mcp --transport streamable-http``, with the
bounds of ``coffer_memory._http_bounds`` on what a request may send before its headers end (how many
headers, how many bytes: ``400 INVALID_INPUT``) and on how long its head and body may take to arrive
(``408 REQUEST_TIMEOUT``), on how long an answer may wait for the client to read it, and on how
many connections it holds (``503 TOO_MANY_CONNECTIONS``), as ``coffer-api`` has them.

The MCP face bounded only the bytes before the headers end: 100,000 header lines of five bytes fit
in them, and httptools kept every one; a head or a body sent one byte a second held its connection
without end.
"""

from __future__ import annotations

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Parser
except ImportError:  # pragma: no cover - uvicorn's own fallback when httptools is missing
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Parser  # type: ignore[assignment]

from coffer_memory._http_bounds import MAX_HEAD_BYTES, MAX_HEADERS, ReadDeadlines, TargetHost, WriteDeadline
from coffer_memory._http_bounds import BoundedHead as _Bounds
from coffer_memory._http_conns import ConnectionLimit, PipelineBound

__all__ = ["MAX_HEADERS", "MAX_HEAD_BYTES", "BoundedHead"]


class BoundedHead(ConnectionLimit, PipelineBound, TargetHost, _Bounds, ReadDeadlines, WriteDeadline, _Parser):
    """uvicorn's HTTP protocol, refusing a head past the bounds and a request that arrives too slowly,
    cutting off a client that stops reading its answer (``WriteDeadline``), turning away a connection
    past ``--max-connections`` (``ConnectionLimit``), queueing at most ``MAX_PIPELINED`` requests
    ahead of their answers (``PipelineBound``); an absolute target's host is the request's
    ``Host`` (``TargetHost``)."""

    face = "coffer-mcp"
