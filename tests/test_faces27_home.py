"""Session 27, the faces a new user touches first: which home ``coffer`` uses when ``HOME`` says
nothing, and a read of a home that is not there yet (review26's walk found both)."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(sys.executable).parent


def _coffer(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed ``coffer`` console script, in a child with exactly ``env`` (and PATH)."""
    return subprocess.run(
        [str(SCRIPTS / "coffer"), *args],
        env={"PATH": os.environ["PATH"], **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("home_var", ["empty", "unset"])
def test_an_empty_or_unset_home_variable_uses_the_passwd_home_not_the_root(
    tmp_path: Path, home_var: str
) -> None:
    """``HOME=""`` made the home ``/.coffer`` (``os.path.expanduser`` reads an empty HOME as the
    root); the passwd entry's home is used, as for an unset HOME."""
    env = {"HOME": ""} if home_var == "empty" else {}
    out = _coffer("config", "get", "home", env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    passwd_home = pwd.getpwuid(os.getuid()).pw_dir
    assert out.stdout.splitlines()[0] == os.path.join(passwd_home, ".coffer")


READS = [
    ("recall", "deploy"),
    ("recall", "deploy", "--json"),
    ("facts", "list", "--global"),
    ("stores", "list"),
    ("doctor",),
    ("audit",),
    ("journal",),
    ("handoff", "show"),
    ("resume",),
    ("memory", "rules"),
    ("reindex",),
    ("export", "--all", "-o", "out.zip"),
]


@pytest.mark.parametrize("args", READS, ids=[" ".join(a) for a in READS])
def test_a_read_creates_no_default_home(tmp_path: Path, args: tuple[str, ...]) -> None:
    """No ``--home``, no ``COFFER_HOME``, no ``~/.coffer`` yet: a first read made ``~/.coffer``
    (folders, an empty index). It says there are no memories yet, in one typed line, and makes
    nothing; a write then makes the home, and the same read works."""
    from conftest import make_repo

    user = tmp_path / "user"
    user.mkdir()
    repo = make_repo(tmp_path / "repo")
    env = {"HOME": str(user), "GIT_CONFIG_NOSYSTEM": "1"}
    out = _coffer(*args, env=env, cwd=repo)
    assert out.returncode == 1, out
    assert out.stderr.count("\n") == 1, out.stderr
    assert "INVALID_INPUT" in out.stderr and "no memories yet: there is no coffer home at " in out.stderr
    assert list(user.iterdir()) == []
    assert not (repo / "out.zip").exists()
    wrote = _coffer("remember", "--global", "deploys go through make release", env=env, cwd=repo)
    assert wrote.returncode == 0, wrote.stderr
    assert (user / ".coffer").is_dir()
    assert _coffer(*args, env=env, cwd=repo).returncode == 0
