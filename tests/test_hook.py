"""``coffer-hook``: run exactly as an agent runs it (a subprocess fed a JSON payload on stdin)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from served import closed_port

from coffer_memory import MemoryService
from coffer_memory._agents.context import SEEDED_RULES
from coffer_memory._agents.hook import run
from coffer_memory._ulid_text import crockford_ulid

HOOK = str(Path(sys.executable).parent / "coffer-hook")


def payload(event: str, cwd: Path, **extra: Any) -> bytes:
    """A stdin payload shaped like Claude Code's (and Codex's) hook input."""
    body: dict[str, Any] = {
        "session_id": "0b6a7c1e-5d1f-4c7e-9a51-3f2f4d6e8a90",
        "transcript_path": str(cwd / "transcript.jsonl"),
        "cwd": str(cwd),
        "hook_event_name": event,
        "permission_mode": "default",
    }
    body.update({"source": "startup"} if event == "SessionStart" else {"reason": "prompt_input_exit"})
    body.update(extra)
    return json.dumps(body).encode()


# The hook's own deadline (COFFER_HOOK_DEADLINE, 3 s by default) covers its interpreter's start and,
# through the REST app, a request to a server in this test process: under a load of six suites on
# two cores that took longer, the hook printed nothing (as it must past its deadline) and the REST
# tests failed now and then. The tests of what the hook prints give it a deadline no loaded machine
# reaches; the deadline itself is tested on its own (test_deadline_stops_a_hung_stdin).
TEST_DEADLINE = "120"


def run_hook(
    stdin: bytes, home: Path, agent: str = "claude-code", **env: str
) -> subprocess.CompletedProcess[bytes]:
    environ = {**os.environ, "COFFER_HOME": str(home), "COFFER_HOOK_DEADLINE": TEST_DEADLINE, **env}
    return subprocess.run(
        [HOOK, "--agent", agent], input=stdin, env=environ, capture_output=True, timeout=300
    )


@pytest.fixture
def ruled(tmp_home: Path, repo: Path) -> Path:
    """A home whose project store and global store both hold rules."""
    with MemoryService(tmp_home) as svc:
        svc.append_rule("Run make lint before every commit.", cwd=repo)
        svc.append_rule("Answer in British English.", store="global")
    return tmp_home


def test_session_start_prints_project_then_global_then_seeded_rules(ruled: Path, repo: Path) -> None:
    proc = run_hook(payload("SessionStart", repo), ruled)
    assert proc.returncode == 0 and proc.stderr == b""
    out = json.loads(proc.stdout)
    assert list(out) == ["hookSpecificOutput"]
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    bundle = out["hookSpecificOutput"]["additionalContext"]
    project, global_, seeded = (bundle.index(t) for t in ("make lint", "British English", SEEDED_RULES[0]))
    assert project < global_ < seeded < bundle.index(SEEDED_RULES[1])
    assert len(bundle) <= 10_000
    with MemoryService(ruled) as svc:  # the same bundle the library assembles
        assert bundle == svc.assemble_session_context(repo)


def test_session_start_outside_git_has_global_and_seeded_rules(ruled: Path, tmp_path: Path) -> None:
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    bundle = json.loads(run_hook(payload("SessionStart", plain), ruled).stdout)["hookSpecificOutput"][
        "additionalContext"
    ]
    assert "British English" in bundle and "make lint" not in bundle and SEEDED_RULES[1] in bundle


def test_codex_session_start_works_the_same(ruled: Path, repo: Path) -> None:
    proc = run_hook(payload("SessionStart", repo, model="gpt-5-codex"), ruled, agent="codex")
    assert "make lint" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


@pytest.mark.parametrize(
    "stdin",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"hook_event_name": "SessionStart"}',
        b'{"hook_event_name": "Stop", "cwd": "/"}',
    ],
    ids=["empty", "garbage", "array", "no-cwd", "other-event"],
)
def test_bad_stdin_prints_nothing_exits_zero_and_logs(stdin: bytes, tmp_home: Path) -> None:
    proc = run_hook(stdin, tmp_home)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    log = (tmp_home / "logs" / "hook.log").read_text()
    assert "agent=claude-code" in log
    assert oct((tmp_home / "logs" / "hook.log").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(
    ("session_id", "kind"),
    [
        ("7" * 5000, "a number of 5000 digits"),
        ("12", "a number"),
        ('{"a": 1}', "a JSON dict"),
        ('""', "an empty string"),
    ],
    ids=["5000-digits", "number", "object", "empty"],
)
def test_an_odd_session_id_still_gets_the_rules_and_says_why_nothing_was_recorded(
    ruled: Path, repo: Path, session_id: str, kind: str
) -> None:
    # A 5,000-digit session_id is past the digits int() converts: the payload was "not JSON" and
    # the session started without its rules. The id cannot be recorded; the rules must still come.
    stdin = payload("SessionStart", repo).replace(
        b'"0b6a7c1e-5d1f-4c7e-9a51-3f2f4d6e8a90"', session_id.encode()
    )
    proc = run_hook(stdin, ruled)
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert "make lint" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    log = (ruled / "logs" / "hook.log").read_text()
    assert f"'session_id' is {kind}, not a string: the rules were given, not recorded under it" in log
    assert "7777" not in log  # the payload's text is never logged
    assert not list((ruled / "cache").glob("hook-session-*.json"))
    end = run_hook(
        payload("SessionEnd", repo).replace(b'"0b6a7c1e-5d1f-4c7e-9a51-3f2f4d6e8a90"', session_id.encode()),
        ruled,
    )
    assert (end.returncode, end.stdout, end.stderr) == (0, b"", b"")
    assert (
        f"event=SessionEnd HookError: stdin JSON's 'session_id' is {kind}, not a string"
        in (ruled / "logs" / "hook.log").read_text()
    )


def test_missing_agent_argument_exits_zero(tmp_home: Path, repo: Path) -> None:
    proc = subprocess.run(
        [HOOK],
        input=payload("SessionStart", repo),
        env={**os.environ, "COFFER_HOME": str(tmp_home)},
        capture_output=True,
        timeout=30,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


def test_home_that_is_not_a_directory_prints_nothing(tmp_path: Path, repo: Path) -> None:
    home = tmp_path / "home-file"
    home.write_text("not a directory")
    proc = run_hook(payload("SessionStart", repo), home)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


def test_locked_index_does_not_block_session_start(ruled: Path, repo: Path) -> None:
    # The in-process path reads only rules files: a writer holding the index changes nothing.
    conn = apsw.Connection(str(ruled / "index.db"))
    conn.execute("BEGIN EXCLUSIVE")
    try:
        proc = run_hook(
            payload("SessionStart", repo), ruled
        )  # an index read would wait out busy_timeout, then fail
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    assert proc.returncode == 0 and "make lint" in proc.stdout.decode()


def test_deadline_stops_a_hung_stdin(tmp_home: Path) -> None:
    # stdin never closes: the alarm ends the call, nothing is printed, exit 0.
    environ = {**os.environ, "COFFER_HOME": str(tmp_home), "COFFER_HOOK_DEADLINE": "0.5"}
    proc = subprocess.Popen(
        [HOOK, "--agent", "codex"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environ
    )
    try:
        proc.wait(timeout=120)  # a bound for a broken deadline, not a timing assertion
    finally:
        proc.kill()
    assert proc.stdin is not None and proc.stdout is not None
    out = proc.stdout.read()
    proc.stdin.close()
    assert (proc.returncode, out) == (0, b"")
    assert "deadline exceeded" in (tmp_home / "logs" / "hook.log").read_text()


def test_run_in_process_restores_the_alarm(ruled: Path, repo: Path) -> None:
    import io
    import signal

    before = signal.getsignal(signal.SIGALRM)
    out = io.StringIO()
    assert (
        run(["--agent", "claude-code", "--home", str(ruled)], io.BytesIO(payload("SessionStart", repo)), out)
        == 0
    )
    assert "make lint" in out.getvalue()
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


# -- through the REST app ----------------------------------------------------------------------
class LiveAPI:
    """The FastAPI app served by uvicorn on an ephemeral loopback port, in a thread."""

    def __init__(self, home: Path, token: str | None = None) -> None:
        import uvicorn

        from coffer_memory_fastapi import create_app

        self.service = MemoryService(home)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(create_app(self.service, token=token), log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 120  # a bound for a server that never starts, not a measurement
        while not self.server.started and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.server.started, "uvicorn did not start"  # a hook would have met a closed port

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
        self.service.close()


@pytest.fixture
def api(ruled: Path) -> Iterator[LiveAPI]:
    live = LiveAPI(ruled, token="hook-test-token")
    yield live
    live.close()


def test_session_start_through_the_rest_app(api: LiveAPI, repo: Path, tmp_path: Path) -> None:
    # A different, empty COFFER_HOME proves the bundle came from the server.
    env = {"COFFER_API_URL": api.url, "COFFER_API_TOKEN": "hook-test-token"}
    proc = run_hook(payload("SessionStart", repo), tmp_path / "elsewhere", **env)
    assert "make lint" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def test_a_resumed_session_through_the_rest_app_is_not_given_the_rules_twice(
    api: LiveAPI, repo: Path, tmp_path: Path
) -> None:
    # The record of what the session was given is kept by the hook, in its own home's cache/.
    env = {"COFFER_API_URL": api.url, "COFFER_API_TOKEN": "hook-test-token"}
    home = tmp_path / "elsewhere"
    first = run_hook(payload("SessionStart", repo), home, **env)
    assert "make lint" in json.loads(first.stdout)["hookSpecificOutput"]["additionalContext"]
    again = run_hook(payload("SessionStart", repo, source="resume"), home, **env)
    assert (again.returncode, again.stdout, again.stderr) == (0, b"", b"")
    assert len(list((home / "cache").glob("hook-session-*.json"))) == 1


def test_wrong_token_prints_nothing(api: LiveAPI, repo: Path, tmp_path: Path) -> None:
    proc = run_hook(
        payload("SessionStart", repo), tmp_path / "h", COFFER_API_URL=api.url, COFFER_API_TOKEN="nope"
    )
    assert (proc.returncode, proc.stdout) == (0, b"")
    assert "HTTP Error 401" in (tmp_path / "h" / "logs" / "hook.log").read_text()


def test_server_down_prints_nothing(repo: Path, tmp_path: Path) -> None:
    port = closed_port()  # nothing listens there
    proc = run_hook(payload("SessionStart", repo), tmp_path / "h", COFFER_API_URL=f"http://127.0.0.1:{port}")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


def test_session_end_through_the_rest_app_is_accepted(api: LiveAPI, repo: Path, tmp_path: Path) -> None:
    (repo / "transcript.jsonl").write_text('{"type": "user"}\n')
    env = {"COFFER_API_URL": api.url, "COFFER_API_TOKEN": "hook-test-token"}
    proc = run_hook(payload("SessionEnd", repo), tmp_path / "h", **env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert not (tmp_path / "h" / "logs" / "hook.log").exists()


def test_session_end_without_a_transcript_is_a_silent_no_op(repo: Path, tmp_path: Path) -> None:
    # `claude mcp list` fires SessionEnd for a "session" whose transcript was never written: no
    # distillation is started (here the server is down, so any attempt would be logged) and no
    # warning lands in hook.log.
    port = closed_port()
    home = tmp_path / "h"
    stdin = payload("SessionEnd", repo, reason="other", transcript_path=str(tmp_path / "never-written.jsonl"))
    proc = run_hook(stdin, home, COFFER_API_URL=f"http://127.0.0.1:{port}")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert not (home / "logs" / "hook.log").exists()


def test_ulid_encoding_matches_python_ulid() -> None:
    from ulid import ULID

    for raw in (bytes(16), b"\xff" * 16, bytes(range(16)), os.urandom(16)):
        assert crockford_ulid(raw) == str(ULID.from_bytes(raw))


def test_session_start_path_imports_no_heavy_module(ruled: Path, repo: Path) -> None:
    # Start-up cost is what every session start pays: the in-process path must not pull the
    # index, pydantic, YAML, tomlkit or the HTTP client (measured in bench/hook.py).
    code = (
        "import io, sys, json\n"
        "from coffer_memory._agents.hook import run\n"
        f"stdin = io.BytesIO({payload('SessionStart', repo)!r})\n"
        f"run(['--agent', 'claude-code', '--home', {str(ruled)!r}], stdin, io.StringIO())\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, timeout=60).stdout
    loaded = set(json.loads(out))
    heavy = {"pydantic", "apsw", "yaml", "frontmatter", "tomlkit", "httpx", "ulid", "coffer_memory._service"}
    assert not heavy & loaded, heavy & loaded
    assert "coffer_memory._agents.context" in loaded
