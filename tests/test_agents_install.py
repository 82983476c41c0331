"""Agent integration: install / uninstall / native-memory toggles on real temp config files."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from agent_configs import (
    CLAUDE_JSON,
    CLAUDE_SETTINGS,
    CODEX_CONFIG,
    CODEX_HOOKS,
    OPENCODE_JSON,
    claude_settings,
    codex_config,
    codex_hooks,
    isolated_agent_homes,
    opencode_json,
    opencode_plugin,
    pretty,
    read_json,
    write,
    write_claude,
    write_codex,
    write_opencode,
)
from conftest import make_repo

from coffer_memory import InvalidInput, MemoryService
from coffer_memory._agents import specs as specs_mod
from coffer_memory._agents.context import SEEDED_RULES
from coffer_memory._agents.homes import AgentHomes
from coffer_memory._agents.install import hook_command, is_coffer_hook
from coffer_memory._cli import main
from coffer_memory._errors import AgentConfigInvalid

SCRIPTS = Path(sys.executable).parent
START_MATCHER = "startup|resume|clear|compact"
CLAUDE_START_MATCHER = "startup|resume|clear|compact|fork"
CLAUDE_END_MATCHER = "clear|resume|logout|prompt_input_exit|other"


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentHomes:
    return isolated_agent_homes(tmp_path, monkeypatch)


def ours(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """coffer's hook entries among matcher groups."""
    return [h for g in groups for h in g["hooks"] if is_coffer_hook(h)]


def unchanged(files: dict[Path, bytes]) -> None:
    for path, data in files.items():
        assert path.read_bytes() == data, path


def mtimes(paths: list[Path]) -> list[int]:
    return [p.stat().st_mtime_ns for p in paths if p.exists()]


def audit(svc: MemoryService) -> list[dict[str, Any]]:
    return [e for e in reversed(svc.audit_events(limit=100)) if e["event"].startswith("agent_")]


# -- Claude Code -------------------------------------------------------------------------------
def test_claude_install_keeps_the_users_settings_and_is_idempotent(
    svc: MemoryService, homes: AgentHomes
) -> None:
    before = write_claude(homes)
    change = svc.install_agent("claude-code")
    assert set(change.changed) == set(before) and change.status.installed and change.status.up_to_date

    settings = read_json(claude_settings(homes))
    assert list(settings) == list(CLAUDE_SETTINGS)  # same keys, same order, nothing added at the top level
    assert {k: v for k, v in settings.items() if k != "hooks"} == {
        k: v for k, v in CLAUDE_SETTINGS.items() if k != "hooks"
    }
    hooks = settings["hooks"]
    assert list(hooks) == ["SessionStart", "PostToolUse", "Notification", "SessionEnd"]
    assert hooks["SessionStart"][0] == CLAUDE_SETTINGS["hooks"]["SessionStart"][0]  # the user's hook first
    assert hooks["PostToolUse"] == CLAUDE_SETTINGS["hooks"]["PostToolUse"]
    assert hooks["Notification"] == CLAUDE_SETTINGS["hooks"]["Notification"]
    command = hook_command("claude-code", svc.settings.home)
    entry = {"type": "command", "command": command, "timeout": 10}
    assert hooks["SessionStart"][1] == {"matcher": CLAUDE_START_MATCHER, "hooks": [entry]}
    assert hooks["SessionEnd"] == [{"matcher": CLAUDE_END_MATCHER, "hooks": [entry]}]
    assert command == f"{SCRIPTS / 'coffer-hook'} --agent claude-code --home {svc.settings.home}"
    assert "autoMemoryEnabled" not in settings  # native memory is left alone by default

    claude_json = read_json(homes.claude_json)
    assert list(claude_json) == list(CLAUDE_JSON)
    assert claude_json["mcpServers"] == {
        **CLAUDE_JSON["mcpServers"],
        "coffer": {
            "type": "stdio",
            "command": str(SCRIPTS / "coffer-mcp"),
            "args": [],
            "env": {"COFFER_HOME": str(svc.settings.home)},
        },
    }
    assert claude_json["projects"] == CLAUDE_JSON["projects"]

    # The previous bytes are kept beside each file; the file keeps its mode and 2-space style.
    for path, data in before.items():
        assert path.with_name(path.name + ".coffer.bak").read_bytes() == data
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        assert path.read_text().startswith('{\n  "')

    stamps = mtimes(
        [*before, *(p.with_name(p.name + ".coffer.bak") for p in before), svc.home / "agents.json"]
    )
    again = svc.install_agent("claude-code")
    assert again.changed == ()
    assert (
        mtimes([*before, *(p.with_name(p.name + ".coffer.bak") for p in before), svc.home / "agents.json"])
        == stamps
    )


def test_claude_uninstall_is_byte_identical(svc: MemoryService, homes: AgentHomes) -> None:
    before = write_claude(homes)
    svc.install_agent("claude-code", disable_native_memory=True)
    assert read_json(claude_settings(homes))["autoMemoryEnabled"] is False
    change = svc.uninstall_agent("claude-code")
    assert set(change.changed) == set(before) and not change.status.installed
    unchanged(before)
    assert svc.uninstall_agent("claude-code").changed == ()
    assert not change.status.disable_native_memory


