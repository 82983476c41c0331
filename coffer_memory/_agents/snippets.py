"""The MCP entry for clients coffer does not edit itself: Claude Desktop, Cursor, VS Code.

Each snippet is the client's documented format, filled with this install's ``coffer-mcp`` and the
coffer home (``COFFER_HOME`` when it is not the default), for the user to paste:

- Claude Desktop: ``mcpServers`` in ``claude_desktop_config.json`` (macOS and Windows only);
  https://modelcontextprotocol.io/docs/develop/connect-local-servers
- Cursor: ``mcpServers`` in ``~/.cursor/mcp.json`` (every project) or ``.cursor/mcp.json``;
  https://cursor.com/docs/mcp
- VS Code: ``servers`` (with ``"type": "stdio"``) in ``.vscode/mcp.json`` or the user profile's
  ``mcp.json`` (command "MCP: Open User Configuration");
  https://code.visualstudio.com/docs/copilot/reference/mcp-configuration
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from .._errors import InvalidInput, safe_echo
from .specs import MCP_SERVER_NAME, mcp_command, mcp_env

__all__ = ["SNIPPET_CLIENTS", "McpSnippet", "mcp_snippet"]


@attrs.frozen
class _Format:
    label: str
    key: str
    stdio_type: bool
    files: tuple[str, ...]
    source: str


_FORMATS: dict[str, _Format] = {
    "claude-desktop": _Format(
        "Claude Desktop",
        "mcpServers",
        False,
        (
            "~/Library/Application Support/Claude/claude_desktop_config.json (macOS)",
            r"%APPDATA%\Claude\claude_desktop_config.json (Windows)",
        ),
        "https://modelcontextprotocol.io/docs/develop/connect-local-servers",
    ),
    "cursor": _Format(
        "Cursor",
        "mcpServers",
        False,
        ("~/.cursor/mcp.json (every project)", ".cursor/mcp.json (one project)"),
        "https://cursor.com/docs/mcp",
    ),
    "vscode": _Format(
        "VS Code",
        "servers",
        True,
        (
            "the user profile's mcp.json (run 'MCP: Open User Configuration'; on Linux "
            "~/.config/Code/User/mcp.json)",
            ".vscode/mcp.json (one workspace)",
        ),
        "https://code.visualstudio.com/docs/copilot/reference/mcp-configuration",
    ),
}
SNIPPET_CLIENTS: tuple[str, ...] = tuple(_FORMATS)


@attrs.frozen
class McpSnippet:
    """coffer's MCP entry in one client's format, and where it goes."""

    client: str
    label: str
    files: tuple[str, ...]
    """Where the client reads it (merge ``config`` into the file's top-level object)."""
    config: dict[str, Any]
    source: str
    """The client's documentation of this format."""


def mcp_snippet(client: str, home: Path | None = None) -> McpSnippet:
    """coffer's MCP entry for ``client`` (``claude-desktop``, ``cursor``, ``vscode``)."""
    if client not in _FORMATS:
        raise InvalidInput(
            f"no MCP snippet for {safe_echo(client)!r}: known clients are {', '.join(_FORMATS)}",
            field="client",
            known=list(_FORMATS),
        )
    fmt = _FORMATS[client]
    entry: dict[str, Any] = {"type": "stdio"} if fmt.stdio_type else {}
    entry |= {"command": mcp_command(), "args": []}
    env = mcp_env(home)
    if env:
        entry["env"] = env
    return McpSnippet(
        client=client,
        label=fmt.label,
        files=fmt.files,
        config={fmt.key: {MCP_SERVER_NAME: entry}},
        source=fmt.source,
    )
