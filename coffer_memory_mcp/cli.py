"""``coffer-mcp``: serve coffer's MCP tools over stdio (default) or streamable HTTP.

On stdio, stdout carries the protocol only; every log line goes to stderr.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCResponse,
    TextContent,
)
from pydantic import ValidationError

from coffer_memory import CofferError, MemoryService

from ._args import TOKEN_ENV, build_parser
from .server import build_server

__all__ = ["BearerTokenMiddleware", "build_parser", "main"]

log = logging.getLogger("coffer_memory_mcp")


class BearerTokenMiddleware:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Refuse a request without the token with 401; pass everything else through."""
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                body = b'{"error": {"code": "UNAUTHORIZED", "message": "missing or wrong bearer token"}}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="coffer"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _lone_surrogate_in(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def answer_to_refused(line: str) -> SessionMessage | None:
    """The answer to a request line the SDK's parser refused (None when no request id can be read).

    The SDK's stdio transport parses with pydantic, which refuses a lone surrogate escape
    (``"\\ud800"``) that Python's ``json`` reads; the server then logs the line and never answers,
    so the client waits forever. A ``tools/call`` gets an ``INVALID_INPUT`` tool error naming the
    argument, any other request a JSON-RPC error.
    """
    try:
        request = json.loads(line)
    except ValueError:
        return None
    if not isinstance(request, dict):
        return None
    request_id = request.get("id")
    if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
        return None  # a notification or garbage: there is no one to answer
    if not _lone_surrogate_in(request):
        error = ErrorData(code=INVALID_REQUEST, message="the request is not valid JSON-RPC")
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
    params = request.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    if request.get("method") != "tools/call" or not isinstance(arguments, dict):
        error = ErrorData(code=INVALID_PARAMS, message="INVALID_INPUT: a lone surrogate is not a character")
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
    where = next((k for k, v in arguments.items() if _lone_surrogate_in([k, v])), "arguments")
    where = where.encode("utf-8", "backslashreplace").decode("utf-8")
    text = f"INVALID_INPUT: {where} contains a lone surrogate, which is not a character"
    result = CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
    payload = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=request_id, result=payload))


class _AnswerRefused:
    """The stdio read stream, with lines the SDK refused answered (``answer_to_refused``) instead
    of handed to the server, which would drop them."""

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the dispatcher restores it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        """The next message or transport error the server should see."""
        while True:
            item: SessionMessage | Exception = await self._inner.receive()
            if isinstance(item, ValidationError):
                errors = item.errors()
                line = errors[0].get("input") if errors else None
                answer = answer_to_refused(line) if isinstance(line, str) else None
                if answer is not None:
                    await self._write.send(answer)
                    continue
            return item

    def __aiter__(self) -> _AnswerRefused:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Close the underlying stream."""
        await self._inner.aclose()

    async def __aenter__(self) -> _AnswerRefused:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def _serve_stdio(server: MCPServer, stdin: Any = None, stdout: Any = None) -> None:
    """What ``server.run("stdio")`` does, with refused requests answered.

    ``stdin``/``stdout`` replace the process's streams (``_stdio`` hands over the wire this way)."""
    from mcp.server.stdio import stdio_server

    # A private attribute: the SDK's own in-memory client reaches the low-level server the same
    # way, and the SDK notes that it is meant to become public.
    lowlevel = server._lowlevel_server
    async with stdio_server(stdin, stdout) as (read, write):
        await lowlevel.run(_AnswerRefused(read, write), write, lowlevel.create_initialization_options())


def _serve_http(server: MCPServer, host: str, port: int, token: str | None, log_level: str) -> None:
    import uvicorn

    app: Any = server.streamable_http_app(host=host)
    if token:
        app = BearerTokenMiddleware(app, token)
    elif host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving on %s without a token: anyone who can reach it can read and write memory", host)
    uvicorn.run(app, host=host, port=port, log_level=log_level.lower())


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``coffer-mcp`` until the client disconnects (stdio) or it is interrupted (HTTP)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=args.log_level, format="coffer-mcp %(levelname)s %(message)s"
    )
    try:
        service = MemoryService(args.home)
    except CofferError as exc:
        print(f"coffer-mcp: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    with service:
        # Index what was written while no server ran, without delaying the handshake.
        threading.Thread(target=service.startup_sweep, name="coffer-startup-sweep", daemon=True).start()
        server = build_server(service)
        try:
            if args.transport == "stdio":
                anyio.run(_serve_stdio, server)
            else:
                token = args.token or os.environ.get(TOKEN_ENV) or None
                _serve_http(server, args.host, args.port, token, args.log_level)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
