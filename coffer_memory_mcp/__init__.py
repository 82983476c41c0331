"""coffer-memory's MCP server: ``build_server(service)`` and the ``coffer-mcp`` console.

Needs the ``[mcp]`` extra (the official MCP Python SDK, 2.x). ``build_server`` is loaded on first
use: ``coffer-mcp``'s stdio entry answers the handshake before the SDK is imported (``_stdio``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import build_server

__all__ = ["build_server"]


def __getattr__(name: str) -> Any:
    if name == "build_server":
        from .server import build_server

        return build_server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
