"""What session 25 left open in ledger.db and its left sessions, pinned: each test here failed
before its fix. Real homes, the real ledger file changed by another process (as a user's tool or a
crash would), ``coffer-hook`` fed Claude Code's hook payloads in a subprocess, a real HTTP model
on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import apsw
from agent_samples import AgentSamples
from agents_real import (
    World,
    claude_env,
    distill_or_reply,
    distilled_conversations,
    install,
    needs,
    newest_session,
    world,
)
from fake_model import FakeModel
from http_scripted import ScriptedServer
from test_distill_family import claude_run, home, llm, samples
from test_distill_grown import insight_counts, run_session_end, wait_distilled

from coffer_memory import MemoryService
from coffer_memory._transcripts.ledger import Ledger

__all__ = ["home", "llm", "samples", "world"]  # the fixtures, shared with the family and real-agent tests

AGENT = "claude-code"
# Another program's SQLite file (a notes app's), as ``cp`` puts it in the ledger's place.
FOREIGN = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('mine');"


def another_process(code: str, *args: object) -> None:
    """Run ``code`` in another Python process (``sys.argv[1:]`` = ``args``), as another program."""
    subprocess.run([sys.executable, "-c", code, *map(str, args)], check=True, timeout=60)


def left_session(home: Path, samples: AgentSamples, mark: str) -> str:
    """A Claude Code run whose session end was left ``in_progress`` (noted in the ledger, as
    ``end_session`` notes it when the session's family is still being distilled)."""
    session, _ = claude_run(samples, f"Task {mark}.", mark)
    ledger = Ledger(home / "ledger.db")
    try:
        ledger.leave(AGENT, session, str(samples.project_dir))
    finally:
        ledger.close()
    return session


def session_start(home: Path, session_id: str, transcript: Path, cwd: Path) -> bytes:
    """Claude Code's SessionStart payload (its fields as ``claude`` sends them at ``startup``) fed
    to ``coffer-hook``; what it printed."""
    stdin = json.dumps(
        {
            "session_id": session_id,
            "transcript_path": str(transcript),
            "cwd": str(cwd),
            "permission_mode": "default",
            "hook_event_name": "SessionStart",
            "source": "startup",
            "model": "claude-opus-4-5-20251101",
        }
    ).encode()
    hook = str(Path(sys.executable).parent / "coffer-hook")
    env = {**os.environ, "COFFER_HOME": str(home)}
    proc = subprocess.run([hook, "--agent", AGENT], input=stdin, env=env, capture_output=True, timeout=30)
    assert (proc.returncode, proc.stderr) == (0, b""), proc.stderr
    return proc.stdout


def repairs(home: Path) -> list[str]:
    with MemoryService(home) as svc:
        return [r for r in svc.doctor().index_repairs if "ledger.db" in r]


def test_left_sessions_dropped_under_a_running_service_is_made_again(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """Another program drops ``left_sessions`` while a service holds the ledger open: every session
    end said ``LedgerUnavailable`` ("no such table: left_sessions") until the process restarted.
    The next use makes the table again (what was left in it is gone: a sweep finds those
    sessions), and doctor says so."""
    left = left_session(home, samples, "MARK-LEFT")
    ended, _ = claude_run(samples, "Another task.", "MARK-ENDED")
    with MemoryService(home) as svc:
        assert svc.transcripts.ledger.left(AGENT) == [(left, str(samples.project_dir))]
        another_process(
            "import sys, apsw; apsw.Connection(sys.argv[1]).execute('DROP TABLE left_sessions')",
            home / "ledger.db",
        )
        outcome = svc.transcripts.end_session(AGENT, ended, cwd=samples.project_dir)
        assert outcome.status == "distilled", outcome
        assert svc.transcripts.ledger.left(AGENT) == []
        swept = svc.sweep(AGENT, min_idle_seconds=0)
        assert left in [r.session_id for r in swept.results if r.status == "distilled"], swept
    (line,) = repairs(home)
    assert "left_sessions was dropped" in line, line


def test_a_left_session_survives_garbage_over_a_ledger_in_use(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """Garbage written over ledger.db under a running service: the repair carried the distilled
    rows its connection still read into a new ledger, not ``left_sessions``' rows, and the left
    session waited for a sweep. It is carried too, and the next session end picks it up."""
    with MemoryService(home) as svc:
        left, _ = claude_run(samples, "Task left.", "MARK-LEFT")
        svc.transcripts.ledger.leave(AGENT, left, None)
        (home / "ledger.db").write_bytes(b"garbage, not a ledger\n" * 300)  # as ``cp`` writes over it
        assert svc.transcripts.ledger.left(AGENT) == [(left, None)]
    ended, transcript = claude_run(samples, "Another task.", "MARK-ENDED")
    run_session_end(home, ended, transcript, samples.project_dir, runs=1)
    wait_distilled(home, left, runs=1)
    assert insight_counts(samples, home) == {"insight-mark-ended": 1, "insight-mark-left": 1}


def damage_the_distilled_rows(ledger: Path) -> None:
    """Garbage over the root page of ``distilled_sessions`` (past the first page: the file still
    begins as an SQLite file and its schema reads), written by another process."""
    another_process(
        "import sys, apsw\n"
        "c = apsw.Connection(sys.argv[1])\n"
        "(root,) = c.execute(\"SELECT rootpage FROM sqlite_master WHERE name = 'distilled_sessions'\").fetchone()\n"
        "(size,) = c.execute('PRAGMA page_size').fetchone()\n"
        "c.execute('PRAGMA wal_checkpoint(TRUNCATE)')\n"
        "c.close()\n"
        "with open(sys.argv[1], 'r+b') as f:\n"
        "    f.seek((root - 1) * size)\n"
        "    f.write(b'\\xde\\xad' * (size // 2))\n",
        ledger,
    )


def test_garbage_past_the_first_page_is_damage_met_by_the_next_session_end(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """Garbage past ledger.db's first page passed every look (the header and the schema read):
    each session end's hook logged ``LedgerUnavailable`` ("database disk image is malformed"),
    forever, and doctor said nothing. The first use that meets it moves the file aside and makes a
    new ledger carrying what still reads (the left sessions here), the session end distils, and
    the hook's log says what was repaired."""
    first, first_path = claude_run(samples, "First task.", "MARK-FIRST")
    run_session_end(home, first, first_path, samples.project_dir, runs=1)
    left = left_session(home, samples, "MARK-LEFT")
    damage_the_distilled_rows(home / "ledger.db")
    ended, transcript = claude_run(samples, "Another task.", "MARK-ENDED")
    argv = ["--home", home, "--agent", AGENT, "--session-id", ended, "--cwd", samples.project_dir]
    # What coffer-hook's SessionEnd starts detached, run here to its end.
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "coffer_memory._session_end",
            *map(str, argv),
            "--transcript-path",
            str(transcript),
        ],
        env={**os.environ, "COFFER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    (logged,) = (home / "logs" / "hook.log").read_text().splitlines()
    assert "event=SessionEnd warning: " in logged and "ledger.db.damaged-" in logged, logged
    assert "CorruptError" in logged and "LedgerUnavailable" not in logged, logged
    wait_distilled(home, left, runs=1)
    assert insight_counts(samples, home) == {
        "insight-mark-ended": 1,
        "insight-mark-first": 1,
        "insight-mark-left": 1,
    }
    (line,) = repairs(home)
    assert "CorruptError" in line and "kept as ledger.db.damaged-" in line, line
    (kept,) = home.glob("ledger.db.damaged-*[0-9]Z")
    assert kept.read_bytes().startswith(b"SQLite format 3\x00")


def test_another_sqlite_file_copied_over_the_ledger_is_not_written_into(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """Another program's SQLite file copied over ledger.db (no coffer process running): the next
    distillation made the ledger's tables inside it and kept its records there, mixed with the
    other program's. It is moved aside untouched and a new ledger is made."""
    first, first_path = claude_run(samples, "First task.", "MARK-FIRST")
    run_session_end(home, first, first_path, samples.project_dir, runs=1)
    for side in ("-wal", "-shm"):
        Path(f"{home / 'ledger.db'}{side}").unlink(missing_ok=True)
    another_process(
        "import shutil, sys, apsw\n"
        "c = apsw.Connection(sys.argv[2]); c.execute(sys.argv[3]); c.close()\n"
        "shutil.copyfile(sys.argv[2], sys.argv[1])\n",
        home / "ledger.db",
        home.parent / "notes.db",
        FOREIGN,
    )
    ended, transcript = claude_run(samples, "Another task.", "MARK-ENDED")
    run_session_end(home, ended, transcript, samples.project_dir, runs=1)
    (kept,) = home.glob("ledger.db.damaged-*[0-9]Z")
    conn = apsw.Connection(str(kept), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master ORDER BY name")]
        assert names == ["notes"] and conn.execute("SELECT body FROM notes").fetchall() == [("mine",)]
    finally:
        conn.close()
    (line,) = repairs(home)
    assert "another program's" in line and "notes" in line, line


def test_another_sqlite_file_copied_over_a_ledger_in_use_is_met_at_the_next_use(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """The same under a running service: the header look took it for a checkpoint, the service
    went on answering from its cache and -wal, and its close wrote the ledger's pages into the
    other program's file: neither a sound ledger nor the other program's file was left. Its next
    use sees a file that is not its ledger any more and repairs as for garbage; what its
    connection still reads is carried over."""
    first, _ = claude_run(samples, "First task.", "MARK-FIRST")
    ended, _ = claude_run(samples, "Another task.", "MARK-ENDED")
    ledger = home / "ledger.db"
    with MemoryService(home) as svc:
        assert svc.distill_session(AGENT, first).status == "distilled"
        another_process(
            "import shutil, sys, apsw\n"
            "c = apsw.Connection(sys.argv[2]); c.execute(sys.argv[3]); c.close()\n"
            "shutil.copyfile(sys.argv[2], sys.argv[1])\n",
            ledger,
            home.parent / "notes.db",
            FOREIGN,
        )
        assert svc.distill_session(AGENT, ended).status == "distilled"
    conn = apsw.Connection(str(ledger))
    try:
        assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
        done = conn.execute("SELECT session_id FROM distilled_sessions WHERE status = 'done'").fetchall()
        assert {s for (s,) in done} >= {ended}
    finally:
        conn.close()
    (line,) = repairs(home)
    assert "another program's" in line, line


def test_a_session_start_picks_up_left_sessions_without_waiting_for_them(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """Claude Code's session start picked up no left session: one waited for the next session end
    (maybe days) or a sweep. The start now hands them (up to 5) to a detached process, as a session
    end hands its own session, and prints the rules as before; the session starting is not one of
    them (it is going on: its own end distils it)."""
    with MemoryService(home) as svc:
        svc.append_rule("Run make lint before committing.", store="global")
    left = [left_session(home, samples, mark) for mark in ("MARK-LEFTA", "MARK-LEFTB")]
    resumed = left_session(home, samples, "MARK-RESUMED")
    transcript = next((samples.homes().claude / "projects").rglob(f"{resumed}.jsonl"))
    printed = json.loads(session_start(home, resumed, transcript, samples.project_dir))
    assert "make lint" in printed["hookSpecificOutput"]["additionalContext"]
    picked_up_but(home, samples, left, resumed)
    assert not (home / "logs" / "hook.log").exists()


def picked_up_but(home: Path, samples: AgentSamples, left: list[str], going_on: str) -> None:
    """Wait until the ``left`` sessions (``MARK-LEFTA``, ``MARK-LEFTB``) are distilled, once each;
    ``going_on`` is still left."""
    for session in left:
        wait_distilled(home, session, runs=1)
    assert insight_counts(samples, home) == {"insight-mark-lefta": 1, "insight-mark-leftb": 1}
    # The pick-up forgets a left session just after its distillation is recorded done: wait for it.
    still = [(going_on, str(samples.project_dir))]
    ledger = Ledger(home / "ledger.db")
    deadline = time.monotonic() + 60  # a bound on the background process, not a timing assertion
    try:
        while (found := ledger.left(AGENT)) != still and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        ledger.close()
    assert found == still


@needs("claude", "@anthropic-ai/claude-code")
def test_the_real_claude_codes_session_start_picks_up_a_left_session(world: World) -> None:
    """The real ``claude -p`` with coffer installed: a session ends left ``in_progress`` (noted in
    the ledger), and the next session's start hands it to distillation. SessionEnd is taken out of
    the settings so the start alone does it (an interactive session that goes on has only started)."""
    w = world
    claude = install(w, "claude-code", "claude")
    settings = w.home / ".claude" / "settings.json"
    installed = json.loads(settings.read_text())
    del installed["hooks"]["SessionEnd"]
    settings.write_text(json.dumps(installed))
    with FakeModel(reply=distill_or_reply) as fake:
        agent_env = claude_env(fake)
        w.run([claude, "-p", "first prompt QZXA"], agent_env)
        left = newest_session(w.home / ".claude" / "projects", "*.jsonl")
        ledger = Ledger(w.coffer_home / "ledger.db")
        try:
            ledger.leave(AGENT, left, str(w.repo))
        finally:
            ledger.close()
        w.use_model(fake)
        w.run([claude, "-p", "second prompt QZXB"], agent_env)
        w.journal_after("QZX4")
        (sent,) = distilled_conversations(fake)
        assert "QZXA" in sent and "QZXB" not in sent


def test_doctor_meets_garbage_past_the_first_page(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """``coffer doctor`` said nothing of a ledger whose pages past the first are garbage (it read
    the schema only): it reads every page now, and repairs and reports it as a use that met it."""
    first, first_path = claude_run(samples, "First task.", "MARK-FIRST")
    run_session_end(home, first, first_path, samples.project_dir, runs=1)
    left_session(home, samples, "MARK-LEFT")
    damage_the_distilled_rows(home / "ledger.db")
    proc = subprocess.run(
        [sys.executable, "-m", "coffer_memory", "doctor"],
        env={**os.environ, "COFFER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr and "unexpected" not in proc.stderr, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if "ledger.db" in ln]
    assert "CorruptError: quick_check" in line and "ledger.db.damaged-" in line, proc.stdout


def test_a_ledger_of_an_older_version_reads_while_another_process_writes(tmp_path: Path) -> None:
    """A ledger an older version made (no ``application_id``) is stamped at its first open; that
    write waits for another process's long write like any other, and must not turn a read that
    needs no write into ``LedgerUnavailable``: the ledger is read unstamped, and stamped later."""
    from test_attack_left_open3 import _held
    from test_ledger_foreign import unstamped_ledger

    path = tmp_path / "ledger.db"
    unstamped_ledger(path, "s1")
    with _held(path):
        older = Ledger(path, busy_timeout_ms=300)
        try:
            assert older.left(AGENT) == [("s1", None)]
        finally:
            older.close()
    later = Ledger(path)
    try:
        assert later.left(AGENT) == [("s1", None)]
        assert int.from_bytes(path.read_bytes()[68:72], "big") == 0x4346464C  # in the file already
    finally:
        later.close()


def test_a_left_mark_that_cannot_be_written_fails_no_session_end(
    home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """``logs`` a file, not a folder (a sync tool's conflict copy): the left marks cannot be
    written nor taken away. They are hints: the session end distils and picks up as before."""
    left = left_session(home, samples, "MARK-LEFT")
    shutil.rmtree(home / "logs")  # the mark was written
    (home / "logs").write_text("not a folder\n")
    ended, _ = claude_run(samples, "Another task.", "MARK-ENDED")
    with MemoryService(home) as svc:
        assert svc.transcripts.end_session(AGENT, ended, cwd=samples.project_dir).status == "distilled"
        assert svc.transcripts.ledger.left(AGENT) == []
    wait_distilled(home, left, runs=1)
