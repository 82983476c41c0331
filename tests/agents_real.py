"""What the tests of coffer inside the real agent CLIs share (``test_agents_real_codex.py``,
``test_agents_real_claude.py``, ``test_agents_real_opencode.py``): Codex, Claude Code and OpenCode,
offline, against a fake model.

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


def claude_env(fake: FakeModel) -> dict[str, str]:
    """What Claude Code needs to talk to the fake model, offline."""
    return {
        "ANTHROPIC_BASE_URL": fake.url,
        "ANTHROPIC_API_KEY": "not-a-secret",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }


def distilled_conversations(fake: FakeModel) -> list[str]:
    """The turns each distillation request asked the model to extract from (not its context)."""
    prompts = [
        str(b["messages"][-1]["content"]) for b in fake.model_requests() if '"insights"' in json.dumps(b)
    ]
    return [p[p.index("Conversation (") :] for p in prompts]


NEW_RULE = "Squash fixups before merging (project rule QZX5)."


def rules_seen(body: dict[str, Any]) -> tuple[int, int]:
    """How often the request's conversation holds the first project rule and the one added later."""
    text = json.dumps(body.get("input") or body.get("messages"), ensure_ascii=False)
    return text.count("QZX1"), text.count("QZX5")


def newest_session(folder: Path, pattern: str) -> str:
    """The id (a UUID ending the file name) of the newest session file under ``folder``."""
    newest = max(folder.rglob(pattern), key=lambda p: p.stat().st_mtime)
    return newest.stem[-36:]


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
