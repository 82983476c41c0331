"""A project-level ``coffer`` MCP entry that replaces the one ``coffer agents install`` wrote.

Each agent lets a project define an MCP server of the same name, and inside that project it wins
over the user-level entry coffer installs (checked with the real CLIs: ``claude mcp list``, ``codex
mcp list`` and ``opencode debug config`` run in the project show the project's entry). Such an entry
is what ``claude mcp add coffer -- coffer-mcp`` (local scope, the default) leaves behind, or a
``.codex/config.toml`` / ``opencode.json`` written when coffer was registered by hand. Before,
``coffer agents status`` said "installed" and exit 0 there while the agent ran the stale entry.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from agent_configs import isolated_agent_homes
from conftest import CliRunner, make_repo

from coffer_memory._agents.homes import AgentHomes

STALE = "/old/venv/bin/coffer-mcp"


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentHomes:
    return isolated_agent_homes(tmp_path, monkeypatch)


def status(cli: CliRunner, agent: str, cwd: Path) -> tuple[int, str, list[str]]:
    text = cli("agents", "status", agent, "--no-check", "--cwd", str(cwd))
    as_json = json.loads(cli("agents", "status", agent, "--no-check", "--json", cwd=cwd).stdout)
    return text.returncode, text.stdout, as_json["notes"]


def claude_local_scope(homes: AgentHomes, project: Path, entry: dict[str, object]) -> None:
    """What ``claude mcp add coffer -- ...`` (local scope) writes into ``.claude.json``."""
    config = json.loads(homes.claude_json.read_text())
    config.setdefault("projects", {})[str(project)] = {"allowedTools": [], "mcpServers": {"coffer": entry}}
    homes.claude_json.write_text(json.dumps(config, indent=2))


def test_claude_local_scope_entry_is_reported_from_the_project_and_its_subfolders(
    cli: CliRunner, homes: AgentHomes, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "shop")
    elsewhere = make_repo(tmp_path / "other")
    assert cli("agents", "install", "claude-code", "--no-check").returncode == 0
    assert status(cli, "claude-code", repo)[0] == 0

    claude_local_scope(homes, repo, {"type": "stdio", "command": STALE, "args": [], "env": {}})
    # Installing again from inside the project says so too.
    again = cli("agents", "install", "claude-code", "--no-check", cwd=repo)
    assert again.returncode == 0 and "note: in this project Claude Code uses" in again.stdout
    (repo / "src" / "deep").mkdir(parents=True)
    for where in (repo, repo / "src" / "deep"):
        code, text, notes = status(cli, "claude-code", where)
        assert code == 1 and "not working yet" in text.splitlines()[0]
        assert f"runs {STALE}" in text and "local scope for" in text
        assert any(STALE in n for n in notes)
    # Another project is not affected.
    code, text, notes = status(cli, "claude-code", elsewhere)
    assert code == 0 and not notes

    # The same command as coffer's own entry changes nothing.
    own = json.loads(homes.claude_json.read_text())["mcpServers"]["coffer"]
    claude_local_scope(homes, repo, own)
    assert status(cli, "claude-code", repo)[0] == 0


def test_claude_local_scope_entry_of_the_main_checkout_counts_in_its_worktrees(
    cli: CliRunner, homes: AgentHomes, tmp_path: Path
) -> None:
    # `claude mcp add` run in a worktree (2.1.197) writes the entry under the main checkout's path.
    repo = make_repo(tmp_path / "shop")
    worktree = tmp_path / "shop-feature"
    subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "-q", "-b", "feature", str(worktree)], check=True
    )
    assert cli("agents", "install", "claude-code", "--no-check").returncode == 0
    claude_local_scope(homes, repo.resolve(), {"type": "stdio", "command": STALE, "args": [], "env": {}})
    code, text, _ = status(cli, "claude-code", worktree)
    assert code == 1 and f"runs {STALE}" in text


def test_claude_project_mcp_json_counts_unless_refused(
    cli: CliRunner, homes: AgentHomes, tmp_path: Path
) -> None:
    """Claude Code 2.1.332 runs a ``.mcp.json`` server in ``claude -p`` without approval, and the
    repository's shared settings approve it in a trusted folder (``test_agents_real_claude``): status said
    "installed" there, since it knew 2.1.197, where only the user's own settings approved one."""
    repo = make_repo(tmp_path / "shop")
    assert cli("agents", "install", "claude-code", "--no-check").returncode == 0
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"coffer": {"command": "coffer-mcp"}}}))
    code, text, _ = status(cli, "claude-code", repo)
    assert code == 1 and "run by `claude -p` unapproved" in text and "runs coffer-mcp" in text
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))
    code, text, _ = status(cli, "claude-code", repo)
    assert code == 1 and ".mcp.json (project scope, approved)" in text
    (repo / ".claude" / "settings.json").unlink()
    # The user's own local settings of the project: what the approval dialog writes.
    (repo / ".claude" / "settings.local.json").write_text(json.dumps({"enabledMcpjsonServers": ["coffer"]}))
    assert ".mcp.json (project scope, approved)" in status(cli, "claude-code", repo)[1]
    (repo / ".claude" / "settings.local.json").unlink()
    config = json.loads(homes.claude_json.read_text())
    config["projects"] = {str(repo): {"enabledMcpjsonServers": ["coffer"]}}
    homes.claude_json.write_text(json.dumps(config))
    assert ".mcp.json (project scope, approved)" in status(cli, "claude-code", repo)[1]
    # Refused (what rejecting it in Claude Code writes): Claude Code runs coffer's entry.
    (repo / ".claude" / "settings.local.json").write_text(json.dumps({"disabledMcpjsonServers": ["coffer"]}))
    assert status(cli, "claude-code", repo)[0] == 0