def test_uninstall_keeps_edits_the_user_made_meanwhile(svc: MemoryService, homes: AgentHomes) -> None:
    write_claude(homes)
    svc.install_agent("claude-code")
    path = claude_settings(homes)
    edited = read_json(path)
    edited["theme"] = "dark"
    edited["hooks"]["Stop"] = [{"hooks": [{"type": "command", "command": "say done"}]}]
    write(path, pretty(edited))
    svc.uninstall_agent("claude-code")
    expected = {**CLAUDE_SETTINGS, "theme": "dark"}
    expected["hooks"] = {**CLAUDE_SETTINGS["hooks"], "Stop": edited["hooks"]["Stop"]}
    assert path.read_bytes() == pretty(expected)


def test_user_hooks_in_our_group_stay_and_a_stale_path_is_replaced(
    svc: MemoryService, homes: AgentHomes
) -> None:
    notify = {"type": "command", "command": "/usr/bin/notify-send 'session started'"}
    stale = {"type": "command", "command": "/old/venv/bin/coffer-hook --agent claude-code", "timeout": 10}
    settings = {"hooks": {"SessionStart": [{"matcher": START_MATCHER, "hooks": [notify, stale]}]}}
    write(claude_settings(homes), pretty(settings))

    status = svc.agent_status("claude-code")
    assert status.hooks_installed is False  # SessionEnd is missing
    svc.install_agent("claude-code")
    groups = read_json(claude_settings(homes))["hooks"]["SessionStart"]
    assert len(groups) == 1, "the stale entry is updated where it is, not duplicated"
    assert groups[0]["hooks"][0] == notify
    assert groups[0]["hooks"][1]["command"] == hook_command("claude-code", svc.settings.home)

    svc.uninstall_agent("claude-code")
    assert read_json(claude_settings(homes)) == {
        "hooks": {"SessionStart": [{"matcher": START_MATCHER, "hooks": [notify]}]}
    }


def test_duplicate_entries_collapse_to_one(svc: MemoryService, homes: AgentHomes) -> None:
    old = {"type": "command", "command": "/a/coffer-hook --agent claude-code"}
    settings = {
        "hooks": {
            "SessionStart": [
                {"matcher": "startup", "hooks": [old]},
                {"matcher": START_MATCHER, "hooks": [old]},
            ]
        }
    }
    write(claude_settings(homes), pretty(settings))
    svc.install_agent("claude-code")
    groups = read_json(claude_settings(homes))["hooks"]["SessionStart"]
    assert [g["matcher"] for g in groups] == ["startup"]  # the first is kept where the user put it
    assert len(ours(groups)) == 1


def test_an_updated_hook_path_makes_status_out_of_date(
    svc: MemoryService, homes: AgentHomes, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc.install_agent("claude-code")
    installed = hook_command("claude-code", svc.settings.home)
    moved = Path("/opt/other venv/bin")
    monkeypatch.setattr(specs_mod, "script_path", lambda name: moved / name)
    status = svc.agent_status("claude-code")
    assert status.installed and not status.up_to_date
    # status shows what is installed: the old path, until install writes the new one
    assert status.hook_command == installed
    svc.install_agent("claude-code")
    status = svc.agent_status("claude-code")
    assert status.hook_command is not None and status.hook_command.startswith(
        "'/opt/other venv/bin/coffer-hook'"
    )
    settings = read_json(claude_settings(homes))
    assert [h["command"] for h in ours(settings["hooks"]["SessionStart"])] == [status.hook_command]
    assert read_json(homes.claude_json)["mcpServers"]["coffer"]["command"] == str(moved / "coffer-mcp")
    assert svc.agent_status("claude-code").up_to_date


def test_broken_json_is_refused_and_left_untouched(svc: MemoryService, homes: AgentHomes) -> None:
    before = write_claude(homes)
    broken = b'{\n  "model": "opus",\n  "hooks": {\n'
    write(claude_settings(homes), broken)
    before[claude_settings(homes)] = broken
    with pytest.raises(AgentConfigInvalid) as err:
        svc.install_agent("claude-code")
    assert err.value.path == str(claude_settings(homes)) and "not valid JSON" in err.value.message
    unchanged(before)  # nothing written: not even the good ~/.claude.json
    assert not list(homes.claude.glob("*.bak"))
    assert not (svc.home / "agents.json").exists()
    status = svc.agent_status("claude-code")  # status reports it instead of failing
    assert not status.installed and any("not valid JSON" in n for n in status.notes)
    with pytest.raises(AgentConfigInvalid):
        svc.uninstall_agent("claude-code")
    unchanged(before)


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"[1, 2]", "JSON object"), (b'{"hooks": []}', "'hooks' is not an object"), (b"\xff\xfe", "UTF-8")],
)
def test_unusable_json_shapes_are_refused(
    svc: MemoryService, homes: AgentHomes, content: bytes, reason: str
) -> None:
    write(claude_settings(homes), content)
    with pytest.raises(AgentConfigInvalid, match=reason):
        svc.install_agent("claude-code")
    assert claude_settings(homes).read_bytes() == content


