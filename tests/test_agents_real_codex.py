"""Coffer inside the real Codex CLI (``codex exec``), offline against a fake model: its hook and
tools, its sessions swept into distillation, resume and compaction, a trusted project entry, the
API key its MCP server is given. The shared parts and how the CLIs are found: ``agents_real``.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from agents_real import (
    FACT,
    NEW_RULE,
    SCRIPTS,
    STALE_MCP,
    TOOLS,
    World,
    assert_rules_in_order,
    distill_or_reply,
    distilled_conversations,
    install,
    needs,
    newest_session,
    rules_seen,
    shadowed_status,
    world,
)
from fake_model import FakeModel

from coffer_memory._agents.codex_trust import hook_hash

__all__ = ["world"]  # the fixture


def codex_status(w: World) -> dict[str, Any]:
    # Exit 1 while the setup is not working yet (an unreviewed hook).
    status: dict[str, Any] = json.loads(
        w.coffer("agents", "status", "codex", "--json", "--no-check", exits=(0, 1))
    )
    return status


def trust_like_codex(w: World, review: dict[str, Any]) -> None:
    """What trusting the hook in Codex's /hooks screen records: its key and ``trusted_hash``."""
    group = json.loads((w.home / ".codex" / "hooks.json").read_text())["hooks"]["SessionStart"][0]
    digest = hook_hash("SessionStart", group["matcher"], group["hooks"][0])
    with (w.home / ".codex" / "config.toml").open("a") as out:
        out.write(f'\n[hooks.state."{review["key"]}"]\ntrusted_hash = "{digest}"\n')


