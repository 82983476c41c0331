"""``coffer doctor`` after an interrupted vector build: the re-embedding it does shows progress
(a file counts once its vectors are in), and a vector problem is said once, in the report
(the new-user pass of session 11 saw a silent minute and the warning twice)."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from conftest import CliRunner
from test_vector import hash_plugin, vector_service  # noqa: F401  (a fixture, used by name)


def _waiting(svc_home: Path) -> int:
    """Documents still holding the sentinel that an interrupted embedding leaves."""
    conn = apsw.Connection(str(svc_home / "index.db"))
    try:
        return int(next(conn.execute("SELECT count(*) FROM documents WHERE content_sha256 = ''"))[0])
    finally:
        conn.close()


def test_doctor_reports_progress_of_the_embedding_an_interrupted_run_left(
    hash_plugin: None,  # noqa: F811
    tmp_home: Path,
) -> None:
    with vector_service(tmp_home, provider="hash", dimensions=32, batch_size=2) as svc:
        for i in range(7):
            svc.remember(f"deploy note {i}: the release train leaves on Tuesday", scope="global")
    # What a run stopped mid-embedding leaves: the keyword rows, each with the empty sentinel.
    conn = apsw.Connection(str(tmp_home / "index.db"))
    conn.execute("UPDATE documents SET content_sha256 = '' WHERE resource_name = 'global'")
    conn.close()
    assert _waiting(tmp_home) == 7
    calls: list[tuple[str, int, int, int]] = []

    def progress(store: str, done: int, total: int) -> None:
        calls.append((store, done, total, 7 - _waiting(tmp_home)))

    with vector_service(tmp_home, provider="hash", dimensions=32, batch_size=2) as svc:
        report = svc.doctor(progress=progress)
    assert report.ok and _waiting(tmp_home) == 0
    assert calls and calls[-1][:3] == ("global", 7, 7)
    assert len({done for _, done, _, _ in calls}) > 2  # it moves, batch by batch
    # A file counts as done once its vectors are in: never ahead of the embedding.
    assert all(done <= embedded for _, done, _, embedded in calls), calls


def test_doctor_says_a_vector_problem_once(cli: CliRunner, tmp_home: Path) -> None:
    assert cli("remember", "--global", "a fact").returncode == 0
    assert cli("config", "set", "memory.retrieval_modes", "grep,keyword,vector,hybrid").returncode == 0
    assert cli("config", "set", "embedding.provider", "none").returncode == 0
    out = cli("doctor")
    assert out.returncode == 1
    problem = "vector recall is enabled but the embedding provider 'none' is not available"
    assert (out.stdout + out.stderr).count(problem) == 1, (out.stdout, out.stderr)
    assert f"vector: {problem}" in out.stdout
    # Other commands still warn on stderr: nothing else reports it.
    assert problem in cli("reindex").stderr


@pytest.mark.parametrize("json_flag", [False, True])
def test_doctor_on_a_healthy_home_draws_no_bar(cli: CliRunner, json_flag: bool) -> None:
    assert cli("remember", "--global", "a fact").returncode == 0
    out = cli("doctor", *(["--json"] if json_flag else []))
    assert out.returncode == 0 and out.stderr == ""
