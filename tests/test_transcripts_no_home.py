"""``coffer transcripts list|show`` on a fresh machine: no ``~/.coffer`` yet.

A new user's first ``coffer transcripts list``, before any ``coffer remember``, said "no memories
yet" and listed nothing: the command opened a service, so it needed a home. The agents' session
files are not in the home; they are listed (or "no sessions found" said), and no home is made.
Each test runs the installed console script with a ``HOME`` of its own and the agent homes of
``agent_samples`` (the formats Claude Code, Codex and OpenCode really write).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent_samples import build

SCRIPTS = Path(sys.executable).parent


def _coffer(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed ``coffer`` console script, in a child with exactly ``env`` (and PATH)."""
    return subprocess.run(
        [str(SCRIPTS / "coffer"), *args],
        env={"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1", **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_first_transcripts_list_lists_the_agents_sessions(tmp_path: Path) -> None:
    samples = build(tmp_path / "agents")
    user = Path(samples.env["HOME"])
    out = _coffer("transcripts", "list", "--json", env=samples.env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    listed = {(s["agent"], s["session_id"]) for s in json.loads(out.stdout)}
    assert listed == {(e.agent, e.session_id) for e in samples.expected}
    out = _coffer("transcripts", "list", env=samples.env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    for expected in samples.expected:
        assert expected.session_id in out.stdout
    assert not (user / ".coffer").exists()


def test_a_first_transcripts_show_shows_the_session(tmp_path: Path) -> None:
    samples = build(tmp_path / "agents")
    session = samples.expected[0]
    out = _coffer("transcripts", "show", session.session_id, env=samples.env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"{session.agent} session {session.session_id}" in out.stdout
    assert "removed before any model sees it:" in out.stdout
    missing = _coffer("transcripts", "show", "no-such-session", env=samples.env, cwd=tmp_path)
    assert missing.returncode == 1 and "SESSION_NOT_FOUND" in missing.stderr, missing
    assert "no memories yet" not in missing.stderr
    assert not (Path(samples.env["HOME"]) / ".coffer").exists()


def test_no_agent_sessions_and_no_home_says_so(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    env = {"HOME": str(user), "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(user)}
    out = _coffer("transcripts", "list", env=env, cwd=tmp_path)
    assert (out.returncode, out.stdout, out.stderr) == (0, "no sessions found\n", "")
    assert list(user.iterdir()) == []