def test_codex_project_config_counts_when_the_project_is_trusted(
    cli: CliRunner, homes: AgentHomes, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "shop")
    assert cli("agents", "install", "codex", "--no-check").returncode == 0
    (repo / ".codex").mkdir()
    (repo / ".codex" / "config.toml").write_text(f'[mcp_servers.coffer]\ncommand = "{STALE}"\n')
    # An untrusted project's .codex/ is ignored by Codex: only the unreviewed hook stands in the way.
    assert not any(STALE in n for n in status(cli, "codex", repo)[2])
    config = homes.codex / "config.toml"
    config.write_text(config.read_text() + f'\n[projects."{repo.resolve()}"]\ntrust_level = "trusted"\n')
    _, text, notes = status(cli, "codex", repo)
    assert f"runs {STALE}" in text and "trusted project config" in text and any(STALE in n for n in notes)


def test_opencode_project_config_is_merged_over_the_global_entry(
    cli: CliRunner, homes: AgentHomes, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "shop")
    assert cli("agents", "install", "opencode", "--no-check").returncode == 0
    assert status(cli, "opencode", repo)[0] == 0
    folder = repo / ".opencode"
    folder.mkdir()
    # JSONC, as OpenCode reads it: comments and a trailing comma.
    (folder / "opencode.jsonc").write_text(
        '{\n  // registered by hand, long ago\n  "mcp": {"coffer": {"type": "local", "command": ["'
        + STALE
        + '"],},},\n}\n'
    )
    code, text, _ = status(cli, "opencode", repo)
    # OpenCode merges key by key: the global entry's environment (COFFER_HOME) stays.
    assert code == 1 and f"{STALE}; remove that entry" in text
    # coffer's own entry, switched off in this project: no server at all there.
    own = json.loads((homes.opencode_config / "opencode.json").read_text())["mcp"]["coffer"]
    (folder / "opencode.jsonc").write_text(json.dumps({"mcp": {"coffer": {**own, "enabled": False}}}))
    code, text, _ = status(cli, "opencode", repo)
    assert code == 1 and "runs no coffer-mcp" in text


def test_doctor_reports_a_project_entry_from_anywhere_once(
    cli: CliRunner, homes: AgentHomes, tmp_path: Path
) -> None:
    # `coffer agents status` reported the entry for its --cwd only; `coffer doctor` said "ok" while
    # Claude Code ran a stale server in the repository of one of the home's stores.
    repo = make_repo(tmp_path / "shop")
    assert cli("agents", "install", "claude-code", "--no-check").returncode == 0
    assert cli("remember", "deploys go out on Tuesdays", cwd=repo).returncode == 0
    claude_local_scope(homes, repo.resolve(), {"type": "stdio", "command": STALE, "args": [], "env": {}})
    (tmp_path / "elsewhere").mkdir()
    for where in (tmp_path / "elsewhere", repo):  # from outside, and from inside (found twice: said once)
        text = cli("doctor", cwd=where)
        lines = [line for line in text.stdout.splitlines() if STALE in line]
        assert text.returncode == 1 and "problems found" in text.stdout
        assert lines == [
            f"agent: claude-code: in {repo.resolve()} Claude Code uses the 'coffer' MCP entry of "
            f"{homes.claude_json} (local scope for {repo.resolve()}) instead of coffer's: it runs {STALE}; "
            "remove that entry to use coffer's"
        ], text.stdout
        report = json.loads(cli("doctor", "--json", cwd=where).stdout)
        assert [p for p in report["agent_problems"] if STALE in p] == [lines[0].removeprefix("agent: ")]
    # Once the entry is coffer's own command, the project is no problem.
    own = json.loads(homes.claude_json.read_text())["mcpServers"]["coffer"]
    claude_local_scope(homes, repo.resolve(), own)
    assert not [line for line in cli("doctor", cwd=repo).stdout.splitlines() if "MCP entry of" in line]
