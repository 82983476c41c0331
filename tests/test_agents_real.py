"""Coffer inside the real agent CLIs, offline: Codex, Claude Code and OpenCode against a fake model.

Each test installs coffer into a temporary HOME with ``coffer agents install``, points the agent at
a scripted model on 127.0.0.1 (``fake_model.py``: it records every request and answers with one
call of ``coffer__remember``, then a final message), runs the agent non-interactively and checks,
from the requests the model saw and the files coffer wrote:

- the SessionStart hook ran and its rules reached the model (Codex only once the hook is trusted);
- coffer-mcp started and its five tools were offered to the model;
- the model's ``coffer__remember`` call wrote the fact into the temporary coffer home;
- the session was handed to distillation: Claude Code's SessionEnd, Codex's sweep of past sessions
  started by SessionStart (Codex has no SessionEnd), each turned into a journal entry by coffer's
  ``[llm]`` pointed at the same fake model.

The agents are not Python packages and the suite installs nothing from npm, so a test runs only
where its CLI is found: on ``PATH``, or in ``$COFFER_AGENT_CLIS`` (a folder such as the
``node_modules/.bin`` of ``npm install @openai/codex @anthropic-ai/claude-code opencode-ai``).
Otherwise it skips and says so. Checked with codex-cli 0.171.0, Claude Code 2.1.332, OpenCode 1.18.33.

The resume tests run a session, resume it (a rule added in between) and compact or clear it, and
check that each request holds the rules exactly once: a resumed session gets only a note of the
new rule, a compacted or cleared one the whole bundle again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import make_repo
from fake_model import FakeModel

from coffer_memory._agents.codex_trust import hook_hash

SCRIPTS = Path(sys.executable).parent
PROJECT_RULE = "Run make lint before every commit (project rule QZX1)."
GLOBAL_RULE = "Answer in British English (global rule QZX2)."
FACT = "The deploy script lives in ops/deploy.sh (fact QZX3)."
INSIGHT = {"name": "deploy-entry-point", "description": "Deploys start at ops/deploy.sh QZX4", "body": "QZX4"}
TOOLS = {"coffer__handoff", "coffer__list_memory", "coffer__recall", "coffer__remember", "coffer__resume"}
RUN_TIMEOUT = 600  # a bound for a hung agent on a loaded machine, not a timing assertion


def find_cli(name: str) -> str | None:
    """The agent's executable: in ``$COFFER_AGENT_CLIS`` first, then on ``PATH``."""
    folder = os.environ.get("COFFER_AGENT_CLIS")
    if folder and (Path(folder) / name).is_file():
        return str(Path(folder) / name)
    return shutil.which(name)


def needs(name: str, package: str) -> pytest.MarkDecorator:
    """Skip unless the CLI ``name`` is installed, saying how to install it."""
    return pytest.mark.skipif(
        find_cli(name) is None,
        reason=f"{name} is not installed (npm install {package}, then put it on PATH "
        "or set COFFER_AGENT_CLIS to its node_modules/.bin)",
    )


def distill_or_reply(body: dict[str, Any]) -> str:
    """The fake model's answer: insights for coffer's distillation prompt, a sentence otherwise."""
    return json.dumps({"insights": [INSIGHT]}) if '"insights"' in json.dumps(body) else "All done."


