"""``coffer-hook`` on each SessionStart ``source``, fed the payloads the real CLIs send.

The payloads below were recorded from Claude Code 2.1.197 and codex-cli 0.171.0, run as in
``tests/test_agents_real_claude.py`` with a second SessionStart hook beside coffer's that saved its stdin;
only the paths are placeholders. What they showed, and what the hook must do:

- Claude Code: ``claude -p --resume <id>`` and ``--continue`` send ``resume`` with the session's id
  (``--fork-session`` too, with the parent's id: only its SessionEnd names the fork's own id;
  2.1.332 sends ``fork`` with the fork's own id, see the end of this file);
  ``/compact`` sends ``compact`` with the same id and
  two more keys; ``/clear`` ends the session (SessionEnd ``clear``) and sends ``clear`` with a new id.
- Codex: ``codex exec resume <id>`` sends ``resume`` with the same id; an automatic compaction sends
  ``compact`` (right after ``resume`` when a resumed session is compacted before its first turn);
  ``codex exec fork`` runs no SessionStart at all.
- After ``resume`` the earlier bundle is still in the conversation: nothing again (or a note of
  what changed). After ``compact`` or ``clear`` it is gone: the whole bundle again.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agent_configs import isolated_agent_homes

from coffer_memory import MemoryService
from coffer_memory._agents.given import NOTE_HEADER, RECORD_PREFIX, changes_note, to_give, transcript_root

HOOK = str(Path(sys.executable).parent / "coffer-hook")
CLAUDE_ID = "414881a2-2932-4d25-ae0b-4a203cfc296c"
CLAUDE_CLEARED_ID = "09f4b1e4-8365-4643-8c44-76e14e84a39a"
ROOT_UUID = "a49feb67-05d0-4c4c-a68e-947c777e15db"
CODEX_ID = "01a23517-4b10-7c82-a1c6-89fb4b12ed29"
RULE = "Run make lint before every commit."
NEW_RULE = "Squash fixups before merging."


def claude(source: str, cwd: Path, session: str = CLAUDE_ID) -> dict[str, Any]:
    """Claude Code 2.1.197's SessionStart stdin (``claude -p``) for ``source``."""
    body: dict[str, Any] = {
        "session_id": session,
        "transcript_path": f"/home/dev/.claude/projects/-home-dev-shop/{session}.jsonl",
        "cwd": str(cwd),
        "hook_event_name": "SessionStart",
        "source": source,
    }
    if source in ("compact", "clear"):  # sent from inside a turn: its prompt id, and for compact the model
        body["prompt_id"] = "f470cc85-19e6-4ad3-9874-10b257cae818"
    if source == "compact":
        body["model"] = "claude-opus-4-8"
    return body


def codex(source: str, cwd: Path, session: str = CODEX_ID) -> dict[str, Any]:
    """codex-cli 0.171.0's SessionStart stdin for ``source``."""
    return {
        "session_id": session,
        "transcript_path": f"/home/dev/.codex/sessions/2026/12/02/rollout-2026-12-02T04-50-48-{session}.jsonl",
        "cwd": str(cwd),
        "hook_event_name": "SessionStart",
        "model": "fake-model",
        "permission_mode": "bypassPermissions",
        "source": source,
    }


def given(home: Path, agent: str, body: dict[str, Any]) -> str | None:
    """Run the hook as the agent does; the context it gave (None: it printed nothing)."""
    proc = subprocess.run(
        [HOOK, "--agent", agent],
        input=json.dumps(body).encode(),
        env={**os.environ, "COFFER_HOME": str(home)},
        capture_output=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stderr) == (0, b"")
    if not proc.stdout:
        return None
    context: str = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    return context


@pytest.fixture
def ruled(tmp_home: Path, repo: Path) -> Path:
    with MemoryService(tmp_home) as svc:
        svc.append_rule(RULE, cwd=repo)
    return tmp_home


def add_rule(home: Path, repo: Path, text: str = NEW_RULE) -> None:
    with MemoryService(home) as svc:
        svc.append_rule(text, cwd=repo)


def records(home: Path) -> list[Path]:
    return sorted((home / "cache").glob(f"{RECORD_PREFIX}*"))


