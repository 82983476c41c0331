"""Where each supported agent keeps its files, resolved from the environment at call time.

Every location is overridable the way the agents themselves allow (``CLAUDE_CONFIG_DIR``,
``CODEX_HOME``, ``XDG_CONFIG_HOME`` / ``XDG_DATA_HOME``), so tests never touch the real home.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs

from .._home import user_home
from ..vocabulary import AGENTS, CLAUDE_CODE, CODEX, OPENCODE, require_agent

__all__ = ["AGENTS", "CLAUDE_CODE", "CODEX", "OPENCODE", "AgentHomes", "require_agent"]


def _env_dir(env: Mapping[str, str], name: str, default: Path) -> Path:
    value = env.get(name)
    return Path(value).expanduser() if value else default


@attrs.frozen
class AgentHomes:
    """The agent directories for one environment (``os.environ`` unless given)."""

    claude: Path
    """``$CLAUDE_CONFIG_DIR`` or ``~/.claude``: settings.json, projects/ (transcripts)."""
    claude_json: Path
    """Claude Code's user-scope MCP file: ``~/.claude.json``, or ``$CLAUDE_CONFIG_DIR/.claude.json``."""
    codex: Path
    """``$CODEX_HOME`` (resolved, as Codex resolves it) or ``~/.codex``: config.toml, hooks.json, sessions/."""
    opencode_config: Path
    """``$XDG_CONFIG_HOME/opencode`` or ``~/.config/opencode``: opencode.json."""
    opencode_data: Path
    """``$XDG_DATA_HOME/opencode`` or ``~/.local/share/opencode``: opencode.db, storage/."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AgentHomes:
        """Resolve every agent directory from ``env`` (default ``os.environ``)."""
        env = os.environ if env is None else env
        home = Path(env["HOME"]) if env.get("HOME") else user_home()
        claude_dir = env.get("CLAUDE_CONFIG_DIR")
        claude = Path(claude_dir).expanduser() if claude_dir else home / ".claude"
        # With CLAUDE_CONFIG_DIR set, Claude Code keeps .claude.json inside that directory.
        claude_json = claude / ".claude.json" if claude_dir else home / ".claude.json"
        # Codex canonicalises $CODEX_HOME but not ~/.codex (codex-rs find_codex_home), and keys
        # its hook reviews by the path of hooks.json under it: resolve exactly when Codex does.
        codex_dir = env.get("CODEX_HOME")
        codex = Path(os.path.realpath(Path(codex_dir).expanduser())) if codex_dir else home / ".codex"
        xdg_config = _env_dir(env, "XDG_CONFIG_HOME", home / ".config")
        xdg_data = _env_dir(env, "XDG_DATA_HOME", home / ".local" / "share")
        return cls(
            claude=claude,
            claude_json=claude_json,
            codex=codex,
            opencode_config=xdg_config / "opencode",
            opencode_data=xdg_data / "opencode",
        )