def test_claude_native_memory_restores_the_users_value(svc: MemoryService, homes: AgentHomes) -> None:
    before = write_claude(homes, {**CLAUDE_SETTINGS, "autoMemoryEnabled": True})
    change = svc.set_native_memory("claude-code", True)
    assert change.changed == (claude_settings(homes),) and change.status.disable_native_memory
    settings = read_json(claude_settings(homes))
    assert settings["autoMemoryEnabled"] is False and list(settings)[-1] == "autoMemoryEnabled"  # in place
    assert svc.set_native_memory("claude-code", True).changed == ()
    svc.set_native_memory("claude-code", False)
    unchanged(before)


def test_claude_native_memory_key_we_added_is_deleted(svc: MemoryService, homes: AgentHomes) -> None:
    before = write_claude(homes)
    svc.install_agent("claude-code", disable_native_memory=True)
    assert svc.agent_status("claude-code").disable_native_memory
    svc.install_agent("claude-code", disable_native_memory=False)
    settings = read_json(claude_settings(homes))
    assert "autoMemoryEnabled" not in settings and ours(settings["hooks"]["SessionEnd"])
    svc.uninstall_agent("claude-code")
    unchanged(before)


def test_a_native_memory_value_the_user_changed_is_theirs(svc: MemoryService, homes: AgentHomes) -> None:
    write_claude(homes)
    svc.set_native_memory("claude-code", True)
    path = claude_settings(homes)
    write(path, pretty({**read_json(path), "autoMemoryEnabled": True}))
    svc.set_native_memory("claude-code", False)
    assert read_json(path)["autoMemoryEnabled"] is True


def test_files_coffer_creates_are_0600_and_removed_on_uninstall(
    svc: MemoryService, homes: AgentHomes
) -> None:
    change = svc.install_agent("claude-code", disable_native_memory=True)
    assert set(change.changed) == {claude_settings(homes), homes.claude_json}
    for path in change.changed:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.read_text().endswith("}\n")
    assert stat.S_IMODE(homes.claude.stat().st_mode) == 0o700
    svc.uninstall_agent("claude-code")
    assert not claude_settings(homes).exists() and not homes.claude_json.exists()
    assert not list(homes.claude.glob("*.bak"))  # they held nothing but coffer's entries


def test_compact_tabbed_and_empty_json_files_round_trip(svc: MemoryService, homes: AgentHomes) -> None:
    compact = b'{"model":"opus","env":{"A":"1"}}'
    tabbed = b'{\n\t"numStartups": 3,\n\t"mcpServers": {}\n}\n'
    write(claude_settings(homes), compact)
    write(homes.claude_json, tabbed)
    svc.install_agent("claude-code")
    assert b"\n" not in claude_settings(homes).read_bytes()  # still one line
    assert homes.claude_json.read_text().startswith('{\n\t"numStartups": 3,\n\t"mcpServers": {\n\t\t"coffer"')
    svc.uninstall_agent("claude-code")
    assert claude_settings(homes).read_bytes() == compact and homes.claude_json.read_bytes() == tabbed

    write(claude_settings(homes), b"")
    svc.install_agent("claude-code")
    assert ours(read_json(claude_settings(homes))["hooks"]["SessionStart"])
    svc.uninstall_agent("claude-code")
    assert claude_settings(homes).read_bytes() == b""


def test_symlinked_settings_stay_a_symlink(svc: MemoryService, homes: AgentHomes, tmp_path: Path) -> None:
    target = write(tmp_path / "dotfiles" / "claude-settings.json", pretty(CLAUDE_SETTINGS))
    homes.claude.mkdir(parents=True)
    claude_settings(homes).symlink_to(target)
    svc.install_agent("claude-code")
    assert claude_settings(homes).is_symlink() and ours(read_json(target)["hooks"]["SessionStart"])
    assert (target.parent / "claude-settings.json.coffer.bak").read_bytes() == pretty(CLAUDE_SETTINGS)
    svc.uninstall_agent("claude-code")
    assert claude_settings(homes).is_symlink() and target.read_bytes() == pretty(CLAUDE_SETTINGS)


def test_uninstall_without_agents_json_still_removes_our_entries(
    svc: MemoryService, homes: AgentHomes
) -> None:
    before = write_claude(homes)
    svc.install_agent("claude-code")
    (svc.home / "agents.json").unlink()
    assert svc.agent_status("claude-code").installed  # recognised from the files alone
    svc.uninstall_agent("claude-code")
    unchanged(before)


