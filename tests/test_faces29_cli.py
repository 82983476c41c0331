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
