"""Branches of reftable repositories (git >= 2.45), where HEAD on disk is only a stub.

Runs against the first ``git`` on PATH; skipped, saying why, when that git is too old to create
a reftable repository (put a newer git first on PATH to run it).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import git

from coffer_memory import MemoryService
from coffer_memory._scope import find_git


def _git_version() -> tuple[int, ...]:
    try:
        out = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ()
    m = re.search(r"(\d+)\.(\d+)", out)
    return (int(m[1]), int(m[2])) if m else ()


pytestmark = pytest.mark.skipif(
    _git_version() < (2, 45),
    reason=f"reftable repositories need git >= 2.45; the git on PATH is {_git_version() or 'missing'}",
)


@pytest.fixture
def reftable_repo(tmp_path: Path) -> Path:
    path = tmp_path / "reftable-repo"
    path.mkdir()
    git(path, "init", "-q", "--ref-format=reftable", "-b", "feature/login")
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "init")
    # The case under test: the HEAD file names no branch, the tables do.
    assert (path / ".git" / "HEAD").read_text().strip() == "ref: refs/heads/.invalid"
    return path


def test_the_branch_comes_from_the_tables(reftable_repo: Path) -> None:
    info = find_git(reftable_repo / ".")
    assert info is not None and info.branch == "feature/login"
    git(reftable_repo, "checkout", "-q", "-b", "main")
    info = find_git(reftable_repo)
    assert info is not None and info.branch == "main"


def test_a_worktree_of_a_reftable_repo(reftable_repo: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    git(reftable_repo, "worktree", "add", "-q", "-b", "hotfix", str(wt))
    info = find_git(wt)
    assert info is not None and info.branch == "hotfix" and info.toplevel == reftable_repo.resolve()
    main = find_git(reftable_repo)
    assert main is not None and main.branch == "feature/login"


def test_a_detached_head_has_no_branch(reftable_repo: Path) -> None:
    git(reftable_repo, "checkout", "-q", "--detach")
    info = find_git(reftable_repo)
    assert info is not None and info.branch is None


def test_the_resolved_scope_carries_the_branch(svc: MemoryService, reftable_repo: Path) -> None:
    assert svc.resolve_scope(cwd=reftable_repo).branch == "feature/login"


def test_a_rebase_in_a_reftable_repo_names_the_rebased_branch(
    svc: MemoryService, reftable_repo: Path
) -> None:
    """HEAD's file keeps its stub while a rebase detaches HEAD in the tables: the branch being
    rebased was looked for only when the HEAD file itself was detached, so a handoff saved
    mid-rebase in a reftable repository went to the detached checkout's scene."""
    import os

    from conftest import GIT_ENV

    git(reftable_repo, "checkout", "-q", "-b", "main")
    (reftable_repo / "README.md").write_text("main\n")
    git(reftable_repo, "commit", "-q", "-am", "main edits the readme")
    git(reftable_repo, "checkout", "-q", "-b", "topic", "main~1")
    (reftable_repo / "README.md").write_text("topic\n")
    git(reftable_repo, "commit", "-q", "-am", "topic edits the readme")
    env = {**os.environ, **GIT_ENV, "HOME": str(reftable_repo), "GIT_EDITOR": "true"}
    proc = subprocess.run(
        ["git", "rebase", "main"], cwd=reftable_repo, env=env, capture_output=True, check=False
    )
    assert proc.returncode != 0  # stopped on the conflict, HEAD detached
    assert (reftable_repo / ".git" / "HEAD").read_text().strip() == "ref: refs/heads/.invalid"
    assert svc.resolve_scope(cwd=reftable_repo).branch == "topic"
    saved = svc.save_handoff("Topic mid-rebase.", cwd=reftable_repo)
    assert saved.target is not None and saved.target.branch == "topic"
