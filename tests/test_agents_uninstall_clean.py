"""``coffer agents install`` then ``uninstall`` as a careful user expects, run as the real ``coffer``
command with nothing but a temporary HOME (each agent's default folders, coffer's default home):

- on a fresh HOME, uninstall leaves no file, folder or ``.bak`` coffer made;
- where configs existed, they come back byte-identical and the ``.bak`` install kept goes; a ``.bak``
  that differs from the restored file (the user changed it since) stays, and the output says so;
- a ``coffer`` MCP entry of the user's own is not replaced without ``--force``, and uninstall puts it back;
- ``status`` shows the commands actually installed (none for the MCP server after ``--hooks-only``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_configs import CLAUDE_JSON, CLAUDE_SETTINGS, CODEX_CONFIG, CODEX_HOOKS, OPENCODE_JSON, pretty

SCRIPTS = Path(sys.executable).parent
AGENTS = ("claude-code", "codex", "opencode")


def run(home: Path, *args: str, rc: int = 0) -> subprocess.CompletedProcess[str]:
    """The real ``coffer`` as the user of ``home`` (no agent or coffer variables set)."""
    env = {"HOME": str(home), "PATH": f"{SCRIPTS}{os.pathsep}/usr/bin:/bin", "LANG": "C.UTF-8"}
    proc = subprocess.run([str(SCRIPTS / "coffer"), *args], env=env, capture_output=True, text=True)
    assert proc.returncode == rc, (proc.stdout, proc.stderr)
    return proc


def tree(home: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (``None``) under ``home``, coffer's own home left out."""
    return {
        str(p.relative_to(home)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(home.rglob("*"))
        if p.relative_to(home).parts[0] != ".coffer"
    }


def user_configs(home: Path) -> None:
    """The three agents' configs as a user has them (no coffer in them)."""
    files = {
        home / ".claude" / "settings.json": pretty(CLAUDE_SETTINGS),
        home / ".claude.json": pretty(CLAUDE_JSON),
        home / ".codex" / "config.toml": CODEX_CONFIG.encode(),
        home / ".codex" / "hooks.json": pretty(CODEX_HOOKS),
        home / ".config" / "opencode" / "opencode.json": pretty(OPENCODE_JSON),
    }
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "user"
    path.mkdir()
    return path


@pytest.mark.parametrize("agent", AGENTS)
def test_install_then_uninstall_on_a_fresh_home_leaves_nothing_behind(home: Path, agent: str) -> None:
    run(home, "agents", "install", agent, "--no-check")
    assert tree(home)  # the agent's folder and files are there
    out = run(home, "agents", "uninstall", agent).stdout
    assert tree(home) == {}, out
    assert "removed" in out


def test_uninstall_restores_the_users_files_byte_identical_and_drops_its_backups(home: Path) -> None:
    user_configs(home)
    before = tree(home)
    for agent in AGENTS:
        native = ("--disable-native-memory",) if agent != "opencode" else ()
        run(home, "agents", "install", agent, "--no-check", *native)
    # While coffer is installed, the user's files are kept beside them.
    assert (home / ".claude" / "settings.json.coffer.bak").read_bytes() == pretty(CLAUDE_SETTINGS)
    assert (home / ".codex" / "config.toml.coffer.bak").read_bytes() == CODEX_CONFIG.encode()
    outs = [run(home, "agents", "uninstall", agent).stdout for agent in AGENTS]
    assert tree(home) == before, outs


def test_a_backup_that_differs_from_the_restored_file_stays_and_is_named(home: Path) -> None:
    user_configs(home)
    settings = home / ".claude" / "settings.json"
    run(home, "agents", "install", "claude-code", "--no-check")
    edited = json.loads(settings.read_text())
    edited["theme"] = "dark"  # the user changes the file while coffer is installed
    settings.write_bytes(pretty(edited))
    change = json.loads(run(home, "agents", "uninstall", "claude-code", "--json").stdout)
    backup = settings.with_name("settings.json.coffer.bak")
    assert backup.read_bytes() == pretty(CLAUDE_SETTINGS)
    assert json.loads(settings.read_text()) == {**CLAUDE_SETTINGS, "theme": "dark"}
    assert change["kept_backups"] == [str(backup)]
    assert any(str(backup) in note for note in change["notes"]), change
    # ~/.claude.json was not changed since: restored exactly, its backup gone.
    assert not (home / ".claude.json.coffer.bak").exists()
    assert (home / ".claude.json").read_bytes() == pretty(CLAUDE_JSON)


def test_the_text_output_names_a_kept_backup(home: Path) -> None:
    user_configs(home)
    settings = home / ".claude" / "settings.json"
    run(home, "agents", "install", "claude-code", "--no-check")
    settings.write_bytes(settings.read_bytes().replace(b'"model": "opus"', b'"model": "sonnet"'))
    out = run(home, "agents", "uninstall", "claude-code").stdout
    assert f"{settings}.coffer.bak" in out and "kept" in out, out


@pytest.mark.parametrize("agent", AGENTS)
def test_a_backup_of_the_users_own_is_never_overwritten(home: Path, agent: str) -> None:
    """A user who kept ``settings.json.bak`` (or ``config.toml.bak``, ``opencode.json.bak``) by
    hand lost it: install wrote its own backup under that very name, and uninstall then removed
    it as one that repeats the restored file."""
    user_configs(home)
    theirs = {
        p: b"the user's own backup of " + p.name.encode() + b"\n"
        for p in list(home.rglob("*.json")) + list(home.rglob("*.toml"))
    }
    for path, data in list(theirs.items()):
        bak = path.with_name(path.name + ".bak")
        bak.write_bytes(data)
        theirs[bak] = theirs.pop(path)
    run(home, "agents", "install", agent, "--no-check")
    assert {p: p.read_bytes() for p in theirs} == theirs
    run(home, "agents", "uninstall", agent)
    assert {p: p.read_bytes() for p in theirs} == theirs


# -- a `coffer` MCP entry of the user's own ------------------------------------------------------
FOREIGN: dict[str, tuple[str, tuple[str, ...], Any]] = {
    "claude-code": (
        ".claude.json",
        ("mcpServers", "coffer"),
        {"type": "stdio", "command": "uvx", "args": ["x"]},
    ),
    "codex": (".codex/config.toml", ("mcp_servers", "coffer"), None),
    "opencode": (
        ".config/opencode/opencode.json",
        ("mcp", "coffer"),
        {"type": "local", "command": ["uvx", "x"]},
    ),
}
CODEX_FOREIGN = 'model = "o3"\n\n[mcp_servers.coffer]\ncommand = "uvx"\nargs = ["x"]\n'


def foreign_entry(home: Path, agent: str) -> Path:
    name, keys, value = FOREIGN[agent]
    path = home / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if value is None:
        path.write_text(CODEX_FOREIGN)
    else:
        path.write_bytes(pretty({"model": "x", keys[0]: {keys[1]: value}}))
    return path


@pytest.mark.parametrize("agent", AGENTS)
def test_a_foreign_coffer_entry_is_not_replaced_without_force(home: Path, agent: str) -> None:
    path = foreign_entry(home, agent)
    before = tree(home)
    proc = run(home, "agents", "install", agent, "--no-check", rc=1)
    assert "AGENT_CONFIG_INVALID" in proc.stderr and "--force" in proc.stderr and str(path) in proc.stderr
    assert "uvx" in proc.stderr  # what the user's entry runs
    assert tree(home) == before  # nothing written, no folder made
    status = run(home, "agents", "status", agent, "--no-check").stdout
    assert "not installed" in status and "--force" in status, status
    assert "nothing was written" not in status, status  # a status writes nothing, refuses nothing

    change = json.loads(run(home, "agents", "install", agent, "--no-check", "--force", "--json").stdout)
    assert change["status"]["mcp_registered"] is True
    assert any("replaced" in note and "uvx" in note for note in change["notes"]), change
    assert run(home, "agents", "install", agent, "--no-check").stdout.count("nothing to change") == 1
    run(home, "agents", "uninstall", agent)
    assert tree(home) == before


def test_force_says_so_in_the_text_output(home: Path) -> None:
    foreign_entry(home, "claude-code")
    out = run(home, "agents", "install", "claude-code", "--no-check", "--force").stdout
    assert "replaced" in out and "uvx" in out and "uninstall" in out, out


# -- status shows what is installed ----------------------------------------------------------------
@pytest.mark.parametrize("agent", ["claude-code", "codex", "opencode"])
def test_status_after_a_hooks_only_install_names_no_mcp_command(home: Path, agent: str) -> None:
    run(home, "agents", "install", agent, "--no-check", "--hooks-only")
    status = json.loads(
        run(home, "agents", "status", agent, "--no-check", "--json", rc=(1 if agent == "codex" else 0)).stdout
    )
    assert status["mcp_registered"] is False and status["mcp_command"] is None
    assert status["hook_command"] is not None and "coffer-hook" in status["hook_command"]
    # The SDK is here: the way to add the server is one install, no pip command.
    (note,) = [n for n in status["notes"] if "session hooks only" in n]
    assert f"`coffer agents install {agent}`" in note and "pip install" not in note, note
    text = run(home, "agents", "status", agent, "--no-check", rc=(1 if agent == "codex" else 0)).stdout
    assert "MCP command" not in text and "hook command" in text, text


def test_status_of_an_agent_not_installed_names_no_commands(home: Path) -> None:
    run(home, "agents", "install", "claude-code", "--no-check")  # coffer's home exists
    status = json.loads(run(home, "agents", "status", "codex", "--no-check", "--json").stdout)
    assert status["installed"] is False and status["mcp_command"] is None and status["hook_command"] is None
    text = run(home, "agents", "status", "codex", "--no-check").stdout
    assert "command" not in text, text


def test_status_shows_the_installed_mcp_command(home: Path) -> None:
    run(home, "agents", "install", "claude-code", "--no-check")
    status = json.loads(run(home, "agents", "status", "claude-code", "--no-check", "--json").stdout)
    assert status["mcp_command"] == str(SCRIPTS / "coffer-mcp")


def test_list_and_status_work_before_coffer_has_a_home_and_make_none(home: Path) -> None:
    # A new user looks before installing: nothing of coffer's exists yet, and looking makes nothing.
    lines = run(home, "agents", "list").stdout.splitlines()
    assert [line.split()[:2] for line in lines[2:]] == [[a, "no"] for a in AGENTS]
    assert run(home, "agents").stdout.splitlines() == lines
    assert run(home, "agents", "status", "codex", "--no-check").stdout.startswith(
        "Codex (codex): not installed"
    )
    status = json.loads(run(home, "agents", "status", "claude-code", "--json").stdout)
    assert status["installed"] is False and status["mcp_check"] is None
    assert list(home.iterdir()) == []  # no ~/.coffer


@pytest.mark.parametrize("agent", AGENTS)
def test_uninstall_after_coffers_home_was_deleted_makes_no_home(home: Path, agent: str) -> None:
    # The user removed ~/.coffer but not the agent's entries: uninstall removes them, and with no
    # registry there is nothing to record, so it must not create a home just to leave one behind.
    run(home, "agents", "install", agent, "--no-check")
    shutil.rmtree(home / ".coffer")
    out = run(home, "agents", "uninstall", agent).stdout
    # Without the record of what coffer created, emptied files stay, but coffer's entries go.
    assert not any(b"coffer" in data for data in tree(home).values() if data is not None), out
    assert not (home / ".coffer").exists()
