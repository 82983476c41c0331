"""Session 30 (faces30): ``coffer facts list`` with a team's PostgreSQL index that cannot be reached.

A listing reads the local index of the files and needs no server, so on a fresh home it answered
``(no facts)``, status 0, while the team's server was down: read as "the team store is empty". An
empty listing now says on stderr that the shared index was not reached, with its typed error code,
and that the listing is the local index's; stdout (text or JSON) and the status stay as they were.
Real CLI runs (in-process), a refused port of 127.0.0.1, and a real PostgreSQL server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import CliRunner, make_repo
from served import closed_port


def test_an_empty_listing_says_the_shared_index_was_not_reached(
    tmp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: CliRunner
) -> None:
    repo = make_repo(tmp_path / "repo")
    tmp_home.mkdir()
    monkeypatch.setenv("COFFER_PG_URL", f"postgresql://team:hunter2@127.0.0.1:{closed_port()}/coffer")
    monkeypatch.setenv("COFFER_INDEX_BACKEND", "postgresql")
    for args in (("facts", "list"), ("facts", "list", "--global")):
        run = cli(*args, cwd=repo)
        assert (run.returncode, run.stdout.strip()) == (0, "(no facts)"), run
        assert "not reached (INDEX_UNAVAILABLE:" in run.stderr, run.stderr
        assert "this listing is the local index's" in run.stderr and "hunter2" not in run.stderr
        assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    run = cli("facts", "list", "--json", cwd=repo)
    assert run.returncode == 0 and json.loads(run.stdout)["items"] == []
    assert "INDEX_UNAVAILABLE" in run.stderr


def test_no_note_with_the_shared_index_reached_or_none_set(
    pg_url: str, tmp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: CliRunner
) -> None:
    repo = make_repo(tmp_path / "repo")
    tmp_home.mkdir()
    run = cli("facts", "list", cwd=repo)
    assert (run.returncode, run.stdout.strip(), run.stderr) == (0, "(no facts)", "")
    monkeypatch.setenv("COFFER_PG_URL", pg_url)
    monkeypatch.setenv("COFFER_INDEX_BACKEND", "postgresql")
    run = cli("facts", "list", cwd=repo)
    assert (run.returncode, run.stdout.strip(), run.stderr) == (0, "(no facts)", "")