def test_claude_code_resume_gets_nothing_compact_and_clear_get_the_bundle(ruled: Path, repo: Path) -> None:
    first = given(ruled, "claude-code", claude("startup", repo))
    assert first is not None and RULE in first
    # --resume / --continue: the bundle is in the transcript already.
    assert given(ruled, "claude-code", claude("resume", repo)) is None
    # /compact summarised it away: whole again, and a resume after that still gets nothing.
    assert given(ruled, "claude-code", claude("compact", repo)) == first
    assert given(ruled, "claude-code", claude("resume", repo)) is None
    # /clear starts a new session id with an empty conversation.
    assert given(ruled, "claude-code", claude("clear", repo, CLAUDE_CLEARED_ID)) == first
    assert given(ruled, "claude-code", claude("resume", repo, CLAUDE_CLEARED_ID)) is None


def test_codex_resume_gets_the_rules_once(ruled: Path, repo: Path) -> None:
    # The defect: `codex exec resume` printed the bundle again and the resumed conversation held it twice.
    first = given(ruled, "codex", codex("startup", repo))
    assert first is not None and RULE in first
    assert given(ruled, "codex", codex("resume", repo)) is None
    # A resumed session compacted before its first turn: Codex runs resume, then compact.
    assert given(ruled, "codex", codex("resume", repo)) is None
    assert given(ruled, "codex", codex("compact", repo)) == first


def test_a_changed_rule_reaches_a_resumed_session_as_a_short_note(ruled: Path, repo: Path) -> None:
    first = given(ruled, "codex", codex("startup", repo))
    assert first is not None
    add_rule(ruled, repo)
    note = given(ruled, "codex", codex("resume", repo))
    assert note is not None and note.startswith(NOTE_HEADER)
    assert NEW_RULE in note and RULE not in note and "coffer__resume()" not in note
    assert "### Project rules (repo)" in note
    # The note is recorded as given: the next resume gets nothing, a compaction the whole bundle.
    assert given(ruled, "codex", codex("resume", repo)) is None
    whole = given(ruled, "codex", codex("compact", repo))
    assert whole is not None and RULE in whole and NEW_RULE in whole


def test_a_removed_rule_is_named_as_no_longer_in_force(ruled: Path, repo: Path) -> None:
    given(ruled, "claude-code", claude("startup", repo))
    with MemoryService(ruled) as svc:
        svc.delete_rules(cwd=repo)
        svc.append_rule(NEW_RULE, cwd=repo)
    note = given(ruled, "claude-code", claude("resume", repo))
    assert note is not None
    added, removed = note.split("## No longer in force")
    assert NEW_RULE in added and RULE not in added and RULE in removed


def test_a_session_without_a_record_gets_the_whole_bundle(ruled: Path, repo: Path) -> None:
    # Started before this coffer, in another home, or its record was pruned: give it all.
    whole = given(ruled, "codex", codex("resume", repo))
    assert whole is not None and RULE in whole
    assert given(ruled, "codex", codex("resume", repo)) is None
    # Records are per agent: the same id from another agent is another session.
    assert given(ruled, "claude-code", claude("resume", repo, CODEX_ID)) == whole


def test_a_payload_without_source_or_session_gets_the_bundle_every_time(ruled: Path, repo: Path) -> None:
    body = codex("startup", repo)
    del body["source"]
    assert given(ruled, "codex", body) == given(ruled, "codex", body) is not None
    anonymous = {**codex("resume", repo), "session_id": ""}
    assert given(ruled, "codex", anonymous) == given(ruled, "codex", anonymous) is not None


def test_the_record_is_in_the_coffer_homes_cache_and_private(ruled: Path, repo: Path, tmp_path: Path) -> None:
    given(ruled, "codex", codex("startup", repo))
    [record] = records(ruled)
    assert oct(record.stat().st_mode & 0o777) == "0o600"
    assert CODEX_ID not in record.name  # the agent's id is not trusted as a file name
    assert json.loads(record.read_text())["session_id"] == CODEX_ID
    assert not [p for p in repo.rglob("*") if RECORD_PREFIX in p.name]


def test_an_unwritable_record_still_gives_the_bundle_and_is_logged(ruled: Path, repo: Path) -> None:
    (ruled / "cache").write_text("a file where the cache folder should be")
    first = given(ruled, "codex", codex("startup", repo))
    assert first is not None and RULE in first
    assert "event=SessionStart" in (ruled / "logs" / "hook.log").read_text()
    # Without a record, a resume gets the bundle again rather than nothing.
    assert given(ruled, "codex", codex("resume", repo)) == first


