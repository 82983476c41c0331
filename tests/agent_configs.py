"""Realistic "before" config files of Claude Code, Codex and OpenCode, written into temp agent homes.

Shapes follow what each agent writes itself (hooks schema, user-scope ``mcpServers``, Codex
``config.toml`` with comments, OpenCode ``opencode.json``). No real secrets, no real paths.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from coffer_memory._agents.homes import AgentHomes

# The user's own hooks: one SessionStart hook, a formatter after edits, a desktop notification.
CLAUDE_SETTINGS: dict[str, Any] = {
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "model": "opus",
    "cleanupPeriodDays": 60,
    "env": {"DISABLE_TELEMETRY": "1", "BASH_DEFAULT_TIMEOUT_MS": "120000"},
    "permissions": {
        "allow": ["Bash(npm run test:*)", "Bash(git diff:*)", "Read(~/.zshrc)"],
        "deny": ["Read(./.env)", "Read(./secrets/**)"],
        "defaultMode": "default",
    },
    "hooks": {
        "SessionStart": [
            {
                "matcher": "startup",
                "hooks": [{"type": "command", "command": "$HOME/bin/print-today-todo.sh", "timeout": 5}],
            }
        ],
        "PostToolUse": [
            {
                "matcher": "Edit|MultiEdit|Write",
                "hooks": [
                    {
                        "type": "command",
                        "command": 'npx prettier --write "$CLAUDE_PROJECT_DIR"/src >/dev/null 2>&1 || true',
                        "timeout": 30,
                    }
                ],
            }
        ],
        "Notification": [
            {"hooks": [{"type": "command", "command": "notify-send 'Claude Code' 'Waiting for input'"}]}
        ],
    },
    "statusLine": {"type": "command", "command": "~/.claude/statusline.sh"},
    "enabledPlugins": {"commit-commands@claude-plugins-official": True},
}

# ~/.claude.json: Claude Code's own state plus user-scope and project-scope MCP servers.
CLAUDE_JSON: dict[str, Any] = {
    "numStartups": 212,
    "installMethod": "native",
    "autoUpdates": True,
    "mcpServers": {
        "playwright": {"type": "stdio", "command": "npx", "args": ["@playwright/mcp@latest"], "env": {}}
    },
    "projects": {
        "/home/dev/demo-repo": {
            "allowedTools": [],
            "mcpServers": {"sentry": {"type": "http", "url": "https://mcp.sentry.example/mcp"}},
            "enabledMcpjsonServers": [],
            "disabledMcpjsonServers": [],
            "hasTrustDialogAccepted": True,
        }
    },
}

CODEX_CONFIG = """\
# ~/.codex/config.toml (the user's own; comments and order must survive an install)
model = "gpt-5.1-codex"
model_reasoning_effort = "medium"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
notify = ["terminal-notifier", "-title", "Codex"]

[features]
web_search_request = true
# hooks are on by default in recent releases

[sandbox_workspace_write]
network_access = false  # keep the sandbox offline

[mcp_servers.context7]
command = "npx"
args = ["-y", "@upstash/context7-mcp"]
startup_timeout_sec = 20

[mcp_servers.context7.env]
CONTEXT7_TELEMETRY = "off"

[projects."/home/dev/demo-repo"]
trust_level = "trusted"

[tui]
notifications = true
"""

CODEX_HOOKS: dict[str, Any] = {
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [
                    {
                        "type": "command",
                        "command": "python3 ~/.codex/hooks/block_rm_rf.py",
                        "timeout": 10,
                        "statusMessage": "Checking shell command",
                    }
                ],
            }
        ],
        "Stop": [
            {
                "hooks": [
                    {
                        "type": "command",
                        "command": "terminal-notifier -title Codex -message 'Turn finished'",
                        "timeout": 5,
                    }
                ]
            }
        ],
    }
}

OPENCODE_JSON: dict[str, Any] = {
    "$schema": "https://opencode.ai/config.json",
    "theme": "opencode",
    "model": "anthropic/claude-sonnet-4-5",
    "mcp": {"context7": {"type": "remote", "url": "https://mcp.context7.example/mcp", "enabled": True}},
}


def pretty(data: Any) -> bytes:
    """JSON as the agents write it: 2-space indent, final newline."""
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


def write(path: Path, data: bytes | str, mode: int = 0o644) -> Path:
    """Write a config file (creating its folder) with ``mode``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    os.chmod(path, mode)
    return path


def claude_settings(homes: AgentHomes) -> Path:
    """Claude Code's settings.json."""
    return homes.claude / "settings.json"


def codex_config(homes: AgentHomes) -> Path:
    """Codex's config.toml."""
    return homes.codex / "config.toml"


def codex_hooks(homes: AgentHomes) -> Path:
    """Codex's hooks.json."""
    return homes.codex / "hooks.json"


def opencode_json(homes: AgentHomes) -> Path:
    """OpenCode's global opencode.json."""
    return homes.opencode_config / "opencode.json"


def opencode_plugin(homes: AgentHomes) -> Path:
    """Coffer's plugin in OpenCode's global plugin folder."""
    return homes.opencode_config / "plugins" / "coffer-memory.js"


def write_claude(homes: AgentHomes, settings: dict[str, Any] | None = None) -> dict[Path, bytes]:
    """The user's settings.json and ~/.claude.json; returns each file's bytes."""
    files = {
        claude_settings(homes): pretty(CLAUDE_SETTINGS if settings is None else settings),
        homes.claude_json: pretty(CLAUDE_JSON),
    }
    for path, data in files.items():
        write(path, data)
    return files


def write_codex(homes: AgentHomes, config: str = CODEX_CONFIG) -> dict[Path, bytes]:
    """The user's config.toml and hooks.json; returns each file's bytes."""
    files = {codex_config(homes): config.encode(), codex_hooks(homes): pretty(CODEX_HOOKS)}
    for path, data in files.items():
        write(path, data)
    return files


def write_opencode(homes: AgentHomes) -> dict[Path, bytes]:
    """The user's opencode.json; returns its bytes."""
    files = {opencode_json(homes): pretty(OPENCODE_JSON)}
    for path, data in files.items():
        write(path, data)
    return files


def read_json(path: Path) -> Any:
    """A JSON file's content."""
    return json.loads(path.read_text())


def isolated_agent_homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentHomes:
    """Point HOME and every agent variable into ``tmp_path``; the resolved homes."""
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    return AgentHomes.from_env()
