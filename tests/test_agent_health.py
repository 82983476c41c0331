"""Whether an installed agent setup works: the registered MCP server started and asked for its
tools, Codex's hook review, and status read with another ``--home``."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from agent_configs import codex_config, codex_hooks, isolated_agent_homes, opencode_json, read_json, write

from coffer_memory import InvalidInput, MemoryService, __version__
from coffer_memory._agents.codex_trust import hook_hash
from coffer_memory._agents.homes import AgentHomes
from coffer_memory._agents.probe import check_mcp_server
from coffer_memory._cli import main
from coffer_memory.vocabulary import MCP_PROBE_TIMEOUT_SECONDS

SCRIPTS = Path(sys.executable).parent

# A minimal stdio MCP server: answers initialize and tools/list, names itself after $FAKE_NAME.
FAKE_SERVER = f"""\
#!{sys.executable}
import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "initialize":
        info = {{"name": os.environ.get("FAKE_NAME", "fake"), "version": "9"}}
        result = {{"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {{}}, "serverInfo": info}}
    elif msg.get("method") == "tools/list":
        result = {{"tools": [{{"name": "coffer__recall", "inputSchema": {{"type": "object"}}}}]}}
    else:
        continue
    print(json.dumps({{"jsonrpc": "2.0", "id": msg["id"], "result": result}}), flush=True)
"""
# A Python that cannot see the environment's packages: what a coffer-mcp without the SDK does.
NO_SDK = f"""\
#!{sys.executable} -I
import sys
sys.path[:] = [p for p in sys.path if "-packages" not in p]
import mcp
"""
EXITS = "#!/bin/sh\necho 'coffer-mcp: something broke' >&2\nexit 3\n"
HANGS = "#!/bin/sh\nexec sleep 600\n"


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentHomes:
    return isolated_agent_homes(tmp_path, monkeypatch)


def script(folder: Path, text: str, name: str = "coffer-mcp") -> Path:
    """An executable named like coffer's server, so installed entries recognise it as ours."""
    path = write(folder / name, text, mode=0o755)
    return path


def register(homes: AgentHomes, command: Path, env: dict[str, str] | None = None) -> None:
    """Point Claude Code's coffer entry at ``command`` (as an older or broken install would)."""
    data = read_json(homes.claude_json)
    data["mcpServers"]["coffer"].update(command=str(command), env=env or {})
    homes.claude_json.write_text(json.dumps(data, indent=2) + "\n")


# -- the probe itself --------------------------------------------------------------------------
def test_a_server_that_answers_is_ok_and_gets_the_entrys_env(tmp_path: Path) -> None:
    check = check_mcp_server([str(script(tmp_path, FAKE_SERVER))], {"FAKE_NAME": "from-env"}, timeout=30)
    assert check.ok and check.problem is None
    assert check.server == "from-env 9" and check.tools == ("coffer__recall",)


def test_a_server_without_the_sdk_says_so(tmp_path: Path) -> None:
    check = check_mcp_server([str(script(tmp_path, NO_SDK))], timeout=30)
    assert not check.ok and "exited with status 1 before answering initialize" in (check.problem or "")
    assert "MCP SDK is missing" in (check.problem or "") and "pip install" in (check.problem or "")
    assert "No module named 'mcp'" in (check.detail or "")


def test_a_server_that_exits_reports_its_status_and_stderr(tmp_path: Path) -> None:
    check = check_mcp_server([str(script(tmp_path, EXITS))], timeout=30)
    assert not check.ok and "exited with status 3" in (check.problem or "")
    assert check.detail == "coffer-mcp: something broke"


def test_a_server_that_hangs_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    hang = script(tmp_path, f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 600\n")
    check = check_mcp_server([str(hang)], timeout=1.5)
    assert not check.ok and "no answer to initialize within the timeout" in (check.problem or "")
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # nothing left running


def test_a_missing_or_unexecutable_command(tmp_path: Path) -> None:
    missing = check_mcp_server([str(tmp_path / "nowhere" / "coffer-mcp")])
    plain = write(tmp_path / "coffer-mcp", "not a program", mode=0o644)
    assert not missing.ok and "does not exist" in (missing.problem or "")
    assert "not executable" in (check_mcp_server([str(plain)]).problem or "")


def test_the_real_coffer_mcp_answers_with_its_five_tools(tmp_home: Path) -> None:
    check = check_mcp_server([str(SCRIPTS / "coffer-mcp")], {"COFFER_HOME": str(tmp_home)}, timeout=60)
    assert check.ok, check.summary()
    assert (
        check.server == f"coffer {__version__}" and "coffer__recall" in check.tools and len(check.tools) == 5
    )


# -- through status, install and doctor --------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "expected"),
    [(NO_SDK, "MCP SDK is missing"), (EXITS, "exited with status 3"), (HANGS, "no answer to initialize")],
)
def test_status_and_doctor_start_the_registered_command(
    svc: MemoryService, homes: AgentHomes, tmp_path: Path, body: str, expected: str
) -> None:
    svc.install_agent("claude-code")
    register(homes, script(tmp_path / "bin", body))
    status = svc.agent_status("claude-code", check_mcp=True, timeout=3)
    assert status.installed and status.mcp_registered  # the entry is there...
    assert status.mcp_check is not None and not status.mcp_check.ok and not status.working  # ...and broken
    assert expected in (status.mcp_check.problem or "")
    report = svc.doctor(mcp_timeout=3)
    assert not report.ok and any(expected in p and "claude-code" in p for p in report.agent_problems)


def test_doctor_gives_a_hanging_server_the_timeout_it_is_told(
    svc: MemoryService, homes: AgentHomes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``coffer doctor`` had no timeout of its own: a hanging MCP server held it for the default 20 s."""
    svc.install_agent("claude-code")
    register(homes, script(tmp_path / "bin", HANGS))
    started = time.monotonic()
    assert main(["--home", str(svc.home), "doctor", "--timeout", "1.5"]) == 1
    assert time.monotonic() - started < MCP_PROBE_TIMEOUT_SECONDS  # the default would hang that long
    assert "no answer to initialize" in capsys.readouterr().out


def test_status_passes_the_entrys_env(svc: MemoryService, homes: AgentHomes, tmp_path: Path) -> None:
    svc.install_agent("claude-code")
    register(homes, script(tmp_path / "bin", FAKE_SERVER), {"FAKE_NAME": "named-by-entry"})
    status = svc.agent_status("claude-code", check_mcp=True)
    assert status.mcp_check is not None and status.mcp_check.ok and status.working
    assert status.mcp_check.server == "named-by-entry 9"
    assert svc.agent_status("claude-code").mcp_check is None  # only started when asked


# Answers only once the other agent's server has started too: probed one after the other, the
# first gives up (exit 3) before the second starts.
BARRIER = """\
import pathlib, time
folder = pathlib.Path(os.environ["BARRIER_DIR"])
(folder / os.environ["FAKE_NAME"]).touch()
deadline = time.monotonic() + 30
while not (folder / os.environ["OTHER_NAME"]).exists():
    if time.monotonic() > deadline:
        sys.exit("the other server never started")
    time.sleep(0.05)
"""
BARRIER_SERVER = FAKE_SERVER.replace("import json, os, sys\n", "import json, os, sys\n" + BARRIER)


def test_distinct_servers_of_several_agents_are_probed_at_the_same_time(
    svc: MemoryService, homes: AgentHomes, tmp_path: Path
) -> None:
    svc.install_agent("claude-code")
    svc.install_agent("opencode")
    server = script(tmp_path / "bin", BARRIER_SERVER)
    folder = tmp_path / "barrier"
    folder.mkdir()
    register(homes, server, {"BARRIER_DIR": str(folder), "FAKE_NAME": "claude", "OTHER_NAME": "opencode"})
    config = read_json(opencode_json(homes))
    environment = {"BARRIER_DIR": str(folder), "FAKE_NAME": "opencode", "OTHER_NAME": "claude"}
    config["mcp"]["coffer"].update(command=[str(server)], environment=environment)
    opencode_json(homes).write_text(json.dumps(config))
    checks = {s.name: s.mcp_check for s in svc.agents(check_mcp=True, timeout=60)}
    assert checks["codex"] is None
    assert {name: (c.ok, c.server) for name, c in checks.items() if c is not None} == {
        "claude-code": (True, "claude 9"),
        "opencode": (True, "opencode 9"),
    }


def test_a_server_that_is_not_coffers_is_reported(
    svc: MemoryService, homes: AgentHomes, tmp_path: Path
) -> None:
    svc.install_agent("claude-code")
    register(homes, script(tmp_path / "bin", FAKE_SERVER.replace("coffer__recall", "other_tool")))
    check = svc.agent_status("claude-code", check_mcp=True).mcp_check
    assert check is not None and not check.ok and "does not offer coffer__recall" in (check.problem or "")


def test_cli_status_exits_1_and_says_what_is_wrong(
    svc: MemoryService, homes: AgentHomes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    svc.install_agent("claude-code")
    register(homes, script(tmp_path / "bin", NO_SDK))
    assert main(["--home", str(svc.home), "agents", "status", "claude-code", "--timeout", "20"]) == 1
    out = capsys.readouterr().out
    assert "registered; fails:" in out and "No module named 'mcp'" in out
    assert main(["--home", str(svc.home), "agents", "status", "claude-code", "--no-check"]) == 0


def test_cli_install_checks_the_server_it_registered(
    svc: MemoryService, homes: AgentHomes, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--home", str(svc.home), "agents", "install", "opencode"]) == 0
    assert f"MCP server: registered; answers (coffer {__version__}, 5 tools" in capsys.readouterr().out
    report = svc.doctor()
    assert report.ok and report.agents and report.agents[0].startswith("opencode: MCP server answers")


def test_doctor_without_agents_starts_nothing(svc: MemoryService, homes: AgentHomes) -> None:
    report = svc.doctor()
    assert report.ok and report.agents == () and report.agent_problems == ()


# -- Codex hook review -------------------------------------------------------------------------
def _trust(homes: AgentHomes, key: str, trusted_hash: str, *, enabled: bool | None = None) -> None:
    extra = "" if enabled is None else f"enabled = {str(enabled).lower()}\n"
    with codex_config(homes).open("a") as out:
        out.write(f'\n[hooks.state."{key}"]\ntrusted_hash = "{trusted_hash}"\n{extra}')


def test_codex_hook_is_untrusted_until_reviewed_then_trusted(svc: MemoryService, homes: AgentHomes) -> None:
    status = svc.install_agent("codex").status
    [review] = status.hook_review
    assert review.state == "untrusted" and not status.working and "/hooks" in review.describe()
    assert review.key == f"{codex_hooks(homes)}:session_start:0:0"
    entry = read_json(codex_hooks(homes))["hooks"]["SessionStart"][0]
    _trust(homes, review.key, hook_hash("SessionStart", entry["matcher"], entry["hooks"][0]))
    assert [t.state for t in svc.agent_status("codex").hook_review] == ["trusted"]
    assert svc.agent_status("codex").working


def test_codex_hook_changed_since_review_or_disabled(svc: MemoryService, homes: AgentHomes) -> None:
    key = svc.install_agent("codex").status.hook_review[0].key
    _trust(homes, key, "sha256:" + "0" * 64)
    assert svc.agent_status("codex").hook_review[0].state == "modified"
    _trust(homes, key + "x", "unused")  # another key: not ours
    text = codex_config(homes).read_text().replace('"sha256:' + "0" * 64 + '"', '"x"\nenabled = false')
    codex_config(homes).write_text(text)
    assert svc.agent_status("codex").hook_review[0].state == "disabled"


def test_codex_review_key_under_a_symlinked_codex_home(
    svc: MemoryService, homes: AgentHomes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Codex canonicalises $CODEX_HOME (codex-rs find_codex_home) and keys its review by the real
    # path of hooks.json: checked with Codex 0.171, which ran the hook trusted under the real path
    # and skipped it when trusted under the symlink's path.
    real = tmp_path / "dotfiles" / "codex"
    real.mkdir(parents=True)
    link = tmp_path / "codex-link"
    link.symlink_to(real)
    monkeypatch.setenv("CODEX_HOME", str(link))
    [review] = svc.install_agent("codex").status.hook_review
    assert review.key == f"{real / 'hooks.json'}:session_start:0:0"
    entry = read_json(link / "hooks.json")["hooks"]["SessionStart"][0]
    digest = hook_hash("SessionStart", entry["matcher"], entry["hooks"][0])
    with (link / "config.toml").open("a") as out:
        out.write(f'\n[hooks.state."{review.key}"]\ntrusted_hash = "{digest}"\n')
    assert [t.state for t in svc.agent_status("codex").hook_review] == ["trusted"]


def test_codex_default_home_is_not_resolved(
    svc: MemoryService, homes: AgentHomes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without $CODEX_HOME, Codex uses $HOME/.codex as it is, symlink or not (checked with 0.171).
    real = tmp_path / "dotfiles" / "codex"
    real.mkdir(parents=True)
    monkeypatch.delenv("CODEX_HOME")
    (Path(os.environ["HOME"]) / ".codex").symlink_to(real)
    [review] = svc.install_agent("codex").status.hook_review
    assert review.key == f"{Path(os.environ['HOME']) / '.codex' / 'hooks.json'}:session_start:0:0"


def test_codex_key_follows_the_position_of_our_hook(svc: MemoryService, homes: AgentHomes) -> None:
    users = {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}
    write(codex_hooks(homes), json.dumps({"hooks": {"SessionStart": [users]}}))
    [review] = svc.install_agent("codex").status.hook_review
    assert review.key.endswith(":session_start:1:0")


def test_hook_hash_matches_what_codex_computes() -> None:
    # currentHash reported by Codex 0.171.0's `codex app-server` (hooks/list) for this hooks.json entry.
    handler = {"type": "command", "command": "/x/bin/coffer-hook --agent codex", "timeout": 10}
    expected = "sha256:2aafa5e1f266e59cc04fece0d61997a96d04f29ed80baecc0bd787c9f4d70d00"
    assert hook_hash("SessionStart", "startup|resume|clear|compact", handler) == expected


def test_claude_code_has_no_review_step(svc: MemoryService, homes: AgentHomes) -> None:
    status = svc.install_agent("claude-code").status
    assert status.hook_review == () and status.working


# -- --home consistency ------------------------------------------------------------------------
def test_install_with_another_home_is_not_out_of_date_from_the_default_one(
    homes: AgentHomes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other-home"
    assert main(["--home", str(other), "agents", "install", "claude-code", "--no-check"]) == 0
    capsys.readouterr()
    assert main(["agents", "list"]) == 0
    listing = capsys.readouterr().out
    assert "out of date" not in listing and "claude-code  yes" in listing
    with MemoryService() as default:
        status = default.agent_status("claude-code")
        assert status.up_to_date and status.home == other
        assert any(f"installed for coffer home {other}" in n for n in status.notes)
        # uninstall from the default home uses the record kept in the other home: byte-identical
        default.uninstall_agent("claude-code")
    assert not homes.claude_json.exists() and not (homes.claude / "settings.json").exists()
    assert json.loads((other / "agents.json").read_text())["agents"] == {}


def test_install_from_another_home_moves_the_record(
    homes: AgentHomes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write(homes.claude / "settings.json", '{"model": "opus"}\n')
    with MemoryService(first) as svc:
        svc.install_agent("claude-code")
    with MemoryService(second) as svc:
        status = svc.install_agent("claude-code").status
        assert status.home == second and status.up_to_date
        assert "claude-code" not in json.loads((first / "agents.json").read_text())["agents"]
        svc.uninstall_agent("claude-code")
    assert (homes.claude / "settings.json").read_text() == '{"model": "opus"}\n'


def test_odd_codex_state_tables_read_as_not_reviewed(svc: MemoryService, homes: AgentHomes) -> None:
    svc.install_agent("codex")
    with codex_config(homes).open("a") as out:
        out.write('\n[hooks]\nstate = "not a table"\n')
    assert [t.state for t in svc.agent_status("codex").hook_review] == ["untrusted"]


# -- snippets for Claude Desktop, Cursor, VS Code ----------------------------------------------
@pytest.mark.parametrize(
    ("client", "key"), [("claude-desktop", "mcpServers"), ("cursor", "mcpServers"), ("vscode", "servers")]
)
def test_snippets_follow_each_clients_format_and_start_coffer(
    client: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other-home"
    assert main(["--home", str(other), "agents", "snippet", client]) == 0
    out = capsys.readouterr()
    config = json.loads(out.out)
    entry = config[key]["coffer"]
    assert list(config) == [key] and entry["command"] == str(SCRIPTS / "coffer-mcp") and entry["args"] == []
    assert entry["env"] == {"COFFER_HOME": str(other)}
    assert ("type" in entry) == (client == "vscode") and entry.get("type", "stdio") == "stdio"
    assert "https://" in out.err and "merge this" in out.err
    # What the snippet describes really starts and answers, with its env.
    check = check_mcp_server([entry["command"], *entry["args"]], entry["env"], timeout=60)
    assert check.ok and "coffer__recall" in check.tools


def test_snippet_without_a_home_override_has_no_env(capsys: pytest.CaptureFixture[str]) -> None:
    from coffer_memory._agents.snippets import mcp_snippet

    assert "env" not in mcp_snippet("cursor").config["mcpServers"]["coffer"]
    with pytest.raises(InvalidInput, match="known clients"):
        mcp_snippet("notepad")