def test_a_new_session_prunes_records_unused_for_a_month(ruled: Path, repo: Path) -> None:
    given(ruled, "codex", codex("startup", repo, "old-session"))
    [old] = records(ruled)
    given(ruled, "codex", codex("startup", repo, "kept-session"))
    [kept] = [p for p in records(ruled) if p != old]
    month_ago = time.time() - 31 * 24 * 3600
    for record in (old, kept):
        os.utime(record, (month_ago, month_ago))
    # Resumed with nothing to give, a session's record is still in use: kept.
    assert given(ruled, "codex", codex("resume", repo, "kept-session")) is None
    given(ruled, "codex", codex("resume", repo))  # a resume prunes nothing
    assert old.exists()
    given(ruled, "codex", codex("startup", repo, "new-session"))
    assert not old.exists() and kept.exists() and len(records(ruled)) == 3


def transcript(folder: Path, session: str, *prompts: str, root: str = ROOT_UUID) -> Path:
    """A Claude Code transcript (``<session>.jsonl``) whose conversation starts at ``ROOT_UUID``:
    a fork's file copies its parent's lines, message ids and all, under its own session id."""
    path = folder / f"{session}.jsonl"
    lines = [{"type": "mode", "mode": "default", "sessionId": session}]
    parent = None
    for index, prompt in enumerate(prompts):
        uuid = root if index == 0 else f"{index:08d}-0000-4000-8000-000000000000"
        message = {"role": "user", "content": prompt}
        lines.append(
            {"parentUuid": parent, "type": "user", "message": message, "uuid": uuid, "sessionId": session}
        )
        parent = uuid
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def ended(home: Path, session: str, path: Path, cwd: Path) -> None:
    """Claude Code's SessionEnd of one ``claude -p`` run."""
    body = {"session_id": session, "transcript_path": str(path), "cwd": str(cwd)}
    assert given(home, "claude-code", {**body, "hook_event_name": "SessionEnd", "reason": "other"}) is None


def test_a_forked_session_resumed_later_gets_a_note_not_the_bundle_again(
    ruled: Path, repo: Path, tmp_path: Path
) -> None:
    """As the real Claude Code does it (``test_agents_real_claude``): the fork's SessionStart names the
    parent; the fork's own id appears first at its SessionEnd."""
    fork = "7d0f4d7e-8a43-4d0c-9a55-2f6f1c1e4a10"
    first = given(ruled, "claude-code", claude("startup", repo))
    assert first is not None
    parent_file = transcript(tmp_path, CLAUDE_ID, "first prompt")
    ended(ruled, CLAUDE_ID, parent_file, repo)
    # claude -p --resume <parent> --fork-session: a resume of the parent, then the fork's end.
    started = {**claude("resume", repo), "transcript_path": str(parent_file)}
    assert given(ruled, "claude-code", started) is None
    ended(ruled, fork, transcript(tmp_path, fork, "first prompt", "forked prompt"), repo)
    add_rule(ruled, repo)
    resumed = {**claude("resume", repo, fork), "transcript_path": str(tmp_path / f"{fork}.jsonl")}
    note = given(ruled, "claude-code", resumed)
    assert note is not None and note.startswith(NOTE_HEADER) and NEW_RULE in note and RULE not in note
    # An unrelated session with no record of its own still gets the whole bundle.
    other = "5b1e2c3d-0000-4000-8000-000000000001"
    other_file = transcript(tmp_path, other, "x", root="0c4e9a1b-0000-4000-8000-000000000002")
    ended(ruled, other, other_file, repo)
    whole = given(ruled, "claude-code", {**claude("resume", repo, other), "transcript_path": str(other_file)})
    assert whole is not None and RULE in whole and NEW_RULE in whole


def test_a_transcripts_root_is_its_first_message(tmp_path: Path) -> None:
    path = transcript(tmp_path, CLAUDE_ID, "first prompt", "second prompt")
    assert transcript_root(str(path)) == ROOT_UUID
    lines = path.read_text().splitlines(keepends=True)
    path.write_text('{"type": "user", "uuid": "torn\n' + "".join(lines[1:]))  # a torn line is skipped
    assert transcript_root(str(path)) == ROOT_UUID
    path.write_text("".join(lines[:1]) + "".join(lines[2:]))  # no first message: its reply is not one
    assert transcript_root(str(path)) is None
    assert transcript_root(str(tmp_path / "missing.jsonl")) is None and transcript_root(None) is None


def test_an_opted_out_repository_gets_nothing_and_nothing_is_recorded(ruled: Path, repo: Path) -> None:
    (repo / ".coffer-optout").write_text("")
    assert given(ruled, "codex", codex("startup", repo)) is None
    assert records(ruled) == []


