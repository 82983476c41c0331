"""Coffer's OpenCode plugin: installed and removed like the other agents' hooks, and run by Node.

The install side needs nothing but Python. The plugin's behaviour (rules once per request, asked
again after a compaction, nothing and no error when coffer-hook fails) is checked by importing the
installed file into Node (skipped without ``node``), calling the hooks as OpenCode does; the
real OpenCode runs it in ``tests/test_agents_real_opencode.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agent_configs import isolated_agent_homes, opencode_json, opencode_plugin, write, write_opencode

from coffer_memory import MemoryService
from coffer_memory._agents.homes import AgentHomes
from coffer_memory._agents.opencode_plugin import render_plugin
from coffer_memory._cli import main
from coffer_memory._errors import AgentConfigInvalid

SCRIPTS = Path(sys.executable).parent
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")

# Calls the plugin's hooks as OpenCode does. argv: plugin, directory, then steps: "ask:<session>"
# (a model request: prints its system prompt), "compact:<session>" (the session.compacted event),
# "idle:<session>" (session.idle), "child:<session>" (session.created of a subagent's session) or
# "sleep:<ms>" (OpenCode's terminal UI staying open).
DRIVER = """\
const [plugin, directory, ...steps] = process.argv.slice(2);
const { CofferMemory } = await import(plugin);
const hooks = await CofferMemory({ directory });
for (const step of steps) {
  const [kind, sessionID] = step.split(":");
  if (kind === "compact") {
    await hooks.event({ event: { type: "session.compacted", properties: { sessionID } } });
  } else if (kind === "idle") {
    await hooks.event({ event: { type: "session.idle", properties: { sessionID } } });
  } else if (kind === "child") {
    const info = { id: sessionID, parentID: "ses_parent", directory };
    await hooks.event({ event: { type: "session.created", properties: { sessionID, info } } });
  } else if (kind === "sleep") {
    await new Promise((resolve) => setTimeout(resolve, Number(sessionID)));
  } else {
    const output = { system: ["OpenCode's own prompt"] };
    await hooks["experimental.chat.system.transform"]({ sessionID, model: {} }, output);
    console.log(JSON.stringify(output.system));
  }
}
"""


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentHomes:
    return isolated_agent_homes(tmp_path, monkeypatch)


def drive(plugin_source: str, tmp_path: Path, directory: Path, *steps: str) -> list[list[str]]:
    """Run the plugin in Node through ``DRIVER``; the system prompt of each ``ask`` step."""
    assert NODE is not None
    # Node 20 reads a .js file outside a "type": "module" package as CommonJS: the copy is .mjs.
    module = tmp_path / "plugin.mjs"
    module.write_text(plugin_source)
    driver = tmp_path / "driver.mjs"
    driver.write_text(DRIVER)
    (tmp_path / "tmp").mkdir(exist_ok=True)  # Node's os.tmpdir(), where SessionEnd payloads pass
    proc = subprocess.run(
        [NODE, str(driver), str(module), str(directory), *steps],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TMPDIR": str(tmp_path / "tmp")},
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


# -- install side --------------------------------------------------------------------------------
def test_reinstall_changes_nothing_and_a_stale_plugin_is_rewritten_without_a_bak(
    svc: MemoryService, homes: AgentHomes
) -> None:
    write_opencode(homes)
    svc.install_agent("opencode")
    plugin = opencode_plugin(homes)
    current = plugin.read_bytes()
    assert current.startswith(b"// coffer-memory:") and str(SCRIPTS / "coffer-hook").encode() in current
    assert svc.install_agent("opencode").changed == ()
    # An older coffer's plugin (say, coffer moved): status calls it out of date, install rewrites it.
    plugin.write_bytes(current.replace(str(SCRIPTS / "coffer-hook").encode(), b"/old/bin/coffer-hook"))
    status = svc.agent_status("opencode")
    assert status.installed and status.hooks_installed and not status.up_to_date
    assert svc.install_agent("opencode").changed == (plugin,)
    assert plugin.read_bytes() == current
    assert not plugin.with_name(plugin.name + ".coffer.bak").exists()


def test_the_users_own_plugins_stay_and_a_foreign_file_of_that_name_is_refused(
    svc: MemoryService, homes: AgentHomes
) -> None:
    before = write_opencode(homes)
    theirs = opencode_plugin(homes).with_name("mine.js")
    write(theirs, "export const Mine = async () => ({})\n")
    svc.install_agent("opencode")
    svc.uninstall_agent("opencode")
    assert (
        not opencode_plugin(homes).exists()
        and theirs.read_bytes() == b"export const Mine = async () => ({})\n"
    )
    assert opencode_json(homes).read_bytes() == before[opencode_json(homes)]

    write(opencode_plugin(homes), "// someone else's plugin\n")
    with pytest.raises(AgentConfigInvalid, match="is not coffer's plugin"):
        svc.install_agent("opencode")
    # Nothing half-written: opencode.json and the file are as they were.
    assert opencode_json(homes).read_bytes() == before[opencode_json(homes)]
    assert opencode_plugin(homes).read_bytes() == b"// someone else's plugin\n"
    assert not svc.agent_status("opencode").installed


def test_a_plugin_the_user_deleted_makes_status_say_not_installed(
    svc: MemoryService, homes: AgentHomes, capsys: pytest.CaptureFixture[str]
) -> None:
    svc.install_agent("opencode")
    opencode_plugin(homes).unlink()
    status = svc.agent_status("opencode")
    assert status.mcp_registered and not status.hooks_installed and not status.installed
    assert main(["--home", str(svc.home), "agents", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("opencode"))
    assert row.split() == ["opencode", "no", "no", "yes", "n/a"]
    svc.install_agent("opencode")
    assert svc.agent_status("opencode").installed
    # Uninstall without agents.json (lost): the plugin is still recognised as coffer's and removed.
    (svc.home / "agents.json").unlink()
    svc.uninstall_agent("opencode")
    assert not opencode_plugin(homes).exists()


# -- the plugin in Node --------------------------------------------------------------------------
@needs_node
def test_the_plugin_adds_coffers_bundle_once_per_request(
    svc: MemoryService, homes: AgentHomes, tmp_path: Path
) -> None:
    svc.append_rule("Answer in British English (global rule QZX2).", scope="global")
    svc.install_agent("opencode")
    systems = drive(opencode_plugin(homes).read_text(), tmp_path, tmp_path, "ask:s1", "ask:s1", "ask:s2")
    for system in systems:
        assert system[0] == "OpenCode's own prompt" and len(system) == 2
        assert "QZX2" in system[1] and "coffer__resume()" in system[1]


@needs_node
def test_the_bundle_is_asked_for_once_per_session_and_again_after_compaction(tmp_path: Path) -> None:
    log = tmp_path / "payloads.jsonl"
    hook = tmp_path / "coffer-hook"
    answer = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "RULES"}}
    write(hook, f"#!/bin/sh\ncat >> '{log}'\necho >> '{log}'\necho '{json.dumps(answer)}'\n")
    hook.chmod(0o755)
    steps = ("ask:s1", "ask:s1", "compact:s1", "ask:s1")
    systems = drive(render_plugin(str(hook), 10), tmp_path, tmp_path / "repo", *steps)
    assert systems == [["OpenCode's own prompt", "RULES"]] * 3
    payloads: list[dict[str, Any]] = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(p["hook_event_name"], p["session_id"], p["source"]) for p in payloads] == [
        ("SessionStart", "s1", "startup"),
        ("SessionStart", "s1", "compact"),
    ]
    assert payloads[0]["cwd"] == str(tmp_path / "repo")


@needs_node
@pytest.mark.parametrize(
    "script",
    [
        None,  # no coffer-hook at that path
        "#!/bin/sh\nexec sleep 30\n",  # past the plugin's timeout
        "#!/bin/sh\necho 'not json'\n",
        "#!/bin/sh\nexit 3\n",
    ],
    ids=["missing", "timeout", "garbage", "failing"],
)
def test_a_failing_coffer_hook_means_no_rules_and_no_error(tmp_path: Path, script: str | None) -> None:
    hook = tmp_path / "coffer-hook"
    if script is not None:
        write(hook, script)
        hook.chmod(0o755)
    # drive() asserts Node exits 0 with nothing on stderr.
    assert drive(render_plugin(str(hook), 1), tmp_path, tmp_path, "ask:s1") == [["OpenCode's own prompt"]]


def recording_hook(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in ``coffer-hook`` that keeps each stdin payload in a file of its own (hooks of
    several sessions run at once), in the folder it returns."""
    folder, hook = tmp_path / "payloads", tmp_path / "coffer-hook"
    folder.mkdir()
    write(hook, f'#!/bin/sh\nf=$(mktemp \'{folder}/.part.XXXXXX\')\ncat > "$f"\nmv "$f" "$f.json"\n')
    hook.chmod(0o755)
    return hook, folder


