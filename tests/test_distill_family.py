"""Sessions that only begin with the same prompt are no family: they distil in parallel, whole.

Two ``claude -p "same prompt"`` runs (or worktrees sharing a store) share their first user turn
and nothing else: different session ids, different line uuids, different answers. A claim held
the *family* of sessions beginning with the same turn (so a fork waits for its parent's running
distillation), and each of these runs waited for the other's model call, up to 630 s, after which a
Claude Code session was left ``in_progress`` until someone ran ``coffer distill --sweep``. A fork
(its parent's turns copied, answers and all) still waits; a session end that was left
``in_progress`` is picked up by the next session end.

The sessions are real files in Claude Code's format, distilled by ``coffer-hook`` SessionEnd
processes racing each other against a real HTTP model on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_distill
from agent_samples import AgentSamples, _ClaudeFile, _Rollout, claude_project_folder
from http_scripted import ScriptedServer, serve
from test_distill_grown import (
    MARK,
    claude_turns,
    fork_claude_session,
    insight_counts,
    one_insight_per_mark,
    sent_conversation,
    start_session_end,
    wait_distilled,
)

from coffer_memory import MemoryService
from coffer_memory._transcripts.ledger import Ledger

samples = test_distill.samples

PROMPT = "Set up the release checklist for this repository, please."
# A bound on how long the model holds a distillation (a barrier, not a timing assertion): longer
# than ``wait_distilled``'s, so a session that waits for the held one fails there.
HOLD_SECONDS = 90.0


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    yield from serve(monkeypatch, one_insight_per_mark)


@pytest.fixture
def home(tmp_home: Path, llm: ScriptedServer) -> Path:
    tmp_home.mkdir(parents=True, exist_ok=True)
    # The client waits longer than the model holds an answer: the held call must not time out.
    (tmp_home / "config.toml").write_text(
        f'[llm]\nprovider = "openai"\nmodel = "test-chat"\nbase_url = "{llm.url}"\n'
        f"max_retries = 0\ntimeout_seconds = {HOLD_SECONDS + 60}\n"
    )
    return tmp_home


class HeldWhile:
    """A model that holds every request whose turns to distil name ``held`` until ``release`` is
    set (or ``HOLD_SECONDS``), and answers the others at once."""

    def __init__(self, held: str) -> None:
        self.held = held
        self.arrived = threading.Event()
        self.release = threading.Event()

    def __call__(self, body: Any) -> Any:
        if self.held in sent_conversation(body):
            self.arrived.set()
            self.release.wait(HOLD_SECONDS)
        return one_insight_per_mark(body)


def claude_run(samples: AgentSamples, prompt: str, mark: str) -> tuple[str, Path]:
    """What ``claude -p "<prompt>"`` writes in the project: a new session (its own id and line
    uuids) of the prompt and an answer naming ``mark``."""
    session_id = str(uuid.uuid4())
    folder = samples.homes().claude / "projects" / claude_project_folder(samples.project_dir)
    path = folder / f"{session_id}.jsonl"
    run = _ClaudeFile(session_id, samples.project_dir)
    run.user("2026-12-01T09:00:00.000Z", prompt)
    run.say("2026-12-01T09:00:05.000Z", f"{session_id}-answer", f"Done: {mark} lists the release steps.")
    run.write(path)
    return session_id, path


def test_two_runs_of_one_prompt_distil_in_parallel(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """The second run's SessionEnd used to wait for the first one's model call (it held the claim
    of every session beginning with the same turn): here it never finished while the first was
    held. Now each is distilled whole, at once, and neither's insights are written twice."""
    first, first_path = claude_run(samples, PROMPT, "MARK-FIRST")
    second, second_path = claude_run(samples, PROMPT, "MARK-SECOND")
    model = HeldWhile("MARK-FIRST")
    llm.default = model
    start_session_end(home, first, first_path, samples.project_dir)
    assert model.arrived.wait(60), "the first run's distillation never asked the model"
    try:
        start_session_end(home, second, second_path, samples.project_dir)
        wait_distilled(home, second, runs=1)  # while the first is still held
    finally:
        model.release.set()
    wait_distilled(home, first, runs=1)
    assert insight_counts(samples, home) == {"insight-mark-first": 1, "insight-mark-second": 1}
    sent = sorted(sent_conversation(r.body) for r in llm.requests)
    assert [sorted(set(MARK.findall(s))) for s in sent] == [["MARK-FIRST"], ["MARK-SECOND"]]
    assert all(PROMPT in s and s.count("[user]") == 1 for s in sent)  # each whole, prompt and all
    assert not (home / "logs" / "hook.log").exists()