def test_a_note_longer_than_the_bundle_gives_the_bundle() -> None:
    before = "# Coffer memory rules\n\n## Project rules\n\n" + "".join(f"- old {i}\n" for i in range(50))
    after = "# Coffer memory rules\n\n## Project rules\n\n- new\n"
    assert to_give("resume", after, before) == after
    assert to_give("resume", after, after) == ""
    assert to_give("compact", after, after) == after
    small = before + "- one more\n"
    assert to_give("resume", small, before) == changes_note(before, small)


def test_a_session_start_naming_a_fifo_as_its_transcript_gives_the_rules_at_once(
    ruled: Path, repo: Path, tmp_path: Path
) -> None:
    """The payload's ``transcript_path`` is read for its first message's id (the record that
    forks inherit): a FIFO there blocked the hook on ``open`` until the agent's hook deadline,
    and the session started without its rules. It is not a transcript: no root, rules given."""
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    assert transcript_root(str(fifo)) is None
    note = given(ruled, "claude-code", {**claude("startup", repo), "transcript_path": str(fifo)})
    assert note is not None and RULE in note


# -- Claude Code 2.1.332: a fork starts with source "fork", /resume ends a session with "resume" ---
CLAUDE_SOURCES = ("startup", "resume", "clear", "compact", "fork")
"""SessionStart's ``source`` values in Claude Code 2.1.332's hook input schema (its cli)."""
CLAUDE_END_REASONS = ("clear", "resume", "logout", "prompt_input_exit", "other")
"""SessionEnd's ``reason`` values in the same schema."""


def claude_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, svc: MemoryService) -> dict[str, Any]:
    """coffer's hook groups in Claude Code's settings.json after ``install`` (a temporary HOME)."""
    homes = isolated_agent_homes(tmp_path, monkeypatch)
    svc.install_agent("claude-code")
    hooks: dict[str, Any] = json.loads((homes.claude / "settings.json").read_text())["hooks"]
    return hooks


def test_claude_codes_hooks_run_for_every_source_and_reason_it_sends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, svc: MemoryService
) -> None:
    """A ``--fork-session`` start (``fork``) ran no coffer hook, so a rule added before a fork never
    reached it; a session left with ``/resume`` (``resume``) was never distilled."""
    hooks = claude_groups(tmp_path, monkeypatch, svc)
    [start], [end] = hooks["SessionStart"], hooks["SessionEnd"]
    assert [s for s in CLAUDE_SOURCES if not re.fullmatch(start["matcher"], s)] == []
    assert [r for r in CLAUDE_END_REASONS if not re.fullmatch(end["matcher"], r)] == []


def test_an_earlier_installs_matchers_make_status_out_of_date_and_install_updates_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, svc: MemoryService
) -> None:
    hooks = claude_groups(tmp_path, monkeypatch, svc)
    settings = tmp_path / "user" / ".claude" / "settings.json"
    mine = {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}
    earlier = {
        "SessionStart": [{**hooks["SessionStart"][0], "matcher": "startup|resume|clear|compact"}, mine],
        "SessionEnd": [{**hooks["SessionEnd"][0], "matcher": "clear|logout|prompt_input_exit|other"}],
    }
    settings.write_text(json.dumps({"hooks": earlier}))
    assert not svc.agent_status("claude-code").up_to_date
    svc.install_agent("claude-code")
    assert json.loads(settings.read_text())["hooks"] == {
        **hooks,
        "SessionStart": [hooks["SessionStart"][0], mine],
    }
    assert svc.agent_status("claude-code").up_to_date


def test_a_fork_gets_the_rules_and_its_resume_a_note_of_what_changed(ruled: Path, repo: Path) -> None:
    """Claude Code 2.1.332's SessionStart of ``claude -p --resume <id> --fork-session``: the fork's
    own id, and the path of a transcript not written yet, so nothing tells coffer what the copied
    conversation holds: the whole bundle (Claude Code drops it when the copy has the same)."""
    fork = "b683753d-6d83-4e66-94f0-383560358959"
    first = given(ruled, "claude-code", claude("startup", repo))
    extra = {"seconds_since_last_response": 2, "context_tokens": 15, "prompt_cache_likely_expired": False}
    assert given(ruled, "claude-code", {**claude("fork", repo, fork), **extra}) == first
    add_rule(ruled, repo)
    note = given(ruled, "claude-code", {**claude("resume", repo, fork), **extra})
    assert note is not None and note.startswith(NOTE_HEADER) and NEW_RULE in note and RULE not in note
