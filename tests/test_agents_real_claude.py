"""Coffer inside the real Claude Code (``claude -p``), offline against a fake model: its hooks and
tools, resume, compact, clear and fork, and project-level MCP entries. The shared parts and how
the CLIs are found: ``agents_real``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from agents_real import (
    FACT,
    NEW_RULE,
    RUN_TIMEOUT,
    SCRIPTS,
    STALE_MCP,
    TOOLS,
    World,
    assert_rules_in_order,
    claude_env,
    distill_or_reply,
    install,
    needs,
    newest_session,
    rules_seen,
    shadowed_status,
    world,
)
from fake_model import FakeModel

__all__ = ["world"]  # the fixture


@needs("claude", "@anthropic-ai/claude-code")
def test_claude_code_runs_coffers_hooks_and_tools(world: World) -> None:
    w = world
    claude = install(w, "claude-code", "claude")
    with FakeModel(reply=distill_or_reply, call_tool="coffer__remember", call_args={"text": FACT}) as fake:
        w.use_model(fake)
        agent_env = claude_env(fake)
        remember = "mcp__coffer__coffer__remember"
        w.run([claude, "-p", "where does the deploy script live?", "--allowedTools", remember], agent_env)
        turns = [b for b in fake.model_requests() if "system" in b and b.get("tools")]
        # Claude Code hands SessionStart context to the model inside the conversation.
        assert_rules_in_order(json.dumps(turns[0]["messages"], ensure_ascii=False))
        # Claude Code 2.1.332 defers MCP tools: the first request offers ToolSearch, and a search
        # for "coffer" (the server, which the rules name) finds its five tools for the next one.
        # (2.1.197 offered them in the first request: coffer-mcp answers its tool list at once.)
        ours = {f"mcp__coffer__{name}" for name in TOOLS}
        assert "ToolSearch" in {t["name"] for t in turns[0]["tools"]}
        searched = next(i for i, b in enumerate(turns) if "toolu_fake_search" in json.dumps(b["messages"]))
        assert ours <= {t["name"] for t in turns[searched]["tools"]}
        messages = turns[-1]["messages"]
        results = [
            b
            for m in messages
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        assert any('"created":true' in str(r["content"]) for r in results)
        assert any(FACT in fact for fact in w.facts())
        # SessionEnd handed the transcript to distillation, which asked the same fake model.
        journal = w.journal_after("QZX4")
        assert "· agent · session " in journal


@needs("claude", "@anthropic-ai/claude-code")
def test_claude_code_resume_gets_the_rules_once_compact_and_clear_get_them_again(world: World) -> None:
    w = world
    claude = install(w, "claude-code", "claude")
    with FakeModel(reply="All done.") as fake:
        agent_env = claude_env(fake)

        def turns() -> list[dict[str, Any]]:
            return [b for b in fake.model_requests() if b.get("tools")]

        def stream(session: str, *prompts: str) -> None:
            """Several prompts, slash commands included, in one ``claude -p`` process."""
            lines = "".join(
                json.dumps({"type": "user", "message": {"role": "user", "content": p}}) + "\n"
                for p in prompts
            )
            stream_json = ["--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
            proc = subprocess.run(
                [claude, "-p", *stream_json, "--resume", session],
                cwd=w.repo,
                env={**w.env, **agent_env},
                input=lines,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
            )
            assert proc.returncode == 0, (proc.stdout, proc.stderr)

        w.run([claude, "-p", "first prompt QZXA"], agent_env)
        assert rules_seen(turns()[-1]) == (1, 0)
        session = newest_session(w.home / ".claude" / "projects", "*.jsonl")

        # Claude Code dropped an identical second copy itself, but added the whole bundle again
        # once a rule had changed: now the resumed session gets a note of the change only.
        w.coffer("memory", "rules", "--add", NEW_RULE, "--cwd", str(w.repo))
        w.run([claude, "-p", "second prompt", "--resume", session], agent_env)
        assert rules_seen(turns()[-1]) == (1, 1)
        w.run([claude, "-p", "third prompt", "--continue"], agent_env)
        assert rules_seen(turns()[-1]) == (1, 1)

        # /compact summarises the conversation (the rules with it): SessionStart "compact" gives
        # them back whole, once.
        stream(session, "/compact", "after compact")
        after = turns()[-1]
        assert "first prompt QZXA" not in json.dumps(after["messages"])
        assert rules_seen(after) == (1, 1)

        # /clear starts a new session with an empty conversation: the whole bundle again.
        stream(session, "/clear", "after clear")
        after = turns()[-1]
        assert "third prompt" not in json.dumps(after["messages"]) and rules_seen(after) == (1, 1)


@needs("claude", "@anthropic-ai/claude-code")
def test_claude_code_forked_session_gets_what_a_resume_gets(world: World) -> None:
    """``--fork-session`` copies the conversation (the rules in it) under a new session id.

    Claude Code 2.1.332 runs the fork's SessionStart with ``source: fork``, the fork's own id and
    a transcript not written yet (2.1.197: ``resume`` with the parent's id and transcript). coffer's
    matcher had no ``fork``: no hook ran, and a rule added before a fork never reached it. Nothing
    says what the copy holds, so a fork gets the whole bundle: Claude Code drops it when it is
    identical to the copy's; a fork resumed later gets a note of what changed."""
    w = world
    claude = install(w, "claude-code", "claude")
    with FakeModel(reply="All done.") as fake:
        agent_env = claude_env(fake)

        def last_turn() -> dict[str, Any]:
            body: dict[str, Any] = [b for b in fake.model_requests() if b.get("tools")][-1]
            return body

        projects = w.home / ".claude" / "projects"
        w.run([claude, "-p", "first prompt QZXA"], agent_env)
        session = newest_session(projects, "*.jsonl")
        w.run([claude, "-p", "forked prompt", "--resume", session, "--fork-session"], agent_env)
        assert rules_seen(last_turn()) == (1, 0)
        fork = newest_session(projects, "*.jsonl")
        assert fork != session

        # A rule added, then the fork resumed: a note of the new rule, not the whole bundle again.
        w.coffer("memory", "rules", "--add", NEW_RULE, "--cwd", str(w.repo))
        w.run([claude, "-p", "fork resumed", "--resume", fork], agent_env)
        assert rules_seen(last_turn()) == (1, 1)

        # A fork of the fork (--continue picks the newest session, the fork): the same.
        w.coffer(
            "memory",
            "rules",
            "--add",
            "Tag releases from main only (project rule QZX6).",
            "--cwd",
            str(w.repo),
        )
        w.run([claude, "-p", "fork of the fork", "--continue", "--fork-session"], agent_env)
        text = json.dumps(last_turn()["messages"], ensure_ascii=False)
        # The copy's bundle and note, then the whole new bundle: every rule, the new one once.
        assert (text.count("QZX1"), text.count("QZX5"), text.count("QZX6")) == (2, 2, 1)


@needs("claude", "@anthropic-ai/claude-code")
def test_claude_code_fork_is_distilled_for_its_own_turns(world: World) -> None:
    """A fork's file repeats its parent's turns (the same uuids, the fork's ``sessionId``): its
    SessionEnd sent them to the model again, and the parent's insights reached the journal twice."""
    w = world
    claude = install(w, "claude-code", "claude")
    with FakeModel(reply=distill_or_reply) as fake:
        w.use_model(fake)
        agent_env = claude_env(fake)
        projects = w.home / ".claude" / "projects"
        w.run([claude, "-p", "first prompt QZXA"], agent_env)
        session = newest_session(projects, "*.jsonl")
        w.journal_after("QZX4")
        w.run([claude, "-p", "forked prompt QZXB", "--resume", session, "--fork-session"], agent_env)
        w.journal_after_count("QZX4", 4)  # the fake insight names it twice: two entries
        prompts = [
            b["messages"][-1]["content"] for b in fake.model_requests() if '"insights"' in json.dumps(b)
        ]
        assert len(prompts) == 2
        sent = prompts[1][prompts[1].index("Conversation (") :]
        # The parent's turn only as context before the fork's own (marked as distilled).
        assert sent.count("[user]") == 1 and "QZXB" in sent and "QZXA" not in sent


@needs("claude", "@anthropic-ai/claude-code")
def test_claude_code_uses_a_local_scope_entry_and_status_says_so(world: World) -> None:
    w = world
    claude = install(w, "claude-code", "claude")
    # What docs/mcp.md's `claude mcp add coffer -- coffer-mcp` leaves, from an environment since gone.
    # Run in a worktree of the repository, as a CLI started there would: Claude Code keys the
    # entry by the main checkout, so it counts in the main checkout and in every worktree.
    worktree = w.repo.parent / "shop-feature"
    subprocess.run(
        ["git", "-C", str(w.repo), "worktree", "add", "-q", "-b", "feature", str(worktree)], check=True
    )
    for where in (worktree, w.repo):
        proc = subprocess.run(
            [
                claude,
                "mcp",
                *(["add", "coffer", "--", STALE_MCP] if where == worktree else ["get", "coffer"]),
            ],
            cwd=where,
            env=w.env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        assert proc.returncode == 0, proc.stderr
    got = w.run([claude, "mcp", "get", "coffer"]).stdout
    assert "Local config" in got and STALE_MCP in got  # Claude Code's own view: the stale entry wins
    assert "local scope for" in shadowed_status(w, "claude-code")
    assert "local scope for" in shadowed_status(w, "claude-code", worktree)


@needs("claude", "@anthropic-ai/claude-code")
def test_claude_code_runs_a_projects_mcp_json_entry_and_status_says_so(world: World, tmp_path: Path) -> None:
    """Claude Code 2.1.332 runs a repository's ``.mcp.json`` server in ``claude -p`` without any
    approval, and approves it from the repository's shared settings in a folder the user trusted:
    status said nothing of either (it knew 2.1.197, where only the user's own settings approved)."""
    w = world
    claude = install(w, "claude-code", "claude")
    # A coffer-mcp of the project's, from an environment coffer was not installed into.
    marker = tmp_path / "project-server-ran"
    spy = tmp_path / "project-venv" / "coffer-mcp"
    spy.parent.mkdir()
    spy.write_text(f'#!/bin/sh\ntouch {marker}\nexec {SCRIPTS / "coffer-mcp"} "$@"\n')
    spy.chmod(0o755)
    (w.repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"coffer": {"command": str(spy)}}}))

    def status() -> tuple[int, str]:
        proc = subprocess.run(
            [str(SCRIPTS / "coffer"), "agents", "status", "claude-code", "--no-check"],
            cwd=w.repo,
            env=w.env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        return proc.returncode, proc.stdout

    # Not approved: `claude -p` runs it all the same (Claude Code approves it as non-interactive).
    with FakeModel(reply="All done.") as fake:
        w.run([claude, "-p", "hello"], claude_env(fake))
    assert marker.exists()
    code, out = status()
    assert code == 1 and f"runs {spy}" in out and "run by `claude -p` unapproved" in out, out
    # The repository's shared settings approve it once the folder is trusted (what accepting
    # Claude Code's trust dialog records in ~/.claude.json).
    (w.repo / ".claude").mkdir()
    (w.repo / ".claude" / "settings.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))
    config = json.loads((w.home / ".claude.json").read_text())
    config.setdefault("projects", {})[str(w.repo)] = {"hasTrustDialogAccepted": True}
    (w.home / ".claude.json").write_text(json.dumps(config))
    assert "Project config" in w.run([claude, "mcp", "get", "coffer"]).stdout
    code, out = status()
    assert code == 1 and "project scope, approved" in out, out
    # Refused in the user's local settings of the project: coffer's own entry runs, status is quiet.
    (w.repo / ".claude" / "settings.local.json").write_text(
        json.dumps({"disabledMcpjsonServers": ["coffer"]})
    )
    assert "User config" in w.run([claude, "mcp", "get", "coffer"]).stdout
    marker.unlink()
    with FakeModel(reply="All done.") as fake:
        w.run([claude, "-p", "hello"], claude_env(fake))
    assert not marker.exists()
    code, out = status()
    assert code == 0 and ".mcp.json" not in out, out
