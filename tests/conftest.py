"""Shared fixtures: real temp homes, real git repositories and worktrees."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from coffer_memory import MemoryService

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` and return its stdout."""
    env = {**os.environ, **GIT_ENV, "HOME": str(cwd)}
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def make_repo(path: Path, branch: str = "main") -> Path:
    """A real git repository with one commit on ``branch``."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "init")
    return path


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Never touch the real home: COFFER_HOME points at a throwaway folder by default."""
    monkeypatch.setenv("COFFER_HOME", str(tmp_path_factory.mktemp("default-home")))


@pytest.fixture
def tmp_home(tmp_path: Path) -> Path:
    """A real, empty coffer home."""
    home = tmp_path / "home"
    return home


@pytest.fixture
def svc(tmp_home: Path) -> Iterator[MemoryService]:
    """A MemoryService on a temp home."""
    with MemoryService(tmp_home) as service:
        yield service


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with one commit."""
    return make_repo(tmp_path / "repo")