@attrs.frozen
class World:
    """A temporary user: HOME, coffer home (the default, ~/.coffer), a git repository, the env."""

    home: Path
    repo: Path
    env: dict[str, str]

    @property
    def coffer_home(self) -> Path:
        return self.home / ".coffer"

    def coffer(self, *args: str, exits: tuple[int, ...] = (0,)) -> str:
        """Run the real ``coffer`` command as this user; its stdout."""
        proc = subprocess.run(
            [str(SCRIPTS / "coffer"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        assert proc.returncode in exits, proc.stderr
        return proc.stdout

    def run(self, argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run an agent in the repository, stdin closed (as a script would)."""
        proc = subprocess.run(
            argv,
            cwd=self.repo,
            env={**self.env, **(env or {})},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        return proc

    def use_model(self, fake: FakeModel) -> None:
        """Point coffer's ``[llm]`` (distillation) at the fake model."""
        config = f'[llm]\nprovider = "openai"\nbase_url = "{fake.url}/v1"\nmodel = "fake"\n'
        (self.coffer_home / "config.toml").write_text(config)

    def facts(self) -> list[str]:
        """The text of every knowledge fact in the project's store."""
        return [p.read_text() for p in sorted(self.coffer_home.glob("memory/projects/*/knowledge/**/*.md"))]

    def journal_after(self, marker: str) -> str:
        """The project's journal once it holds ``marker``: distillation runs detached, after the agent."""
        return self.journal_after_count(marker, 1)

    def journal_after_count(self, marker: str, count: int) -> str:
        """The project's journal once it holds ``marker`` ``count`` times."""
        deadline = time.monotonic() + RUN_TIMEOUT
        text = ""
        while time.monotonic() < deadline:
            text = "".join(p.read_text() for p in self.coffer_home.glob("memory/projects/*/journal/*.md"))
            if text.count(marker) >= count:
                break
            time.sleep(0.5)
        log = self.coffer_home / "logs" / "hook.log"
        assert text.count(marker) >= count, (
            log.read_text() if log.exists() else "no journal entry, no hook.log"
        )
        return text


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    home = tmp_path / "user"
    home.mkdir()
    repo = make_repo(tmp_path / "shop")
    clis = os.environ.get("COFFER_AGENT_CLIS")
    path = os.pathsep.join([*([clis] if clis else []), str(SCRIPTS), os.environ.get("PATH", "/usr/bin:/bin")])
    # Only what an agent needs: no COFFER_HOME, CODEX_HOME or CLAUDE_CONFIG_DIR, so every agent
    # and coffer find their default folders under this HOME, as on a user's machine.
    env = {"HOME": str(home), "PATH": path, "LANG": "C.UTF-8", "TMPDIR": str(tmp_path)}
    w = World(home=home, repo=repo, env=env)
    w.coffer("memory", "rules", "--add", PROJECT_RULE, "--cwd", str(repo))
    w.coffer("memory", "rules", "--add", GLOBAL_RULE, "--global")
    yield w


def install(w: World, agent: str, cli: str) -> str:
    """``coffer agents install <agent>`` as the user; the path of the agent's CLI."""
    path = find_cli(cli)
    assert path is not None
    w.coffer("agents", "install", agent, "--no-check")
    return path


def assert_rules_in_order(text: str) -> None:
    """The session-start bundle: project rules, then global rules, then the seeded rules."""
    marks = [text.index("QZX1"), text.index("QZX2"), text.index("coffer__resume()")]
    assert marks == sorted(marks), text


# -- Codex -------------------------------------------------------------------------------------
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


# -- Claude Code -------------------------------------------------------------------------------
def claude_env(fake: FakeModel) -> dict[str, str]:
    """What Claude Code needs to talk to the fake model, offline."""
    return {
        "ANTHROPIC_BASE_URL": fake.url,
        "ANTHROPIC_API_KEY": "not-a-secret",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }


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


# -- OpenCode ----------------------------------------------------------------------------------
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


def distilled_conversations(fake: FakeModel) -> list[str]:
    """The turns each distillation request asked the model to extract from (not its context)."""
    prompts = [
        str(b["messages"][-1]["content"]) for b in fake.model_requests() if '"insights"' in json.dumps(b)
    ]
    return [p[p.index("Conversation (") :] for p in prompts]


# -- Resume, compaction and clear ----------------------------------------------------------------
NEW_RULE = "Squash fixups before merging (project rule QZX5)."


def rules_seen(body: dict[str, Any]) -> tuple[int, int]:
    """How often the request's conversation holds the first project rule and the one added later."""
    text = json.dumps(body.get("input") or body.get("messages"), ensure_ascii=False)
    return text.count("QZX1"), text.count("QZX5")


def newest_session(folder: Path, pattern: str) -> str:
    """The id (a UUID ending the file name) of the newest session file under ``folder``."""
    newest = max(folder.rglob(pattern), key=lambda p: p.stat().st_mtime)
    return newest.stem[-36:]


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


# -- A project-level entry named coffer wins over coffer's user-level one -----------------------
STALE_MCP = "/old/venv/bin/coffer-mcp"


def shadowed_status(w: World, agent: str, cwd: Path | None = None) -> str:
    """``coffer agents status`` run in the repository: it must say the agent runs another server."""
    proc = subprocess.run(
        [str(SCRIPTS / "coffer"), "agents", "status", agent, "--no-check"],
        cwd=cwd or w.repo,
        env=w.env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert proc.returncode == 1 and f"{STALE_MCP}; remove that entry" in proc.stdout, proc.stdout
    return proc.stdout


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


@needs("opencode", "opencode-ai")
def test_opencode_merges_a_project_entry_and_status_says_so(world: World) -> None:
    w = world
    opencode = install(w, "opencode", "opencode")
    (w.repo / "opencode.json").write_text(
        json.dumps({"mcp": {"coffer": {"type": "local", "command": [STALE_MCP]}}})
    )
    agent_env = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"}
    got = json.loads(w.run([opencode, "debug", "config"], agent_env).stdout)
    assert got["mcp"]["coffer"]["command"] == [STALE_MCP]
    assert "project config" in shadowed_status(w, "opencode")


# -- Codex passes an MCP server only the variables it is told to --------------------------------
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