# -- Codex -------------------------------------------------------------------------------------
def test_codex_install_keeps_comments_and_uninstall_is_byte_identical(
    svc: MemoryService, homes: AgentHomes
) -> None:
    before = write_codex(homes)
    change = svc.install_agent("codex", disable_native_memory=True)
    assert set(change.changed) == set(before)
    text = codex_config(homes).read_text()
    for line in CODEX_CONFIG.splitlines():
        assert line in text.splitlines()  # every original line (comments included) is still there
    config = tomllib.loads(text)
    assert config["features"] == {"web_search_request": True, "hooks": True, "memories": False}
    assert config["memories"] == {"generate_memories": False}
    assert "mcp_optional_startup_grace_ms" not in config  # coffer-mcp is ready within Codex's default
    assert config["mcp_servers"]["coffer"] == {
        "command": str(SCRIPTS / "coffer-mcp"),
        "args": [],
        "env": {"COFFER_HOME": str(svc.settings.home)},
    }
    assert config["mcp_servers"]["context7"] == tomllib.loads(CODEX_CONFIG)["mcp_servers"]["context7"]
    hooks = read_json(codex_hooks(homes))["hooks"]
    assert list(hooks) == ["PreToolUse", "Stop", "SessionStart"]  # no SessionEnd: Codex has none
    assert {k: hooks[k] for k in ("PreToolUse", "Stop")} == CODEX_HOOKS["hooks"]
    assert hooks["SessionStart"] == [
        {
            "matcher": START_MATCHER,
            "hooks": [
                {"type": "command", "command": hook_command("codex", svc.settings.home), "timeout": 10}
            ],
        }
    ]
    assert svc.install_agent("codex").changed == ()

    change = svc.uninstall_agent("codex")
    assert set(change.changed) == set(before)
    unchanged(before)


def test_codex_native_memory_restores_the_users_values(svc: MemoryService, homes: AgentHomes) -> None:
    config = "# mine\n[features]\nmemories = true  # I like them\n\n[memories]\nuse_memories = true\n"
    before = write_codex(homes, config)
    svc.set_native_memory("codex", True)
    assert codex_config(homes).read_text() == (
        "# mine\n[features]\nmemories = false  # I like them\n\n[memories]\nuse_memories = true\n"
        "generate_memories = false\n"
    )
    assert svc.set_native_memory("codex", True).changed == ()
    svc.set_native_memory("codex", False)
    unchanged(before)


def test_codex_hooks_switched_off_by_the_user_stay_off(svc: MemoryService, homes: AgentHomes) -> None:
    write_codex(homes, "[features]\nhooks = false\n")
    svc.install_agent("codex")
    assert tomllib.loads(codex_config(homes).read_text())["features"]["hooks"] is False
    status = svc.agent_status("codex")
    assert status.installed and status.up_to_date
    assert any("features.hooks = false" in note and "Codex runs no hooks" in note for note in status.notes)


def test_codex_startup_grace_is_left_to_codex_and_the_user(svc: MemoryService, homes: AgentHomes) -> None:
    # coffer-mcp answers its tool list before Codex's default grace (1 s) runs out, so coffer sets
    # no grace of its own: a global 0 would make every slow MCP server of the user delay Codex.
    before = write_codex(homes, "[features]\nweb_search_request = true\n")
    svc.install_agent("codex")
    assert "mcp_optional_startup_grace_ms" not in codex_config(homes).read_text()
    svc.uninstall_agent("codex")
    unchanged(before)
    write_codex(homes, "mcp_optional_startup_grace_ms = 5000\n")
    svc.install_agent("codex")
    assert tomllib.loads(codex_config(homes).read_text())["mcp_optional_startup_grace_ms"] == 5000
    status = svc.agent_status("codex")
    assert status.installed and status.mcp_registered and status.up_to_date
    assert not [n for n in status.notes if "mcp_optional_startup_grace_ms" in n]


def test_codex_creates_what_is_missing_and_removes_it_again(svc: MemoryService, homes: AgentHomes) -> None:
    write(codex_config(homes), 'model = "gpt-5.1-codex"\n')
    svc.install_agent("codex", disable_native_memory=True)
    config = tomllib.loads(codex_config(homes).read_text())
    assert config["features"] == {"hooks": True, "memories": False} and "coffer" in config["mcp_servers"]
    assert stat.S_IMODE(codex_hooks(homes).stat().st_mode) == 0o600
    svc.uninstall_agent("codex")
    assert codex_config(homes).read_text() == 'model = "gpt-5.1-codex"\n'
    assert not codex_hooks(homes).exists()


def test_codex_inline_tables_are_extended_inline(svc: MemoryService, homes: AgentHomes) -> None:
    config = 'mcp_servers = { docs = { command = "docs-mcp" } }\nfeatures = { web_search_request = true }\n'
    before = write_codex(homes, config)
    svc.install_agent("codex", disable_native_memory=True)
    parsed = tomllib.loads(codex_config(homes).read_text())
    assert parsed["features"] == {"web_search_request": True, "hooks": True, "memories": False}
    assert set(parsed["mcp_servers"]) == {"docs", "coffer"}
    svc.uninstall_agent("codex")
    unchanged(before)


