"""A throwaway git checkout for the benchmarks that need a project store (journal, handoff).

Apart from ``_common`` on purpose: importing it puts this checkout first on ``sys.path``, which
a script measuring an older tree through ``PYTHONPATH`` (``embed_lock.py``) must not do.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_repo(root: Path) -> Path:
    """``root/repo``: a git checkout with one empty commit, made without the user's git config."""
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b", "HOME": str(root), "PATH": "/usr/bin:/bin"}  # fmt: skip
    repo = root / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "start"], cwd=repo, env=env, check=True)
    return repo
