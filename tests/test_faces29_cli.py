"""Session 29, findings left open in the CLI faces (faces29): an empty ``--since``/``--until``,
``forget-session`` of a session that names nothing, ``transcripts list`` showing the date it is
sorted by and cutting titles with an ellipsis, and ``handoff show`` after ``git branch -m``. Real
``coffer`` console scripts in real subprocesses, on temp homes, with real git repositories.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_samples import build
from conftest import GIT_ENV, make_repo

SCRIPTS = Path(sys.executable).parent


def _coffer(
    home: Path, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / "coffer"), "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **GIT_ENV, **(env or {})},
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    """A git repository and a home holding one fact of it."""
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    assert _coffer(home, "remember", "Deploy with make deploy", cwd=repo).returncode == 0
    return repo, home


# -- 1. an empty date is no filter -----------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [("recall", "deploy"), ("facts", "list"), ("audit",)],
    ids=["recall", "facts-list", "audit"],
)
@pytest.mark.parametrize("option", ["--since", "--until"])
@pytest.mark.parametrize("value", ["", "  "], ids=["empty", "blank"])
def test_an_empty_date_is_refused_not_read_as_no_filter(
    project: tuple[Path, Path], command: tuple[str, ...], option: str, value: str
) -> None:
    """``coffer recall deploy --since ""`` answered every fact, as if no ``--since`` was given: a
    script whose variable was unset (``--since "$FROM"``) filtered nothing, silently."""
    repo, home = project
    done = _coffer(home, *command, f"{option}={value}", cwd=repo)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    field = option.removeprefix("--")
    assert done.stderr.startswith(f"error: INVALID_INPUT: {field} is empty: give an ISO 8601 date"), (
        done.stderr
    )
    done = _coffer(home, *command, f"{option}={value}", "--json", cwd=repo)
    assert done.returncode == 1
    error = json.loads(done.stderr)["error"]
    assert error["code"] == "INVALID_INPUT" and error["details"]["field"] == field, error


# -- 2. forget-session of a session that names nothing ---------------------------------------------


def test_forget_session_of_a_session_that_names_nothing_is_not_found(
    project: tuple[Path, Path], tmp_path: Path
) -> None:
    """``coffer forget-session nosuch`` said "no journal entries came from session nosuch" and
    exited 0, as for a real session that left none: a typo'd id passed for done. An id that no
    agent's files, no ledger row, no journal entry and no fact name is SESSION_NOT_FOUND (exit 1,
    as every NOT_FOUND of the CLI); a session that is known still exits 0."""
    repo, home = project
    agents = build(tmp_path / "agents", project_dir=tmp_path / "elsewhere")
    env = {k: v for k, v in agents.env.items() if k != "HOME"}
    done = _coffer(home, "forget-session", "nosuch", env=env, cwd=repo)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert done.stderr.startswith("error: SESSION_NOT_FOUND: session 'nosuch' not found"), done.stderr
    done = _coffer(home, "forget-session", "nosuch", "--json", env=env, cwd=repo)
    assert json.loads(done.stderr)["error"]["code"] == "SESSION_NOT_FOUND"
    # A session an agent's files hold, never distilled: nothing to remove, and it is no error.
    real = agents.expected[0].session_id
    done = _coffer(home, "forget-session", real, env=env, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert f"no journal entries came from session {real}" in done.stdout
    # A session whose transcript is gone but which remembered a fact here: known, exit 0.
    assert (
        _coffer(home, "remember", "Tagged by a session", "--session-id", "gone-1", cwd=repo).returncode == 0
    )
    done = _coffer(home, "forget-session", "gone-1", env=env, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "kept: 1 fact(s) remembered in this session" in done.stdout