def test_codex_passes_the_api_key_variables_coffer_reads_on_to_coffer_mcp(
    svc: MemoryService, homes: AgentHomes
) -> None:
    """Codex starts MCP servers with HOME, PATH and a few more, not its environment: the keys that
    coffer's [llm] and [embedding] read from the environment must be named in ``env_vars``
    (checked with the real Codex in tests/test_agents_real_codex.py). Claude Code and OpenCode pass
    their whole environment on, so their entries name nothing."""
    before = write_codex(homes)
    write_claude(homes)
    config = svc.home / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[llm]\nprovider = "openai"\nmodel = "m"\napi_key_env = "OPENROUTER_API_KEY"\n')
    svc.install_agent("codex")
    svc.install_agent("claude-code")
    entry = tomllib.loads(codex_config(homes).read_text())["mcp_servers"]["coffer"]
    assert entry["env_vars"] == ["OPENROUTER_API_KEY"]
    assert "env_vars" not in json.dumps(json.loads(homes.claude_json.read_text()))
    assert svc.agent_status("codex").up_to_date
    # Another key in the config: the entry is out of date until installed again.
    config.write_text(config.read_text() + '[embedding]\napi_key_env = "EMBED_KEY"\n')
    assert not svc.agent_status("codex").up_to_date
    assert svc.install_agent("codex").changed == (codex_config(homes),)
    entry = tomllib.loads(codex_config(homes).read_text())["mcp_servers"]["coffer"]
    assert entry["env_vars"] == ["EMBED_KEY", "OPENROUTER_API_KEY"]
    svc.uninstall_agent("codex")
    unchanged(before)


def test_keys_the_user_added_to_coffers_mcp_entry_stay(
    svc: MemoryService, homes: AgentHomes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex documents per-server keys (``startup_timeout_sec``, ``enabled_tools``, per-tool
    ``approval_mode``), OpenCode a ``timeout``: before, status called an entry holding one "out of
    date" and the next install dropped it."""
    write_codex(homes)
    write_opencode(homes)
    svc.install_agent("codex")
    svc.install_agent("opencode")
    config = codex_config(homes)
    lines = config.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("env = {COFFER_HOME")) + 1
    mine = 'startup_timeout_sec = 30  # mine\n\n[mcp_servers.coffer.tools.coffer__remember]\napproval_mode = "approve"\n'
    config.write_text("".join([*lines[:at], mine, *lines[at:]]))
    config_json = read_json(opencode_json(homes))
    config_json["mcp"]["coffer"]["timeout"] = 20000
    opencode_json(homes).write_text(json.dumps(config_json, indent=2))
    for agent in ("codex", "opencode"):
        assert svc.agent_status(agent).up_to_date
        assert svc.install_agent(agent).changed == ()
    # coffer moved: its keys are updated, the user's stay.
    moved = Path("/opt/other venv/bin")
    monkeypatch.setattr(specs_mod, "script_path", lambda name: moved / name)
    svc.install_agent("codex")
    svc.install_agent("opencode")
    entry = tomllib.loads(config.read_text())["mcp_servers"]["coffer"]
    assert entry["command"] == str(moved / "coffer-mcp") and entry["startup_timeout_sec"] == 30
    assert entry["tools"] == {"coffer__remember": {"approval_mode": "approve"}}
    oc_entry = read_json(opencode_json(homes))["mcp"]["coffer"]
    assert oc_entry["command"] == [str(moved / "coffer-mcp")] and oc_entry["timeout"] == 20000
    # Uninstall removes the whole entry, the user's keys in it too: it was coffer's.
    svc.uninstall_agent("codex")
    assert "coffer" not in tomllib.loads(config.read_text()).get("mcp_servers", {})


def test_broken_toml_is_refused_and_left_untouched(svc: MemoryService, homes: AgentHomes) -> None:
    before = write_codex(homes, "[features\nhooks = true\n")
    with pytest.raises(AgentConfigInvalid, match="not valid TOML") as err:
        svc.install_agent("codex")
    assert err.value.path == str(codex_config(homes))
    unchanged(before)


# -- OpenCode ----------------------------------------------------------------------------------
def test_opencode_gets_the_mcp_entry_and_the_rules_plugin(svc: MemoryService, homes: AgentHomes) -> None:
    before = write_opencode(homes)
    change = svc.install_agent("opencode")
    assert change.changed == (opencode_json(homes), opencode_plugin(homes))
    config = read_json(opencode_json(homes))
    assert config["mcp"] == {
        **OPENCODE_JSON["mcp"],
        "coffer": {
            "type": "local",
            "command": [str(SCRIPTS / "coffer-mcp")],
            "enabled": True,
            "environment": {"COFFER_HOME": str(svc.settings.home)},
        },
    }
    status = change.status
    assert status.installed and status.up_to_date and status.hooks_supported and status.hooks_installed
    assert status.hook_command == f"{SCRIPTS / 'coffer-hook'} --agent opencode --home {svc.settings.home}"
    assert status.files == (opencode_plugin(homes), opencode_json(homes))
    assert not status.native_memory_supported and not status.notes
    with pytest.raises(InvalidInput, match="no native memory"):
        svc.set_native_memory("opencode", True)
    with pytest.raises(InvalidInput, match="no native memory"):
        svc.install_agent("opencode", disable_native_memory=True)
    svc.uninstall_agent("opencode")
    unchanged(before)
    assert not opencode_plugin(homes).parent.exists()


