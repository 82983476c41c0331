"""coffer-memory's MCP server: ``build_server(service)`` and the ``coffer-mcp`` console.

Needs the ``[mcp]`` extra (the official MCP Python SDK, 2.x).
"""

from .server import build_server

__all__ = ["build_server"]
