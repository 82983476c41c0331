"""What coffer gives agents: the session-start bundle, hook / MCP install and native-memory toggles."""

# The install machinery is imported on first use (PEP 562): ``coffer-hook`` imports
# ``agents.context`` at every session start and must not pay for tomlkit and the service.
import importlib
from typing import TYPE_CHECKING, Any

from .context import MAX_CONTEXT_CHARS, SEEDED_RULES, build_session_context

if TYPE_CHECKING:
    from .homes import AGENTS, CLAUDE_CODE, CODEX, OPENCODE, AgentHomes
    from .install import AgentChange, AgentStatus, hook_command, mcp_command
    from .service import Agents

_EXPORTS: dict[str, str] = {
    "AGENTS": ".homes",
    "CLAUDE_CODE": ".homes",
    "CODEX": ".homes",
    "OPENCODE": ".homes",
    "AgentHomes": ".homes",
    "AgentChange": ".install",
    "AgentStatus": ".install",
    "hook_command": ".install",
    "mcp_command": ".install",
    "Agents": ".service",
}

__all__ = [
    "AGENTS",
    "CLAUDE_CODE",
    "CODEX",
    "MAX_CONTEXT_CHARS",
    "OPENCODE",
    "SEEDED_RULES",
    "AgentChange",
    "AgentHomes",
    "AgentStatus",
    "Agents",
    "build_session_context",
    "hook_command",
    "mcp_command",
]


def __getattr__(name: str) -> Any:
    """Import an install-side export on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value