# -- commands, registry, audit -----------------------------------------------------------------
def test_default_home_needs_no_home_argument(homes: AgentHomes) -> None:
    home = Path(os.environ["HOME"]) / ".coffer"
    with MemoryService(home) as svc:
        svc.install_agent("claude-code")
        assert (
            svc.agent_status("claude-code").hook_command == f"{SCRIPTS / 'coffer-hook'} --agent claude-code"
        )
    assert read_json(homes.claude_json)["mcpServers"]["coffer"]["env"] == {}


def test_hook_command_quotes_a_path_with_spaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "/opt/my tools/bin/python")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    command = hook_command("codex")
    assert command == "'/opt/my tools/bin/coffer-hook' --agent codex"
    assert is_coffer_hook({"command": command})
    assert not is_coffer_hook({"command": "/usr/bin/notify-send coffer-hook"})
    assert not is_coffer_hook({"command": "echo 'unbalanced"})


def test_unknown_agent_names_the_known_ones(svc: MemoryService) -> None:
    for call in (svc.agent_status, svc.uninstall_agent, svc.install_agent):
        with pytest.raises(InvalidInput) as err:
            call("cursor")
        assert err.value.details["known"] == ["claude-code", "codex", "opencode"]


def test_agents_json_loader_is_tolerant_but_never_forgets(svc: MemoryService, homes: AgentHomes) -> None:
    assert [s.installed for s in svc.agents()] == [False, False, False]
    registry = svc.home / "agents.json"
    write(registry, '{"agents": {"claude-code": {}, "codex": {"files": {}}}}')
    assert [s.disable_native_memory for s in svc.agents()] == [False, False, False]
    registry.unlink()
    assert svc.install_agent("codex", disable_native_memory=True).status.disable_native_memory
    assert stat.S_IMODE(registry.stat().st_mode) == 0o600  # it holds copies of config files
    assert json.loads(registry.read_text())["agents"]["codex"]["disable_native_memory"] is True
    write(registry, "not json")
    with pytest.raises(AgentConfigInvalid, match=r"agents\.json"):
        svc.uninstall_agent("codex")
    with pytest.raises(AgentConfigInvalid):
        svc.agents()
    assert registry.read_text() == "not json"


def test_audit_rows_carry_only_the_agent_and_the_files(svc: MemoryService, homes: AgentHomes) -> None:
    write_claude(homes)
    svc.install_agent("claude-code", disable_native_memory=True)
    svc.install_agent("claude-code")  # nothing changed: no row
    svc.set_native_memory("claude-code", False)
    svc.uninstall_agent("claude-code")
    rows = audit(svc)
    assert [r["event"] for r in rows] == [
        "agent_hook_installed",
        "agent_native_memory_disabled",
        "agent_native_memory_restored",
        "agent_hook_uninstalled",
    ]
    for row in rows:
        assert row["store"] is None and set(row["details"]) == {"agent", "files"}
        assert row["details"]["agent"] == "claude-code"
    settings, claude_json = str(claude_settings(homes)), str(homes.claude_json)
    assert [r["details"]["files"] for r in rows] == [
        [settings, claude_json],
        [settings],
        [settings],
        [settings, claude_json],
    ]


# -- end to end: the installed command, run the way the agent runs it -------------------------
def _run_installed(command: str, agent: str, cwd: Path, tmp_path: Path) -> dict[str, Any]:
    payload = {
        "session_id": "5f0c2a8e-1b7d-4e3a-9c6f-2d8b1a0e7c41",
        "transcript_path": None,
        "cwd": str(cwd),
        "hook_event_name": "SessionStart",
        "source": "startup",
        "model": "some-model",
        "permission_mode": "default",
    }
    env = {k: v for k, v in os.environ.items() if k != "COFFER_HOME"}  # --home is baked into the command
    proc = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(payload).encode(),
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


@pytest.mark.skipif(not (SCRIPTS / "coffer-hook").exists(), reason="coffer-hook is not installed")
def test_installed_hooks_give_the_rules_at_session_start(
    svc: MemoryService, homes: AgentHomes, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "project")
    svc.append_rule("Run make lint before every commit.", cwd=repo)
    svc.append_rule("Answer in British English.", store="global")
    write_claude(homes)
    write_codex(homes)
    svc.install_agent("claude-code")
    svc.install_agent("codex")
    claude_cmd = ours(read_json(claude_settings(homes))["hooks"]["SessionStart"])[0]["command"]
    codex_cmd = ours(read_json(codex_hooks(homes))["hooks"]["SessionStart"])[0]["command"]
    for command, agent in ((claude_cmd, "claude-code"), (codex_cmd, "codex")):
        out = _run_installed(command, agent, repo, tmp_path)
        assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
        bundle = out["hookSpecificOutput"]["additionalContext"]
        marks = [
            bundle.index("make lint"),
            bundle.index("British English"),
            bundle.index(SEEDED_RULES[0][:40]),
            bundle.index(SEEDED_RULES[1][:40]),
        ]
        assert marks == sorted(marks), bundle


