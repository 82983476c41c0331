"""Hostile lines in agent transcripts (attack5, session 13): a JSON line nested past the parser's
depth is skipped like any broken line, for the listing, the scrubbed view and the import of
Claude Code's memory, instead of a ``RecursionError`` that hid every session of the agent."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from agent_samples import CLAUDE_D, AgentSamples, build

from coffer_memory._transcripts.listing import SessionLister

DEEP = "[" * 100_000 + "]" * 100_000


def test_a_line_nested_too_deep_is_skipped_not_fatal(tmp_path: Path) -> None:
    samples: AgentSamples = build(tmp_path / "agents")
    before = SessionLister(samples.homes())
    path_d = Path(before.find("claude-code", CLAUDE_D).source_path)
    count = before.find("claude-code", CLAUDE_D).message_count
    with open(path_d, "a", encoding="utf-8") as handle:
        handle.write("\n" + '{"type": "user", "message": ' + DEEP + "}\n")
    lister = SessionLister(samples.homes())
    assert lister.find("claude-code", CLAUDE_D).message_count == count
    assert len(lister.load("claude-code", CLAUDE_D).messages) >= 1


def test_a_fifo_or_a_device_named_like_a_transcript_is_skipped(tmp_path: Path) -> None:
    """A FIFO named ``*.jsonl`` blocked the listing for ever (and every REST call behind it);
    a link to ``/dev/zero`` was read without end. Both are files the reader cannot read."""
    samples: AgentSamples = build(tmp_path / "agents")
    expected = {s.session_id for s in SessionLister(samples.homes()).all_sessions("claude-code")}
    folder = Path(SessionLister(samples.homes()).find("claude-code", CLAUDE_D).source_path).parent
    os.mkfifo(folder / "fifo-session.jsonl")
    (folder / "zero-session.jsonl").symlink_to("/dev/zero")
    found: list[set[str]] = []
    worker = threading.Thread(
        target=lambda: found.append(
            {s.session_id for s in SessionLister(samples.homes()).all_sessions("claude-code")}
        ),
        daemon=True,
    )
    worker.start()
    worker.join(60)  # a bound for a hang, not a timing assertion
    if worker.is_alive():  # unblock the reader so that the test process can end
        with open(folder / "fifo-session.jsonl", "wb"):
            pass
    assert found == [expected]