def payloads_when(folder: Path, count: int) -> list[dict[str, Any]]:
    """The payloads the hook got, once it got ``count`` (the plugin does not wait for the hook)."""
    deadline = time.monotonic() + 60  # a bound on the detached hook, not a timing assertion
    while True:
        files = sorted(folder.glob("*.json"))
        if len(files) >= count or time.monotonic() > deadline:
            return [json.loads(f.read_text()) for f in files]
        time.sleep(0.1)


@needs_node
def test_an_idle_session_is_handed_to_distillation_once_per_interval(tmp_path: Path) -> None:
    hook, log = recording_hook(tmp_path)
    repo = tmp_path / "repo"
    # A subagent's session (task tool) is part of its parent's, never a session of its own.
    # s1's later idles fall in the interval: one of them is left waiting, handed off as Node exits
    # (OpenCode's terminal UI quit before the interval was over).
    steps = ("idle:s1", "child:s9", "idle:s9", "idle:s1", "idle:s2", "idle:s1")
    assert drive(render_plugin(str(hook), 10), tmp_path, repo, *steps) == []
    payloads = payloads_when(log, 3)
    assert sorted((p["hook_event_name"], p["session_id"], p["cwd"]) for p in payloads) == [
        ("SessionEnd", "s1", str(repo)),
        ("SessionEnd", "s1", str(repo)),
        ("SessionEnd", "s2", str(repo)),
    ]
    assert {p["reason"] for p in payloads} == {"idle"}
    assert not list((tmp_path / "tmp").iterdir())  # the payload files are gone


@needs_node
def test_an_idle_within_the_interval_is_handed_off_when_it_is_over(tmp_path: Path) -> None:
    """The terminal UI left open: the answers after the first hand-off are not lost."""
    hook, log = recording_hook(tmp_path)
    plugin = render_plugin(str(hook), 10, end_every_seconds=0.5)
    drive(plugin, tmp_path, tmp_path, "idle:s1", "idle:s1", "idle:s1", "sleep:2000")
    assert [p["session_id"] for p in payloads_when(log, 2)] == ["s1", "s1"]


@needs_node
@pytest.mark.parametrize(
    "script",
    [None, "#!/bin/sh\nexec sleep 5\n", "#!/bin/sh\nexit 3\n"],
    ids=["missing", "hanging", "failing"],
)
def test_a_failing_coffer_hook_at_session_end_is_no_error(tmp_path: Path, script: str | None) -> None:
    hook = tmp_path / "coffer-hook"
    if script is not None:
        write(hook, script)
        hook.chmod(0o755)
    # drive() asserts Node exits 0 with nothing on stderr; it does not wait for a hanging hook.
    assert drive(render_plugin(str(hook), 1), tmp_path, tmp_path, "idle:s1", "ask:s1") == [
        ["OpenCode's own prompt"]
    ]