def backdate_codex_session(w: World, hours: float) -> str:
    """Move the newest Codex session back in time (as if it ended ``hours`` ago); its id."""
    newest = max((w.home / ".codex" / "sessions").rglob("rollout-*.jsonl"), key=lambda p: p.stat().st_mtime)
    lines = []
    for line in newest.read_text().splitlines():
        record = json.loads(line)
        for holder in (record, record.get("payload") or {}):
            if isinstance(holder, dict) and isinstance(holder.get("timestamp"), str):
                when = (
                    time.mktime(time.strptime(holder["timestamp"][:19], "%Y-%m-%dT%H:%M:%S")) - hours * 3600
                )
                holder["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.localtime(when))
        lines.append(json.dumps(record))
    newest.write_text("\n".join(lines) + "\n")
    return newest.stem[-36:]


def codex_uses(w: World, fake: FakeModel) -> dict[str, str]:
    """Point Codex at the fake model (a custom Responses provider); the environment it needs."""
    config = w.home / ".codex" / "config.toml"
    provider = (
        f'\n[model_providers.fake]\nname = "fake"\nbase_url = "{fake.url}/v1"\nwire_api = "responses"\n'
        'env_key = "FAKE_MODEL_KEY"\n'
    )
    config.write_text('model = "fake-model"\nmodel_provider = "fake"\n' + config.read_text() + provider)
    return {"FAKE_MODEL_KEY": "not-a-secret"}


def coffer_namespace(request: dict[str, Any]) -> set[str]:
    """The tools Codex offers in ``request`` under coffer-mcp's namespace."""
    spaces = [t for t in request["tools"] if t.get("type") == "namespace" and t.get("name") == "mcp__coffer"]
    return {t["name"] for space in spaces for t in space["tools"]}


@needs("codex", "@openai/codex")
def test_codex_runs_coffers_hook_and_tools_and_its_sessions_are_distilled(world: World) -> None:
    w = world
    codex = install(w, "codex", "codex")
    config = w.home / ".codex" / "config.toml"
    # Codex's default MCP start-up grace (1 s): coffer-mcp answers its tool list before that.
    assert "mcp_optional_startup_grace_ms" not in config.read_text()
    with FakeModel(reply=distill_or_reply, call_tool="coffer__remember", call_args={"text": FACT}) as fake:
        agent_env = codex_uses(w, fake)
        argv = [codex, "exec", "--skip-git-repo-check"]

        # Not reviewed yet: Codex skips the hook, exactly as `coffer agents status` says.
        status = codex_status(w)
        assert status["hooks_installed"] and status["mcp_registered"]
        [review] = status["hook_review"]
        assert review["state"] == "untrusted"
        w.run([*argv, "hello"], agent_env)
        assert "QZX1" not in json.dumps(fake.model_requests())
        # No hook ran to give coffer-mcp time: its tools are in the first request all the same.
        assert coffer_namespace(fake.model_requests()[0])

        trust_like_codex(w, review)
        assert [r["state"] for r in codex_status(w)["hook_review"]] == ["trusted"]
        fake.requests.clear()
        w.run([*argv, "where does the deploy script live?"], agent_env)
        first, second = fake.model_requests()
        # The hook's bundle is a developer message of its own, in the first request.
        texts = [
            c.get("text", "")
            for item in first["input"]
            for c in item.get("content") or []
            if isinstance(c, dict)
        ]
        [bundle] = [t for t in texts if t.startswith("# Coffer memory rules")]
        assert_rules_in_order(bundle)
        # coffer-mcp's tools, grouped by Codex under the server's namespace.
        assert coffer_namespace(first) == TOOLS
        [output] = [i for i in second["input"] if i.get("type") == "function_call_output"]
        assert '"store":"project-' in output["output"] and "ops/deploy.sh" in output["output"]
        assert any(FACT in fact for fact in w.facts())
        # SessionStart started the sweep that stands in for Codex's missing SessionEnd.
        stamp = w.coffer_home / "logs" / "sweep-codex.stamp"
        assert stamp.exists()

        # The next session start sweeps that session once it has been idle: a journal entry.
        session = backdate_codex_session(w, hours=1)
        stamp.unlink()
        w.use_model(fake)
        w.run([*argv, "and now?"], agent_env)
        journal = w.journal_after("QZX4")
        assert f"session {session}" in journal
        distill = [b for b in fake.model_requests() if "messages" in b and '"insights"' in json.dumps(b)]
        assert distill and "where does the deploy script live?" in json.dumps(distill[0])


@needs("codex", "@openai/codex")
def test_codex_exec_fork_is_distilled_for_its_own_turns(world: World) -> None:
    """``codex exec fork <id> <prompt>`` (codex-cli 0.171.0) starts a new rollout that holds only the
    fork's own turns; each session's distillation sends its own turns, once."""
    w = world
    codex = install(w, "codex", "codex")
    with FakeModel(reply=distill_or_reply) as fake:
        agent_env = codex_uses(w, fake)
        w.use_model(fake)
        argv = [codex, "exec", "--skip-git-repo-check"]

        def newest() -> str:
            files = (w.home / ".codex" / "sessions").rglob("rollout-*.jsonl")
            return max(files, key=lambda p: p.stat().st_mtime).stem[-36:]

        def distill(session: str) -> dict[str, Any]:
            result: dict[str, Any] = json.loads(w.coffer("distill", session, "--agent", "codex", "--json"))
            return result

        w.run([*argv, "first prompt QZXA"], agent_env)
        parent = newest()
        assert distill(parent)["status"] == "distilled"
        w.run([*argv, "fork", parent, "forked prompt QZXB"], agent_env)
        fork = newest()
        assert fork != parent and distill(fork)["status"] == "distilled"
        assert distill(parent)["status"] == "already_distilled"
        first, forked = distilled_conversations(fake)
        assert "QZXA" in first and "QZXB" in forked and "QZXA" not in forked


@needs("codex", "@openai/codex")
def test_codex_resume_gets_the_rules_once_and_a_compaction_gets_them_again(world: World) -> None:
    w = world
    codex = install(w, "codex", "codex")
    trust_like_codex(w, codex_status(w)["hook_review"][0])
    with FakeModel(reply="All done.") as fake:
        agent_env = codex_uses(w, fake)
        argv = [codex, "exec", "--skip-git-repo-check"]
        w.run([*argv, "first prompt"], agent_env)
        assert rules_seen(fake.model_requests()[-1]) == (1, 0)
        session = newest_session(w.home / ".codex" / "sessions", "rollout-*.jsonl")

        # A rule added between two runs reaches the resumed session as a short note, not the
        # whole bundle again (before: `codex exec resume` held the bundle once per resume).
        w.coffer("memory", "rules", "--add", NEW_RULE, "--cwd", str(w.repo))
        w.run([*argv, "resume", session, "second prompt"], agent_env)
        assert rules_seen(fake.model_requests()[-1]) == (1, 1)
        w.run([*argv, "resume", session, "third prompt"], agent_env)
        assert rules_seen(fake.model_requests()[-1]) == (1, 1)

        # Compaction (automatic here: a tiny limit) drops the developer messages the rules were in;
        # Codex runs SessionStart with source "compact" and the whole bundle comes back, once.
        fake.requests.clear()
        compact = ["-c", "model_auto_compact_token_limit=12"]
        w.run(
            [codex, "exec", *compact, "--skip-git-repo-check", "resume", session, "fourth prompt"], agent_env
        )
        *_, summary, after = fake.model_requests()
        assert rules_seen(summary) == (1, 1)  # the summary request still has the old history
        assert rules_seen(after) == (1, 1)
        bundles = [
            c["text"]
            for item in after["input"]
            for c in item.get("content") or []
            if isinstance(c, dict) and c.get("text", "").startswith("# Coffer memory rules")
        ]
        assert len(bundles) == 1 and "QZX5" in bundles[0] and "QZX1" in bundles[0]


@needs("codex", "@openai/codex")
def test_codex_uses_a_trusted_projects_entry_and_status_says_so(world: World) -> None:
    w = world
    codex = install(w, "codex", "codex")
    (w.repo / ".codex").mkdir()
    (w.repo / ".codex" / "config.toml").write_text(f'[mcp_servers.coffer]\ncommand = "{STALE_MCP}"\n')
    with (w.home / ".codex" / "config.toml").open("a") as out:
        out.write(f'\n[projects."{w.repo.resolve()}"]\ntrust_level = "trusted"\n')
    got = json.loads(w.run([codex, "mcp", "get", "coffer", "--json"]).stdout)
    assert got["transport"]["command"] == STALE_MCP
    assert "trusted project config" in shadowed_status(w, "codex")


def codex_app_server_lists_mcp(w: World, codex: str, env: dict[str, str]) -> dict[str, Any]:
    """Ask ``codex app-server`` for its MCP servers' status, as a client would (it starts them)."""
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"clientInfo": {"name": "t", "version": "1"}},
        },
        {"jsonrpc": "2.0", "method": "initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "mcpServerStatus/list", "params": {}},
    ]
    proc = subprocess.Popen(
        [codex, "app-server"],
        cwd=w.repo,
        env={**w.env, **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
    proc.stdin.flush()
    try:
        for raw in proc.stdout:
            message = json.loads(raw)
            if message.get("id") == 2:
                answer: dict[str, Any] = message
                return answer
        raise AssertionError("codex app-server ended without answering mcpServerStatus/list")
    finally:
        proc.kill()
        proc.wait()


@needs("codex", "@openai/codex")
def test_codex_gives_coffer_mcp_the_api_key_coffers_config_names(world: World, tmp_path: Path) -> None:
    """Codex starts MCP servers with HOME, PATH and a few more only: the key coffer's [llm] reads
    from the environment was missing in coffer-mcp (recall and distillation from Codex without
    it) until the entry named it in ``env_vars``."""
    w = world
    (w.coffer_home / "config.toml").write_text(
        '[llm]\nprovider = "openai"\nmodel = "m"\napi_key_env = "QZX_LLM_KEY"\n'
    )
    codex = install(w, "codex", "codex")
    # A coffer-mcp that records the environment it was started with, then runs the real one.
    spy = tmp_path / "spy" / "coffer-mcp"
    spy.parent.mkdir()
    seen = tmp_path / "mcp-env.txt"
    spy.write_text(f'#!/bin/sh\nenv > {seen}\nexec {SCRIPTS / "coffer-mcp"} "$@"\n')
    spy.chmod(0o755)
    config = w.home / ".codex" / "config.toml"
    config.write_text(config.read_text().replace(str(SCRIPTS / "coffer-mcp"), str(spy)))
    answer = codex_app_server_lists_mcp(w, codex, {"QZX_LLM_KEY": "not-a-secret", "QZX_OTHER": "x"})
    [server] = [s for s in answer["result"]["data"] if s["name"] == "coffer"]
    assert set(server["tools"]) == TOOLS
    env = seen.read_text()
    assert "QZX_LLM_KEY=not-a-secret" in env
    assert "QZX_OTHER" not in env  # what Codex does with the rest of its environment
