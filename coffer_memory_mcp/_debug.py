"""``COFFER_MCP_DEBUG_HANDSHAKE=1``: one stderr line per decision of ``coffer-mcp`` on stdio (which
path, which request was answered before the SDK, how many requests the end of input left running)."""

from __future__ import annotations

import os
import sys

DEBUG_ENV = "COFFER_MCP_DEBUG_HANDSHAKE"


def debug(message: str) -> None:
    """Write ``message`` to stderr when ``DEBUG_ENV`` is 1 (tests see the order of events by it)."""
    if os.environ.get(DEBUG_ENV) == "1":
        print(f"coffer-mcp handshake: {message}", file=sys.stderr, flush=True)
