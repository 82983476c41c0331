"""Hostile lines in agent transcripts (attack5, session 13): a JSON line nested past the parser's
depth is skipped like any broken line, for the listing, the scrubbed view and the import of
Claude Code's memory, instead of a ``RecursionError`` that hid every session of the agent."""

from __future__ import annotations

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
