"""Hostile lines in agent transcripts (attack5, session 13): a JSON line nested past the parser's
depth is skipped like any broken line, for the listing, the scrubbed view and the import of
Claude Code's memory, instead of a ``RecursionError`` that hid every session of the agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from agent_samples import CLAUDE_D, AgentSamples, build
from conftest import make_repo
from http_scripted import answer, serve

from coffer_memory import MemoryService
from coffer_memory._transcripts.listing import SessionLister

USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}

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


def _surrogate_session(samples: AgentSamples) -> str:
    """A Claude Code session in the sample project whose turns and title hold lone surrogates."""
    session_id = "5e55a0a0-1111-4222-8333-444455556666"
    folder = Path(samples.env["CLAUDE_CONFIG_DIR"]) / "projects" / "-attack-surrogates"
    folder.mkdir(parents=True)
    base = {"cwd": str(samples.project_dir), "sessionId": session_id, "timestamp": "2026-11-22T17:00:00.000Z"}
    lines = [
        {
            **base,
            "type": "user",
            "uuid": "u1",
            "message": {"role": "user", "content": "fix the deploy \ud800 script"},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "u2",
            "parentUuid": "u1",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "done \udfff, it uses make release"}],
            },
        },
    ]
    (folder / f"{session_id}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return session_id


@pytest.fixture
def surrogate_samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[AgentSamples, str]:
    samples = build(tmp_path / "agents", project_dir=make_repo(tmp_path / "work" / "demo-repo"))
    for key, value in samples.env.items():
        if key != "HOME":
            monkeypatch.setenv(key, value)
    return samples, _surrogate_session(samples)


def test_lone_surrogates_in_a_transcript_are_replaced_not_a_500(
    client: Any, surrogate_samples: tuple[AgentSamples, str]
) -> None:
    """JSON's ``"\\ud800"`` in an agent's file: the scrubbed view was a REST ``500`` (no JSON
    answer can carry a lone surrogate)."""
    _, session_id = surrogate_samples
    listed = client.get("/api/v1/agents/claude-code/transcripts")
    assert listed.status_code == 200, listed.text
    shown = client.get(f"/api/v1/agents/claude-code/transcripts/{session_id}")
    assert shown.status_code == 200, shown.text
    body = shown.json()
    assert body["session"]["title"] == "fix the deploy \ufffd script"
    assert [m["text"] for m in body["messages"]] == [
        "fix the deploy \ufffd script",
        "done \ufffd, it uses make release",
    ]


def test_a_transcript_with_lone_surrogates_distills(
    tmp_home: Path, surrogate_samples: tuple[AgentSamples, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its distillation wrote what the model said about it; the surrogate reached the write and
    was ``INVALID_INPUT`` there, so the session could never be distilled."""
    _, session_id = surrogate_samples
    insight = {
        "name": "use-make-release",
        "description": "Release with make release.",
        "body": "It runs the checks.",
    }
    for server in serve(monkeypatch, answer(json.dumps({"insights": [insight]}), usage=USAGE)):
        tmp_home.mkdir(parents=True, exist_ok=True)
        (tmp_home / "config.toml").write_text(
            f'[llm]\nprovider = "openai"\nmodel = "test-chat"\nbase_url = "{server.url}"\nmax_retries = 0\n'
        )
        with MemoryService(tmp_home) as svc:
            result = svc.distill_session("claude-code", session_id)
        assert result.status == "distilled", result
        assert server.requests and all(b"\\ud800" not in seen.raw.lower() for seen in server.requests)


def test_the_hook_log_gets_one_line_per_failure_without_secrets(tmp_home: Path) -> None:
    """``hook_event_name`` comes from the agent's payload: a line break in it wrote a forged line
    into ``logs/hook.log``, and the unsupported event's name (a token, here) was logged whole.
    Only the events the hook handles are named in the log."""
    token = "gh" + "p_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    event = f"Stop\n2026-12-02 00:00:00,000 WARNING agent=codex event=SessionEnd forged {token}"
    hook = Path(sys.executable).parent / "coffer-hook"
    proc = subprocess.run(
        [str(hook), "--agent", "claude-code"],
        input=json.dumps({"hook_event_name": event, "cwd": "/"}).encode(),
        env={**os.environ, "COFFER_HOME": str(tmp_home)},
        capture_output=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout) == (0, b"")
    log = (tmp_home / "logs" / "hook.log").read_text()
    assert len(log.splitlines()) == 1 and "agent=claude-code" in log, log
    assert token not in log and "forged" not in log and "event=other" in log


def test_a_transcript_named_in_another_encoding_leaves_the_listing_whole(
    client: Any, surrogate_samples: tuple[AgentSamples, str]
) -> None:
    """A Claude Code file whose name is not UTF-8 (``ab\\xffcd.jsonl``) made the agent's whole
    listing a REST ``500``: its session id was no text. It is left out; the others are listed."""
    samples, session_id = surrogate_samples
    folder = os.path.join(samples.env["CLAUDE_CONFIG_DIR"].encode(), b"projects", b"-attack-surrogates")
    line = {"type": "user", "cwd": "/x", "uuid": "b1", "timestamp": "2026-11-22T17:00:00.000Z"}
    line["message"] = {"role": "user", "content": "a session in a file named in Latin-1"}
    with open(os.path.join(folder, b"ab\xffcd.jsonl"), "w") as handle:
        handle.write(json.dumps(line) + "\n")
    listed = client.get("/api/v1/agents/claude-code/transcripts", params={"limit": 100})
    assert listed.status_code == 200, listed.text
    ids = {item["session_id"] for item in listed.json()["items"]}
    assert session_id in ids and CLAUDE_D in ids


def test_a_line_past_the_record_cap_is_skipped_without_being_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transcript of one endless line was read into memory whole (``for line in handle``). A
    line past ``MAX_RECORD_BYTES`` is now read through in bounded pieces and skipped; the
    records before and after it are read as before (the cap is lowered here to keep the file
    small)."""
    from coffer_memory._transcripts import readers

    monkeypatch.setattr(readers, "MAX_RECORD_BYTES", 1000)
    path = tmp_path / "s.jsonl"
    long = json.dumps({"type": "user", "text": "x" * 5000})
    edge = json.dumps({"n": 3, "pad": "y" * (1000 - 20)})
    path.write_text("\n".join([json.dumps({"n": 1}), long, json.dumps({"n": 2}), edge, ""]))
    assert len(edge) + 1 <= 1000
    assert [row.get("n") for row in readers.iter_jsonl(path)] == [1, 2, 3]
    path.write_text(json.dumps({"n": 1}) + "\n" + long)  # the long line last, with no newline
    assert [row.get("n") for row in readers.iter_jsonl(path)] == [1]
