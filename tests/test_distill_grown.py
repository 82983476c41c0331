"""A session that grows after it was distilled (``claude -p --continue``/``--resume``, ``codex exec
resume``) is distilled again only for the turns added since; nothing already in the journal is
written twice, and a rewritten transcript sends only the turns the ledger has not seen.

The sample sessions are real files in the agents' formats (``agent_samples``); a grown session is
made by appending lines in the same format to the agent's own file, as the agent does.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
import test_distill
from agent_samples import AgentSamples
from http_scripted import ScriptedServer, answer, fail, serve

from coffer_memory import MemoryService
from coffer_memory._scope import project_id_for
from coffer_memory._store.paths import store_name_for_project
from coffer_memory._transcripts.ledger import Ledger

USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
MARK = re.compile(r"MARK-[A-Z]+")
CONVERSATION = "Conversation ("

samples = test_distill.samples  # the same sample agent homes, around a git project


def sent_conversation(body: Any) -> str:
    """The part of a distillation prompt the model is asked to extract from (not the context)."""
    prompt: str = body["messages"][-1]["content"]
    return prompt[prompt.index(CONVERSATION) :]


def one_insight_per_mark(body: Any) -> Any:
    """One insight per distinct ``MARK-X`` in the turns to distill, so a turn distilled twice
    shows up as a repeated insight in the journal."""
    marks = sorted(set(MARK.findall(sent_conversation(body))))
    payload = {
        "insights": [
            {"name": f"insight-{m.lower()}", "description": f"What {m} decided.", "body": f"Details of {m}."}
            for m in marks
        ]
    }
    return answer(json.dumps(payload), usage=USAGE)(body)


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    yield from serve(monkeypatch, one_insight_per_mark)


@pytest.fixture
def home(tmp_home: Path, llm: ScriptedServer) -> Path:
    test_distill.write_llm_config(tmp_home, llm.url)
    return tmp_home


def session_in_project(home: Path, samples: AgentSamples, agent: str) -> tuple[str, Path]:
    """A sample session of ``agent`` in the git project, and the file it is read from."""
    expected = next(e for e in samples.expected_for(agent) if e.project_path == str(samples.project_dir))
    with MemoryService(home) as svc:
        source = Path(svc.transcript_summary(agent, expected.session_id).source_path)
    return expected.session_id, source


def append_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def claude_turns(path: Path, mark: str, minute: int) -> None:
    """Append a prompt and its answer to a Claude Code session file, chained like the CLI does."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    last = [r for r in rows if r.get("type") in ("user", "assistant") and not r.get("isSidechain")][-1]
    common = {k: last[k] for k in ("sessionId", "cwd", "version", "gitBranch", "userType") if k in last}
    ts = f"2026-12-01T10:{minute:02d}:00.000Z"
    user_uuid, reply_uuid = str(uuid.uuid4()), str(uuid.uuid4())
    append_lines(
        path,
        [
            {
                **common,
                "parentUuid": last["uuid"],
                "isSidechain": False,
                "type": "user",
                "message": {"role": "user", "content": f"Shall we go with {mark} for the cache layout?"},
                "uuid": user_uuid,
                "timestamp": ts,
            },
            {
                **common,
                "parentUuid": user_uuid,
                "isSidechain": False,
                "type": "assistant",
                "message": {
                    "id": f"msg_{uuid.uuid4().hex[:24]}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-opus-4-5-20251101",
                    "content": [{"type": "text", "text": f"Yes: {mark} keeps one file per project."}],
                    "stop_reason": "end_turn",
                },
                "requestId": f"req_{uuid.uuid4().hex[:24]}",
                "uuid": reply_uuid,
                "timestamp": ts,
            },
        ],
    )


def codex_resume(path: Path, session_id: str, cwd: Path, mark: str, minute: int) -> None:
    """Append what ``codex exec resume`` adds to a rollout: another ``session_meta``, a turn context,
    and the new turns with their ``event_msg`` twins."""
    ts = f"2026-12-01T11:{minute:02d}:00.000Z"
    prompt, reply = f"Resume: shall we go with {mark}?", f"Yes, {mark} is the layout to keep."

    def line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": ts, "type": kind, "payload": payload}

    append_lines(
        path,
        [
            line(
                "session_meta",
                {
                    "id": session_id,
                    "timestamp": ts,
                    "cwd": str(cwd),
                    "originator": "codex_exec",
                    "cli_version": "0.63.0",
                    "source": "exec",
                },
            ),
            line("turn_context", {"cwd": str(cwd), "approval_policy": "never", "model": "gpt-5-codex"}),
            line(
                "response_item",
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
            ),
            line("event_msg", {"type": "user_message", "message": prompt}),
            line(
                "response_item",
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": reply}]},
            ),
            line("event_msg", {"type": "agent_message", "message": reply}),
        ],
    )