# -- CLI ---------------------------------------------------------------------------------------
def test_cli_install_status_list_uninstall(
    svc: MemoryService, homes: AgentHomes, capsys: pytest.CaptureFixture[str]
) -> None:
    before = write_claude(homes)
    home = str(svc.home)
    assert main(["--home", home, "agents", "install", "claude-code", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["agent"] == "claude-code" and out["action"] == "install"
    assert sorted(out["changed"]) == sorted(str(p) for p in before) and out["status"]["installed"] is True

    assert main(["--home", home, "agents", "install", "claude-code"]) == 0
    assert "nothing to change" in capsys.readouterr().out

    assert main(["--home", home, "agents", "native-memory", "claude-code", "--disable"]) == 0
    assert str(claude_settings(homes)) in capsys.readouterr().out

    assert main(["--home", home, "agents", "status", "claude-code"]) == 0
    text = capsys.readouterr().out
    assert "installed" in text and "switched off by coffer" in text and str(homes.claude_json) in text

    assert main(["--home", home, "agents", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["agent", "installed", "hooks", "mcp", "native", "memory", "off"]
    assert lines[2].split() == ["claude-code", "yes", "yes", "yes", "yes"]
    assert lines[4].split() == ["opencode", "no", "no", "no", "n/a"]

    assert main(["--home", home, "agents", "uninstall", "claude-code"]) == 0
    assert "uninstalled; changed:" in capsys.readouterr().out
    unchanged(before)


def test_cli_reports_a_broken_file(
    svc: MemoryService, homes: AgentHomes, capsys: pytest.CaptureFixture[str]
) -> None:
    write(claude_settings(homes), "{oops")
    assert main(["--home", str(svc.home), "agents", "install", "claude-code"]) == 1
    err = capsys.readouterr().err
    assert "AGENT_CONFIG_INVALID" in err and str(claude_settings(homes)) in err
    assert main(["--home", str(svc.home), "agents", "install", "opencode", "--json"]) == 0
    capsys.readouterr()
    assert main(["--home", str(svc.home), "agents", "native-memory", "opencode", "--disable", "--json"]) == 1
    assert json.loads(capsys.readouterr().err)["error"]["code"] == "INVALID_INPUT"


def test_coffer_agents_as_a_real_process(tmp_home: Path, homes: AgentHomes) -> None:
    before = write_codex(homes)
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    coffer = str(SCRIPTS / "coffer")
    proc = subprocess.run(
        [coffer, "agents", "install", "codex", "--json"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"]["hooks_installed"] is True
    proc = subprocess.run([coffer, "agents", "list", "--json"], env=env, capture_output=True, text=True)
    assert [a["installed"] for a in json.loads(proc.stdout)] == [False, True, False]
    proc = subprocess.run([coffer, "agents", "uninstall", "codex"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and str(codex_config(homes)) in proc.stdout
    unchanged(before)


# -- the user's JSON style ---------------------------------------------------------------------
STYLED = {"model": "opus", "env": {"A": "1"}, "permissions": {"allow": ["Bash(ls)"]}}


@pytest.mark.parametrize(
    ("style", "raw"),
    [
        ("compact", json.dumps(STYLED, separators=(",", ":")).encode()),
        ("compact, spaced", (json.dumps(STYLED) + "\n").encode()),
        ("2 spaces", json.dumps(STYLED, indent=2).encode()),
        ("4 spaces", (json.dumps(STYLED, indent=4) + "\n").encode()),
        ("tabs", (json.dumps(STYLED, indent="\t") + "\n").encode()),
        ("unindented lines", b'{\n"model": "opus",\n"env": {\n"A": "1"\n}\n}\n'),
        ("ascii escapes", b'{\n  "name": "caf\\u00e9 \\u4e2d"\n}\n'),
    ],
)
def test_install_keeps_the_users_json_style(
    svc: MemoryService, homes: AgentHomes, style: str, raw: bytes
) -> None:
    write(claude_settings(homes), raw)
    svc.install_agent("claude-code")
    after = claude_settings(homes).read_bytes()
    data = json.loads(after)
    original = json.loads(raw)
    assert list(data)[: len(original)] == list(original) and ours(data["hooks"]["SessionStart"])
    # The whole file is what the user's own style gives for the new content: same indent unit,
    # separators, final newline and escaping, so the untouched part reads exactly as before.
    assert after.startswith(raw.rstrip(b"\n")[: raw.rstrip(b"\n").rfind(b"}")].rstrip())
    assert after.endswith(b"\n") == raw.endswith(b"\n")
    if b"\n" not in raw.strip():
        assert b"\n" not in after.strip()
    assert after.isascii() or style != "ascii escapes"
    svc.uninstall_agent("claude-code")
    assert claude_settings(homes).read_bytes() == raw


# -- backups -----------------------------------------------------------------------------------
def _backups(homes: AgentHomes) -> list[Path]:
    folders = {homes.claude, homes.claude_json.parent, homes.codex}
    return [p for folder in folders for p in folder.glob("*.bak")]


def test_backups_never_hold_coffers_entries(
    svc: MemoryService, homes: AgentHomes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    before = {**write_claude(homes), **write_codex(homes)}
    for agent in ("claude-code", "codex"):
        svc.install_agent(agent, disable_native_memory=True)
    # An update (coffer moved): the files are rewritten while they hold coffer's old entries.
    moved = tmp_path / "moved-venv" / "bin"
    moved.mkdir(parents=True)
    for name in ("coffer-hook", "coffer-mcp"):
        write(moved / name, "#!/bin/sh\n", mode=0o755)
    monkeypatch.setattr(specs_mod, "script_path", lambda name: moved / name)
    for agent in ("claude-code", "codex"):
        svc.install_agent(agent)
    backups = _backups(homes)
    assert len(backups) == len(before)
    for bak in backups:
        assert b"coffer-hook" not in bak.read_bytes() and b"coffer-mcp" not in bak.read_bytes()
        assert b"autoMemoryEnabled" not in bak.read_bytes() and b"generate_memories" not in bak.read_bytes()
        # the last version without coffer: here, what the user had before the first install
        assert bak.read_bytes() == before[bak.with_name(bak.name.removesuffix(".coffer.bak"))]
    for agent in ("claude-code", "codex"):
        svc.uninstall_agent(agent)
    unchanged(before)
    assert _backups(homes) == []  # each file is its .bak again: nothing left to keep


def test_uninstall_drops_a_backup_an_older_coffer_left_with_its_entries(
    svc: MemoryService, homes: AgentHomes
) -> None:
    before = write_claude(homes)
    svc.install_agent("claude-code")
    stale = claude_settings(homes).read_bytes()  # what an older coffer's uninstall left as .bak
    write(claude_settings(homes).with_name("settings.json.bak"), stale)
    svc.uninstall_agent("claude-code")
    unchanged(before)
    assert not claude_settings(homes).with_name("settings.json.bak").exists()


def test_members_coffer_does_not_touch_keep_their_exact_text(svc: MemoryService, homes: AgentHomes) -> None:
    # Hand-formatted: short arrays and objects on one line inside a 2-space file.
    raw = (
        b'{\n  "model": "opus",\n  "permissions": {"allow": ["Bash(ls)", "Read"], "deny": []},\n'
        b'  "hooks": {\n    "Stop": [{"hooks": [{"type": "command", "command": "notify"}]}]\n  },\n'
        b'  "env": {"A": "1"}\n}\n'
    )
    write(claude_settings(homes), raw)
    svc.install_agent("claude-code", disable_native_memory=True)
    after = claude_settings(homes).read_text()
    for line in (
        '  "permissions": {"allow": ["Bash(ls)", "Read"], "deny": []},\n',
        '    "Stop": [{"hooks": [{"type": "command", "command": "notify"}]}],\n',
        '  "env": {"A": "1"},\n',
    ):
        assert line in after
    assert (
        '\n    "SessionStart": [\n      {\n        "matcher": "startup|resume|clear|compact|fork",' in after
    )
    assert after.endswith('  "autoMemoryEnabled": false\n}\n')
    # An edit by the user meanwhile: uninstall cannot restore the snapshot, and re-renders only
    # what it removes.
    data = read_json(claude_settings(homes))
    data["model"] = "sonnet"
    text = after.replace('"model": "opus"', '"model": "sonnet"')
    claude_settings(homes).write_text(text)
    svc.uninstall_agent("claude-code")
    assert claude_settings(homes).read_bytes() == raw.replace(b'"model": "opus"', b'"model": "sonnet"')


def test_a_one_line_object_gets_coffers_entry_on_the_same_line(svc: MemoryService, homes: AgentHomes) -> None:
    path = opencode_json(homes)
    write(
        path, '{\n  "theme": "opencode",\n  "mcp": {"context7": {"type": "remote", "url": "https://x"}}\n}\n'
    )
    svc.install_agent("opencode")
    lines = path.read_text().splitlines()
    assert lines[2].startswith(
        '  "mcp": {"context7": {"type": "remote", "url": "https://x"}, "coffer": {"type": "local"'
    )
    assert len(lines) == 4 and read_json(path)["mcp"]["coffer"]["enabled"] is True


def test_json_the_splicer_cannot_scan_is_rendered_whole(svc: MemoryService, homes: AgentHomes) -> None:
    # Python's json reads NaN; the splicer does not.
    write(claude_settings(homes), b'{\n    "ratio": NaN\n}\n')
    svc.install_agent("claude-code")
    assert claude_settings(homes).read_text().startswith('{\n    "ratio": NaN,\n    "hooks": {\n')