def test_a_run_distilled_after_another_of_the_same_prompt_is_distilled_whole(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """Distilled one after the other, the second run counted the shared prompt as distilled by the
    first and sent it as context only: what it sent depended on which run ended first."""
    first, _ = claude_run(samples, PROMPT, "MARK-FIRST")
    second, _ = claude_run(samples, PROMPT, "MARK-SECOND")
    with MemoryService(home) as svc:
        assert svc.distill_session("claude-code", first).status == "distilled"
        later = svc.distill_session("claude-code", second)
    assert (later.status, later.detail) == ("distilled", None)
    assert PROMPT in sent_conversation(llm.requests[-1].body)


def fork_of_a_held_run(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> tuple[str, str, Path, HeldWhile]:
    """A run whose SessionEnd is asking a model that holds its answer, and a fork of it with a turn
    of its own: (the run's id, the fork's id, the fork's file, the model)."""
    parent, parent_path = claude_run(samples, PROMPT, "MARK-PARENT")
    model = HeldWhile("MARK-PARENT")
    llm.default = model
    start_session_end(home, parent, parent_path, samples.project_dir)
    assert model.arrived.wait(60), "the parent's distillation never asked the model"
    fork_id = str(uuid.uuid4())
    fork = fork_claude_session(parent_path, fork_id)
    claude_turns(fork, "MARK-FORK", minute=2)
    return parent, fork_id, fork, model


def test_a_fork_of_a_run_still_waits_for_it(home: Path, samples: AgentSamples, llm: ScriptedServer) -> None:
    """A fork copies its parent's answer too: it still waits for the parent's running distillation
    and then sends only its own turns."""
    parent, fork_id, fork, model = fork_of_a_held_run(home, samples, llm)
    try:
        with MemoryService(home) as svc:
            held = svc.distill_session("claude-code", fork_id)
        assert held.status == "in_progress" and f"session {parent}" in (held.detail or "")
        start_session_end(home, fork_id, fork, samples.project_dir)
    finally:
        model.release.set()
    wait_distilled(home, parent, runs=1)
    wait_distilled(home, fork_id, runs=1)
    assert insight_counts(samples, home) == {"insight-mark-fork": 1, "insight-mark-parent": 1}
    sent = [sorted(set(MARK.findall(sent_conversation(r.body)))) for r in llm.requests]
    assert sent == [["MARK-PARENT"], ["MARK-FORK"]]


def test_a_session_end_left_in_progress_is_distilled_by_the_next_end(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """A session end that gave up waiting (``in_progress``) was left undistilled until someone ran
    ``coffer distill --sweep``: Claude Code's session start runs none. The next session end, of any
    session of the agent, now distils it."""
    parent, fork_id, _, model = fork_of_a_held_run(home, samples, llm)
    try:
        with MemoryService(home) as svc:  # the fork's end, giving up at once
            left = svc.transcripts.end_session("claude-code", fork_id, wait_seconds=0)
        assert left.status == "in_progress"
    finally:
        model.release.set()
    wait_distilled(home, parent, runs=1)
    other, other_path = claude_run(samples, "Another task entirely.", "MARK-OTHER")
    start_session_end(home, other, other_path, samples.project_dir)
    wait_distilled(home, other, runs=1)
    wait_distilled(home, fork_id, runs=1)
    assert insight_counts(samples, home) == {
        "insight-mark-fork": 1,
        "insight-mark-other": 1,
        "insight-mark-parent": 1,
    }
    with MemoryService(home) as svc:  # nothing is left: a later end picks up nothing again
        assert svc.transcripts.ledger.left("claude-code") == []


def codex_run(samples: AgentSamples, prompt: str, mark: str) -> str:
    """What ``codex exec "<prompt>"`` writes: a rollout of its own (a new thread id)."""
    thread = str(uuid.uuid4())
    day = samples.homes().codex / "sessions" / "2026" / "12" / "01"
    run = _Rollout()
    meta = {"id": thread, "timestamp": "2026-12-01T09:00:00.000Z", "cwd": str(samples.project_dir)}
    run.line(
        "2026-12-01T09:00:00.000Z", "session_meta", {**meta, "originator": "codex_exec", "source": "exec"}
    )
    run.turn("2026-12-01T09:00:01.000Z", "user", prompt)
    run.turn("2026-12-01T09:00:09.000Z", "assistant", f"Done: {mark} lists the release steps.")
    day.mkdir(parents=True, exist_ok=True)
    (day / f"rollout-2026-12-01T09-00-00-{thread}.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in run.rows)
    )
    return thread


def test_a_codex_run_is_distilled_while_another_run_of_its_prompt_is(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """``coffer distill`` of a Codex run while another run of the same prompt is distilled by
    another process answered ``in_progress``, naming that run as its fork or parent."""
    first = codex_run(samples, PROMPT, "MARK-FIRST")
    second = codex_run(samples, PROMPT, "MARK-SECOND")
    model = HeldWhile("MARK-FIRST")
    llm.default = model
    argv = ["--home", str(home), "--agent", "codex", "--session-id", first, "--cwd", str(samples.project_dir)]
    env = {**os.environ, "COFFER_HOME": str(home)}
    process = subprocess.Popen([sys.executable, "-m", "coffer_memory._session_end", *argv], env=env)
    try:
        assert model.arrived.wait(60), "the first run's distillation never asked the model"
        with MemoryService(home) as svc:
            second_result = svc.distill_session("codex", second)
    finally:
        model.release.set()
        assert process.wait(120) == 0
    assert (second_result.status, second_result.detail) == ("distilled", None), second_result
    wait_distilled(home, first, runs=1)
    sent = sorted(sent_conversation(r.body) for r in llm.requests)
    assert [sorted(set(MARK.findall(s))) for s in sent] == [["MARK-FIRST"], ["MARK-SECOND"]]


def test_a_claim_waits_only_for_a_session_that_shares_its_first_answer(tmp_path: Path) -> None:
    """The family of a claim: the same agent, store and first turn, and the same turns up to the
    first answer (``head``). A claim of an older version (no head recorded) or one that does not
    say its head holds as before."""
    ledger = Ledger(tmp_path / "ledger.db")
    try:
        assert ledger.claim("claude-code", "run-1", "h1", store="p", first="d1", head=["d1", "a1"])
        assert ledger.claim("claude-code", "run-2", "h2", store="p", first="d1", head=["d1", "a2"])
        assert ledger.holder("claude-code", "run-3", store="p", first="d1", head=["d1", "a3"]) is None
        # Only prompts so far (no answer, no head): nothing it could share goes beyond them.
        assert ledger.claim("claude-code", "prompt-only", "h4", store="p", first="d1", head=[])
        assert not ledger.claim("claude-code", "fork", "h5", store="p", first="d1", head=["d1", "a1"])
        assert ledger.holder("claude-code", "fork", store="p", first="d1", head=["d1", "a1"]) == "run-1"
        assert not ledger.claim("claude-code", "unsaid", "h6", store="p", first="d1")
    finally:
        ledger.close()


def test_an_older_claim_without_a_head_holds_its_family(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.db")
    try:
        assert ledger.claim("claude-code", "old", "h1", store="p", first="d1")
        assert not ledger.claim("claude-code", "new", "h2", store="p", first="d1", head=["d1", "a9"])
    finally:
        ledger.close()


def test_left_sessions_are_kept_once_and_forgotten(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.db")
    try:
        ledger.leave("claude-code", "s1", "/work/a")
        ledger.leave("claude-code", "s1", "/work/b")
        ledger.leave("codex", "s2", None)
        assert ledger.left("claude-code") == [("s1", "/work/b")]
        ledger.picked("claude-code", "s1")
        assert ledger.left("claude-code") == [] and ledger.left("codex") == [("s2", None)]
    finally:
        ledger.close()