def journal_text(samples: AgentSamples, home: Path) -> str:
    store = store_name_for_project(project_id_for(samples.project_dir))
    with MemoryService(home) as svc:
        days = svc.journal(store=store)
    return "\n".join(entry.text for day in days for entry in day.entries)


def insight_counts(samples: AgentSamples, home: Path) -> dict[str, int]:
    names = re.findall(r"\*\*(insight-mark-[a-z]+)\*\*", journal_text(samples, home))
    return {n: names.count(n) for n in sorted(set(names))}


def start_session_end(home: Path, session_id: str, transcript: Path, cwd: Path) -> None:
    """What Claude Code does at the end of each ``claude -p`` run: SessionEnd, reason ``other``
    (``coffer-hook`` starts the distillation in a detached process and returns)."""
    stdin = json.dumps(
        {
            "session_id": session_id,
            "transcript_path": str(transcript),
            "cwd": str(cwd),
            "hook_event_name": "SessionEnd",
            "reason": "other",
        }
    ).encode()
    hook = str(Path(sys.executable).parent / "coffer-hook")
    env = {**os.environ, "COFFER_HOME": str(home)}
    proc = subprocess.run(
        [hook, "--agent", "claude-code"], input=stdin, env=env, capture_output=True, timeout=30
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


def wait_distilled(home: Path, session_id: str, runs: int) -> None:
    """Wait until the ledger holds ``runs`` finished distillations of the session."""
    ledger = Ledger(home / "ledger.db")
    deadline = time.monotonic() + 60  # a bound on the background worker, not a timing assertion
    try:
        while time.monotonic() < deadline:
            entries = ledger.entries(session_id=session_id)
            if len([e for e in entries if e.status == "done"]) >= runs:
                return
            time.sleep(0.2)
    finally:
        ledger.close()
    log = home / "logs" / "hook.log"
    raise AssertionError(f"run {runs} did not finish: {log.read_text() if log.exists() else 'no log'}")


def run_session_end(home: Path, session_id: str, transcript: Path, cwd: Path, runs: int) -> None:
    """One SessionEnd, waited for until the session's ``runs``-th distillation is done."""
    start_session_end(home, session_id, transcript, cwd)
    wait_distilled(home, session_id, runs)


def test_claude_session_continued_twice_is_distilled_once_per_turn(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    session_id, source = session_in_project(home, samples, "claude-code")
    for run, mark in enumerate(("MARK-ONE", "MARK-TWO", "MARK-THREE"), start=1):
        claude_turns(source, mark, minute=run)  # claude -p, then claude -p --continue twice
        run_session_end(home, session_id, source, samples.project_dir, runs=run)
    assert insight_counts(samples, home) == {
        "insight-mark-one": 1,
        "insight-mark-three": 1,
        "insight-mark-two": 1,
    }
    sent = [sent_conversation(r.body) for r in llm.requests]
    assert len(sent) == 3
    assert [sorted(set(MARK.findall(s))) for s in sent] == [["MARK-ONE"], ["MARK-TWO"], ["MARK-THREE"]]
    # The first run sent the whole session; the later ones only the prompt and answer added.
    assert sent[0].count("[user]") > 1
    assert [(s.count("[user]"), s.count("[assistant]")) for s in sent[1:]] == [(1, 1), (1, 1)]
    assert not (home / "logs" / "hook.log").exists()


def test_codex_resume_distilled_by_hand_sends_only_the_new_turns(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    session_id, source = session_in_project(home, samples, "codex")
    coffer = str(Path(sys.executable).parent / "coffer")

    def distill() -> dict[str, Any]:
        proc = subprocess.run(
            [coffer, "--home", str(home), "distill", session_id, "--agent", "codex", "--json"],
            capture_output=True,
            timeout=60,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        result: dict[str, Any] = json.loads(proc.stdout)
        return result

    codex_resume(source, session_id, samples.project_dir, "MARK-FIRST", minute=1)
    first = distill()
    codex_resume(source, session_id, samples.project_dir, "MARK-SECOND", minute=2)
    second = distill()
    again = distill()
    assert (first["status"], second["status"], again["status"]) == (
        "distilled",
        "distilled",
        "already_distilled",
    )
    assert [i["name"] for i in second["insights"]] == ["insight-mark-second"]
    assert "were distilled before" in second["detail"]
    assert insight_counts(samples, home) == {"insight-mark-first": 1, "insight-mark-second": 1}
    assert len(llm.requests) == 2
    # The new turns come with the turns just before them as context, marked as already distilled.
    assert "MARK-FIRST" in llm.requests[1].body["messages"][-1]["content"]


def test_rewritten_transcript_sends_only_turns_the_ledger_has_not_seen(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    session_id, source = session_in_project(home, samples, "claude-code")
    claude_turns(source, "MARK-KEEP", minute=1)
    claude_turns(source, "MARK-EDIT", minute=2)
    with MemoryService(home) as svc:
        assert svc.distill_session("claude-code", session_id).status == "distilled"
        # The last prompt edited in place (the file rewritten, not appended to), one turn added.
        source.write_text(source.read_text().replace("go with MARK-EDIT", "go with MARK-CHANGED"))
        claude_turns(source, "MARK-NEW", minute=3)
        rewritten = svc.distill_session("claude-code", session_id)
        assert rewritten.status == "distilled"
        assert sorted(i.name for i in rewritten.insights) == ["insight-mark-changed", "insight-mark-new"]
        assert "rewritten" in (rewritten.detail or "")
        # Cut back to what was distilled before: nothing is new, the model is not asked.
        lines = source.read_text().splitlines(keepends=True)
        source.write_text("".join(lines[:-2]))
        calls = len(llm.requests)
        cut = svc.distill_session("claude-code", session_id)
        assert cut.status == "already_distilled"
        assert len(llm.requests) == calls
        # It said "turns 8-7 of 7; turns 1-6 were distilled before".
        assert cut.detail is not None and re.fullmatch(
            r"no new turns: all \d+ were distilled before", cut.detail
        )
    assert insight_counts(samples, home) == {
        "insight-mark-changed": 1,
        "insight-mark-edit": 1,
        "insight-mark-keep": 1,
        "insight-mark-new": 1,
    }


def test_session_distilled_before_the_upgrade_is_continued_from_its_ledger_row(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """A ledger row written before turns were tracked (only the content hash) still marks the
    distilled prefix: the grown session sends only what follows it."""
    session_id, source = session_in_project(home, samples, "claude-code")
    claude_turns(source, "MARK-OLD", minute=1)
    with MemoryService(home) as svc:
        assert svc.distill_session("claude-code", session_id).status == "distilled"
        svc.transcripts.close()

        # The ledger file as the version before this one wrote it: no turn columns.
        conn = apsw.Connection(str(home / "ledger.db"))
        conn.execute("ALTER TABLE distilled_sessions DROP COLUMN message_count")
        conn.execute("ALTER TABLE distilled_sessions DROP COLUMN message_digests")
        conn.close()
        claude_turns(source, "MARK-LATER", minute=2)
        later = svc.distill_session("claude-code", session_id)
    assert [i.name for i in later.insights] == ["insight-mark-later"]
    assert insight_counts(samples, home) == {"insight-mark-later": 1, "insight-mark-old": 1}


def test_sweep_distills_a_grown_session_for_its_new_turns(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    session_id, source = session_in_project(home, samples, "claude-code")
    claude_turns(source, "MARK-SWEPT", minute=1)
    with MemoryService(home) as svc:
        assert svc.distill_session("claude-code", session_id).status == "distilled"
        claude_turns(source, "MARK-GROWN", minute=2)
        swept = svc.sweep("claude-code", limit=100, min_idle_seconds=0)
        (grown,) = [r for r in swept.results if r.session_id == session_id]
        assert [i.name for i in grown.insights] == ["insight-mark-grown"]
        assert session_id not in {r.session_id for r in svc.sweep("claude-code", min_idle_seconds=0).results}
    assert insight_counts(samples, home) == {"insight-mark-grown": 1, "insight-mark-swept": 1}


# How long the model holds the first distillation's answer, waiting for a racing one: a barrier,
# not a timing assertion (the racing request arrives at once when two ends send the same turns).
HOLD_SECONDS = 4.0


class HeldFirst:
    """A model that holds its first request until a second one arrives (or ``HOLD_SECONDS``),
    so two distillations of one session overlap for sure if both send to the model."""

    def __init__(self, first: Any = one_insight_per_mark) -> None:
        self.first = first
        self.arrived = threading.Event()
        self.raced = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, body: Any) -> Any:
        with self._lock:
            is_first = not self.arrived.is_set()
            self.arrived.set()
        if not is_first:
            self.raced.set()
            return one_insight_per_mark(body)
        self.raced.wait(HOLD_SECONDS)
        return self.first(body)


def race_two_session_ends(home: Path, samples: AgentSamples, llm: ScriptedServer, model: HeldFirst) -> str:
    """Two ``coffer-hook`` SessionEnds of one session in flight at once: the first is asking the
    model about turn ONE when the session has grown by turn TWO and ends again."""
    session_id, source = session_in_project(home, samples, "claude-code")
    llm.default = model
    claude_turns(source, "MARK-ONE", minute=1)
    start_session_end(home, session_id, source, samples.project_dir)
    assert model.arrived.wait(60), "the first distillation never asked the model"
    claude_turns(source, "MARK-TWO", minute=2)  # claude -p --continue ran meanwhile
    start_session_end(home, session_id, source, samples.project_dir)
    return session_id


def test_two_session_ends_racing_distill_each_turn_once(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    session_id = race_two_session_ends(home, samples, llm, HeldFirst())
    wait_distilled(home, session_id, runs=2)
    assert insight_counts(samples, home) == {"insight-mark-one": 1, "insight-mark-two": 1}
    sent = [sorted(set(MARK.findall(sent_conversation(r.body)))) for r in llm.requests]
    assert sent == [["MARK-ONE"], ["MARK-TWO"]]
    assert not (home / "logs" / "hook.log").exists()


def test_racing_session_end_sends_the_turns_of_a_distillation_that_failed(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """The first distillation's model call fails: its claim is released and the waiting second
    end sends the first one's turns with its own, so nothing is lost."""
    session_id = race_two_session_ends(home, samples, llm, HeldFirst(first=fail(500)))
    wait_distilled(home, session_id, runs=1)
    assert insight_counts(samples, home) == {"insight-mark-one": 1, "insight-mark-two": 1}
    sent = [sorted(set(MARK.findall(sent_conversation(r.body)))) for r in llm.requests]
    assert sent == [["MARK-ONE"], ["MARK-ONE", "MARK-TWO"]]


def fork_claude_session(source: Path, fork_id: str) -> Path:
    """What ``claude --resume <id> --fork-session`` writes (Claude Code 2.1.332): a new file whose
    lines are the parent's, the same uuids under the fork's ``sessionId``."""
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.startswith("{")]
    fork = source.with_name(f"{fork_id}.jsonl")
    append_lines(fork, [{**r, "sessionId": fork_id} if "sessionId" in r else r for r in rows])
    return fork


def test_a_fork_sends_only_the_turns_after_the_fork(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """A fork's first distillation sent the parent's turns again: its insights twice in the journal."""
    session_id, source = session_in_project(home, samples, "claude-code")
    claude_turns(source, "MARK-PARENT", minute=1)
    run_session_end(home, session_id, source, samples.project_dir, runs=1)
    fork_id = str(uuid.uuid4())
    fork = fork_claude_session(source, fork_id)
    claude_turns(fork, "MARK-FORK", minute=2)
    run_session_end(home, fork_id, fork, samples.project_dir, runs=1)
    assert insight_counts(samples, home) == {"insight-mark-fork": 1, "insight-mark-parent": 1}
    sent = [sent_conversation(r.body) for r in llm.requests]
    assert [sorted(set(MARK.findall(s))) for s in sent] == [["MARK-PARENT"], ["MARK-FORK"]]
    assert (sent[1].count("[user]"), sent[1].count("[assistant]")) == (1, 1)
    # The parent's last turns came along as context, marked as distilled.
    assert "MARK-PARENT" in llm.requests[1].body["messages"][-1]["content"]
    with MemoryService(home) as svc:
        claude_turns(fork, "MARK-LATER", minute=3)  # the fork goes on: its own turns count
        later = svc.distill_session("claude-code", fork_id)
        parent = svc.distill_session("claude-code", session_id)
    assert [i.name for i in later.insights] == ["insight-mark-later"]
    assert later.detail is not None and later.detail.endswith("were distilled before")
    assert parent.status == "already_distilled"
    with MemoryService(home) as svc:  # what the fork's first distillation said
        fork_id2 = str(uuid.uuid4())
        fork_claude_session(source, fork_id2)
        claude_turns(source.with_name(f"{fork_id2}.jsonl"), "MARK-SECOND", minute=4)
        second = svc.distill_session("claude-code", fork_id2)
    assert [i.name for i in second.insights] == ["insight-mark-second"]
    # Its first turns were distilled as the parent and as the first fork: either may be named.
    named = re.search(
        r"were distilled before, as session (\S+) \(the two begin with the same turns\)$", second.detail or ""
    )
    assert named is not None and named.group(1) in {session_id, fork_id}


def fork_while_the_parent_asks(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> tuple[str, str, Path, HeldFirst]:
    """The parent's SessionEnd asking a model that holds its answer, and a fork with a turn of its
    own made meanwhile: (parent id, fork id, the fork's file, the model)."""
    session_id, source = session_in_project(home, samples, "claude-code")
    model = HeldFirst()
    llm.default = model
    claude_turns(source, "MARK-PARENT", minute=1)
    start_session_end(home, session_id, source, samples.project_dir)
    assert model.arrived.wait(60), "the parent's distillation never asked the model"
    fork_id = str(uuid.uuid4())
    fork = fork_claude_session(source, fork_id)
    claude_turns(fork, "MARK-FORK", minute=2)
    return session_id, fork_id, fork, model


def test_a_fork_ending_while_its_parent_is_distilled_waits_for_it(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """``claude --resume <id> --fork-session -p`` ending while the parent's SessionEnd is still
    asking the model: the fork used to claim only itself, see no distilled parent yet and send
    the parent's turns again (its insights twice in the journal). It now waits for the family."""
    session_id, fork_id, fork, _ = fork_while_the_parent_asks(home, samples, llm)
    start_session_end(home, fork_id, fork, samples.project_dir)
    wait_distilled(home, session_id, runs=1)
    wait_distilled(home, fork_id, runs=1)
    assert insight_counts(samples, home) == {"insight-mark-fork": 1, "insight-mark-parent": 1}
    sent = [sorted(set(MARK.findall(sent_conversation(r.body)))) for r in llm.requests]
    assert sent == [["MARK-PARENT"], ["MARK-FORK"]]


def test_a_fork_held_by_its_parent_says_which_session_holds_it(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """``coffer distill <fork>`` while the parent's SessionEnd asks the model answered
    ``in_progress`` and nothing more, as if the fork itself were being distilled somewhere."""
    session_id, fork_id, _, model = fork_while_the_parent_asks(home, samples, llm)
    try:
        with MemoryService(home) as svc:
            held = svc.distill_session("claude-code", fork_id)
            again = svc.distill_session("claude-code", session_id)
    finally:
        model.raced.set()  # the parent's answer goes on
    assert held.status == "in_progress" and held.detail is not None, held
    assert f"session {session_id}, which begins with the same turn" in held.detail
    assert again.status == "in_progress" and again.detail is not None
    assert again.detail.startswith("another distillation of this session is running")
    wait_distilled(home, session_id, runs=1)


def test_a_claim_waits_for_a_running_claim_of_its_family_only(tmp_path: Path) -> None:
    """Another session's running claim holds a claim back only with the same agent, store and
    first turn; once finished (or released) the fork claims."""
    ledger = Ledger(tmp_path / "ledger.db")
    try:
        assert ledger.claim("claude-code", "parent", "h1", store="project-a", first="d1")
        for agent, session, store, first in (
            ("claude-code", "other-store", "project-b", "d1"),
            ("codex", "other-agent", "project-a", "d1"),
            ("claude-code", "other-start", "project-a", "d2"),
            ("claude-code", "no-turns", "project-a", ""),
        ):
            assert ledger.claim(agent, session, f"h-{session}", store=store, first=first), session
        assert not ledger.claim("claude-code", "fork", "h2", store="project-a", first="d1")
        ledger.finish(
            "claude-code",
            "parent",
            "h1",
            store="project-a",
            insights=1,
            prompt_tokens=1,
            completion_tokens=1,
            message_digests=["d1", "d2"],
        )
        assert ledger.claim("claude-code", "fork", "h2", store="project-a", first="d1")
    finally:
        ledger.close()


def test_a_family_claim_left_by_a_dead_distiller_holds_no_fork(tmp_path: Path) -> None:
    """A family never waits for a claim nobody will finish: the parent's claim of a process killed
    mid-distillation (this machine) is passed over at once, one from another machine sharing the
    home only once it is older than the stale age."""
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, pathlib; from coffer_memory._transcripts.ledger import Ledger; "
            "assert Ledger(pathlib.Path(sys.argv[1])).claim('claude-code', 'parent', 'h1', store='project-a', first='d1')",
            str(tmp_path / "ledger.db"),
        ],
        capture_output=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr  # it exited (as if killed) holding its claim
    ledger = Ledger(tmp_path / "ledger.db")
    try:
        assert [e.status for e in ledger.entries(session_id="parent")] == ["running"]
        assert ledger.holder("claude-code", "fork", store="project-a", first="d1") is None
        assert ledger.claim("claude-code", "fork", "h2", store="project-a", first="d1")
        ledger.release("claude-code", "fork", "h2")
        conn = apsw.Connection(str(tmp_path / "ledger.db"))
        try:
            conn.execute(
                "UPDATE distilled_sessions SET owner = '1-x@another-machine' WHERE session_id = 'parent'"
            )
            assert ledger.holder("claude-code", "fork", store="project-a", first="d1") == "parent"
            assert not ledger.claim("claude-code", "fork", "h2", store="project-a", first="d1")
            conn.execute(
                "UPDATE distilled_sessions SET claimed_at = '2000-01-01' WHERE session_id = 'parent'"
            )
        finally:
            conn.close()
        assert ledger.claim("claude-code", "fork", "h2", store="project-a", first="d1")
    finally:
        ledger.close()


def test_a_parent_distilled_after_its_fork_sends_only_its_own_turns(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """A fork made while its parent goes on (the parent ends later): the fork is distilled whole,
    the parent then only for the turns it did not share with the fork."""
    session_id, source = session_in_project(home, samples, "claude-code")
    claude_turns(source, "MARK-PARENT", minute=1)
    fork_id = str(uuid.uuid4())
    fork_claude_session(source, fork_id)
    with MemoryService(home) as svc:
        whole = svc.distill_session("claude-code", fork_id)
        assert [i.name for i in whole.insights] == ["insight-mark-parent"] and whole.detail is None
        before = len(llm.requests)
        shared = svc.distill_session("claude-code", session_id)  # nothing but the shared turns
        assert (shared.status, len(llm.requests)) == ("already_distilled", before)
        claude_turns(source, "MARK-LATER", minute=2)
        later = svc.distill_session("claude-code", session_id)
    assert [i.name for i in later.insights] == ["insight-mark-later"]
    # Its own row (the shared turns, recorded when nothing was new) now covers them.
    assert later.detail is not None and re.fullmatch(
        r"turns \d+-(\d+) of \1; turns 1-\d+ were distilled before", later.detail
    )
    assert insight_counts(samples, home) == {"insight-mark-later": 1, "insight-mark-parent": 1}


def test_only_the_same_store_counts_as_distilled_elsewhere(tmp_path: Path) -> None:
    """Rows of other sessions are offered only from one store and one agent, and only those whose
    first turn is this session's first turn (or that have no turns recorded)."""
    ledger = Ledger(tmp_path / "ledger.db")
    try:
        for agent, session, store, digests in (
            ("claude-code", "parent", "project-a", ["d1", "d2"]),
            ("claude-code", "other", "project-b", ["d1", "d2"]),
            ("codex", "rollout", "project-a", ["d1"]),
            ("claude-code", "unrelated", "project-a", ["d9", "d2"]),
            ("claude-code", "legacy", "project-a", []),
            ("claude-code", "one-turn", "project-a", ["d1"]),
            ("claude-code", "longer-first", "project-a", ["d1x", "d2"]),
        ):
            key = (agent, session, f"hash-{session}")
            assert ledger.claim(*key)
            ledger.finish(
                *key, store=store, insights=1, prompt_tokens=1, completion_tokens=1, message_digests=digests
            )
        found = ledger.distilled_elsewhere("claude-code", "fork", "project-a", "d1")
        assert [(d.elsewhere, d.message_digests) for d in found] == [
            ("legacy", ()),
            ("one-turn", ("d1",)),
            ("parent", ("d1", "d2")),
        ]
        others = ledger.distilled_elsewhere("claude-code", "parent", "project-a", "d1")
        assert [d.elsewhere for d in others] == ["legacy", "one-turn"]
    finally:
        ledger.close()
