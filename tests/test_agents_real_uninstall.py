"""After ``coffer agents uninstall`` the real agent CLIs start as before: each lists its MCP servers
(``<cli> mcp list``) with coffer's gone and the user's own still there. The user's config file is
byte-identical with no ``.bak`` left, unless the CLI rewrote it while coffer was installed (Claude
Code keeps its state in ``~/.claude.json``; OpenCode adds ``$schema``): then the ``.bak`` of the
file before install stays and uninstall names it. No empty folder of coffer's is left. The shared parts and how the
CLIs are found: ``agents_real``.
"""

from __future__ import annotations

import pytest
from agents_real import World, find_cli, needs, world

__all__ = ["world"]  # the fixture

# Per agent: its CLI and npm package, the user's config file (HOME-relative) naming one server of
# theirs, and the env that keeps the CLI offline and quiet.
CASES = {
    "claude-code": (
        "claude",
        "@anthropic-ai/claude-code",
        ".claude.json",
        '{\n  "mcpServers": {\n    "mine": {"type": "stdio", "command": "true", "args": []}\n  }\n}\n',
        {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"},
    ),
    "codex": (
        "codex",
        "@openai/codex",
        ".codex/config.toml",
        '# my config\nmodel = "o3"\n\n[mcp_servers.mine]\ncommand = "true"\n',
        {},
    ),
    "opencode": (
        "opencode",
        "opencode-ai",
        ".config/opencode/opencode.json",
        '{\n  "mcp": {\n    "mine": {"type": "local", "command": ["true"], "enabled": false}\n  }\n}\n',
        {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"},
    ),
}


@pytest.mark.parametrize(
    "agent", [pytest.param(a, marks=needs(c[0], c[1])) for a, c in CASES.items()], ids=list(CASES)
)
def test_the_cli_lists_the_users_servers_and_not_coffers_after_uninstall(world: World, agent: str) -> None:
    w = world
    cli_name, _, name, text, env = CASES[agent]
    cli = find_cli(cli_name)
    assert cli is not None
    config = w.home / name
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text)
    w.coffer("agents", "install", agent, "--no-check")
    listed = w.run([cli, "mcp", "list"], env).stdout
    assert "coffer" in listed and "mine" in listed, listed

    out = w.coffer("agents", "uninstall", agent)
    listed = w.run([cli, "mcp", "list"], env).stdout
    assert "coffer" not in listed and "mine" in listed, listed
    backups = [p for p in w.home.rglob("*.bak") if ".coffer" not in p.parts]  # ~/.coffer is coffer's
    if config.read_text() == text:
        assert backups == [], out
    else:  # the CLI rewrote its file as it ran (Claude Code's state, OpenCode's $schema)
        assert backups == [config.with_name(config.name + ".coffer.bak")] and backups[0].read_text() == text
        assert f"kept {backups[0]}" in out, out
        assert "coffer-mcp" not in config.read_text()
    folder = {"claude-code": ".claude", "codex": ".codex", "opencode": ".config/opencode/plugins"}[agent]
    assert not (w.home / folder).exists() or any((w.home / folder).iterdir())
