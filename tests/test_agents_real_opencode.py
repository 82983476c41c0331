"""Coffer inside the real OpenCode (``opencode run``), offline against a fake model: its rules and
tools, a fork's distillation, a project entry. The shared parts and how the CLIs are found:
``agents_real``.
"""

from __future__ import annotations

import json
from typing import Any

from agents_real import (
    FACT,
    STALE_MCP,
    TOOLS,
    World,
    assert_rules_in_order,
    distill_or_reply,
    distilled_conversations,
    install,
    needs,
    shadowed_status,
    world,
)
from fake_model import FakeModel

__all__ = ["world"]  # the fixture


def system_text(request: dict[str, Any]) -> str:
    """The system messages of a Chat Completions request, as one text."""
    return "\n".join(str(m.get("content")) for m in request["messages"] if m.get("role") == "system")


@needs("opencode", "opencode-ai")
def test_opencode_gets_coffers_rules_and_runs_its_tools(world: World) -> None:
    w = world
    opencode = install(w, "opencode", "opencode")
    config_file = w.home / ".config" / "opencode" / "opencode.json"
    # The tool call reports a nearly full context window: OpenCode compacts the session after it.
    fake_model = FakeModel(
        reply=distill_or_reply, call_tool="coffer__remember", call_args={"text": FACT}, overflow_tokens=60_000
    )
    with fake_model as fake:
        w.use_model(fake)
        config = json.loads(config_file.read_text())
        limit = {"context": 64_000, "output": 8_000}
        config["provider"] = {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": f"{fake.url}/v1", "apiKey": "not-a-secret"},
                "models": {"fake-model": {"name": "Fake", "limit": limit}},
            }
        }
        config["model"] = "fake/fake-model"
        config_file.write_text(json.dumps(config, indent=2))
        agent_env = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"}
        w.run([opencode, "run", "where does the deploy script live?"], agent_env)
        requests = fake.model_requests()
        turns = [b for b in requests if b.get("tools")]
        # OpenCode prefixes a server's tools with its name.
        assert {t["function"]["name"] for t in turns[0]["tools"]} >= {f"coffer_{name}" for name in TOOLS}
        # coffer's plugin put the session-start bundle in the system prompt, once per request.
        for turn in turns:
            system = system_text(turn)
            assert system.count("QZX1") == 1 and system.count("QZX2") == 1, system
            assert_rules_in_order(system)
            assert "QZX1" not in json.dumps([m for m in turn["messages"] if m.get("role") != "system"])
        # The full context window made OpenCode summarise the session (a request without tools from
        # its compaction agent); the requests after it hold the rules again.
        summary = next(i for i, b in enumerate(requests) if not b.get("tools") and "summar" in system_text(b))
        assert any(b.get("tools") for b in requests[summary + 1 :])
        results = [str(m.get("content")) for t in turns for m in t["messages"] if m.get("role") == "tool"]
        assert any("emembered" in r for r in results)
        assert any(FACT in fact for fact in w.facts())
        # session.idle handed the session to distillation (OpenCode has no session-end event),
        # which read it from OpenCode's database and asked the same fake model.
        journal = w.journal_after("QZX4")
        assert journal.count("· agent · session ses_") == 1
        [first] = distilled_conversations(fake)
        assert "where does the deploy script live?" in first

        # A continued session (its start compacted away above, its tool call kept): the plugin's
        # bundle is in the system prompt once, never repeated in the messages; its tools stay.
        fake.requests.clear()
        w.run([opencode, "run", "--continue", "and the tests?"], agent_env)
        [continued] = [b for b in fake.model_requests() if b.get("tools")]
        history = json.dumps([m for m in continued["messages"] if m.get("role") != "system"])
        assert "QZX3" in history and "and the tests?" in history
        assert {t["function"]["name"] for t in continued["tools"]} >= {f"coffer_{name}" for name in TOOLS}
        system = system_text(continued)
        assert system.count("QZX1") == 1 and system.count("QZX2") == 1, system
        assert "QZX1" not in history
        # The continued session is distilled again for the turns it added only.
        w.journal_after_count("· agent · session ses_", 2)
        [grown] = distilled_conversations(fake)
        assert "and the tests?" in grown and "where does the deploy script live?" not in grown


@needs("opencode", "opencode-ai")
def test_opencode_fork_is_distilled_for_its_own_turns(world: World) -> None:
    """``opencode run --continue --fork`` copies the session's messages into a new session: its
    distillation sent the parent's turns to the model again (seen with OpenCode 1.18.33)."""
    w = world
    opencode = install(w, "opencode", "opencode")
    config_file = w.home / ".config" / "opencode" / "opencode.json"
    with FakeModel(reply=distill_or_reply) as fake:
        w.use_model(fake)
        config = json.loads(config_file.read_text())
        config["provider"] = {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": f"{fake.url}/v1", "apiKey": "not-a-secret"},
                "models": {"fake-model": {"name": "Fake", "limit": {"context": 64_000, "output": 8_000}}},
            }
        }
        config["model"] = "fake/fake-model"
        config_file.write_text(json.dumps(config, indent=2))
        agent_env = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"}
        w.run([opencode, "run", "first prompt QZXA"], agent_env)
        w.journal_after_count("· agent · session ses_", 1)
        w.run([opencode, "run", "--continue", "--fork", "forked prompt QZXB"], agent_env)
        w.journal_after_count("· agent · session ses_", 2)
        first, forked = distilled_conversations(fake)
        assert "QZXA" in first and "QZXB" in forked and "QZXA" not in forked


@needs("opencode", "opencode-ai")
def test_opencode_merges_a_project_entry_and_status_says_so(world: World) -> None:
    w = world
    opencode = install(w, "opencode", "opencode")
    (w.repo / "opencode.json").write_text(
        json.dumps({"mcp": {"coffer": {"type": "local", "command": [STALE_MCP]}}})
    )
    # OPENCODE_PURE: OpenCode first installs its plugin package (26 npm packages) into a config
    # folder that holds a plugin, coffer's: `debug config` took 14 s (4.5 s CPU) so, 2 s (1.3 s
    # CPU) without, at load 8; 163 s at load 15, near the test's 300 s. It merges the same config.
    agent_env = {
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_PURE": "1",
    }
    got = json.loads(w.run([opencode, "debug", "config"], agent_env).stdout)
    assert got["mcp"]["coffer"]["command"] == [STALE_MCP]
    assert "project config" in shadowed_status(w, "opencode")
