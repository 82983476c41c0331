"""``coffer-mcp``: serve coffer's MCP tools over stdio (default) or streamable HTTP.

On stdio, stdout carries the protocol only; every log line goes to stderr.
"""

from __future__ import annotations

import argparse
import hmac
import logging
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import MCPServer

from coffer_memory import CofferError, MemoryService, __version__

from .server import build_server

__all__ = ["BearerTokenMiddleware", "build_parser", "main"]

TOKEN_ENV = "COFFER_MCP_TOKEN"
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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``coffer-mcp``."""
    parser = argparse.ArgumentParser(prog="coffer-mcp", description="coffer-memory's MCP server.")
    parser.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio")
    parser.add_argument("--home", help="coffer home (default: $COFFER_HOME or ~/.coffer)")
    parser.add_argument("--host", default="127.0.0.1", help="streamable-http: address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="streamable-http: port (8765)")
    parser.add_argument(
        "--token",
        default=None,
        help=f"streamable-http: require this bearer token (default: ${TOKEN_ENV}; none when unset)",
    )
    parser.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.add_argument("--version", action="version", version=f"coffer-mcp {__version__}")
    return parser


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
                server.run("stdio")
            else:
                token = args.token or os.environ.get(TOKEN_ENV) or None
                _serve_http(server, args.host, args.port, token, args.log_level)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
