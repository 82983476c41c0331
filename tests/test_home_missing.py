"""A home named by ``--home`` or ``$COFFER_HOME`` that does not exist: a read is refused in one
line naming the path and how to create it, and no folder appears; a write creates the home (the
new-user pass of session 11 found ``coffer --home /typo recall`` making ``/typo``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CliRunner

READS = [
    ("recall", "deploy", "--store", "global"),
    ("facts", "list", "--global"),
    ("stores", "list"),
    ("doctor",),
    ("audit",),
    ("journal", "--store", "global"),
    ("handoff", "show", "--global"),
    ("memory", "rules", "--global"),
    ("config", "list"),
    ("config", "get", "memory.default_mode"),
    ("transcripts", "list"),
    ("reindex",),
    ("export", "--all", "-o", "out.zip"),
]


@pytest.mark.parametrize("args", READS, ids=[" ".join(a[:2]) for a in READS])
def test_a_read_on_a_missing_home_is_refused_and_creates_nothing(
    cli: CliRunner, tmp_path: Path, args: tuple[str, ...]
) -> None:
    typo = tmp_path / "typo" / "home"
    out = cli("--home", str(typo), *args)
    assert out.returncode == 1, out
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"error: INVALID_INPUT: no coffer home at {typo} (--home);")
    assert f"mkdir -p {typo}" in out.stderr
    assert not (tmp_path / "typo").exists()
    out = cli(*args, home=typo)  # the same through $COFFER_HOME
    assert out.returncode == 1 and f"no coffer home at {typo} ($COFFER_HOME)" in out.stderr
    assert not (tmp_path / "typo").exists()


def test_json_error_and_a_home_that_is_a_file(cli: CliRunner, tmp_path: Path) -> None:
    typo = tmp_path / "nohome"
    out = cli("--home", str(typo), "recall", "x", "--store", "global", "--json")
    error = __import__("json").loads(out.stderr)["error"]
    assert out.returncode == 1 and error["code"] == "INVALID_INPUT"
    assert error["details"] == {"field": "home", "home": str(typo)}
    typo.write_text("not a folder\n")  # the service's own error (tests/test_first_run.py)
    out = cli("--home", str(typo), "recall", "x", "--store", "global")
    assert out.returncode == 1 and out.stderr.endswith(f"{typo} is not a folder\n")


def test_a_write_creates_the_named_home_then_reads_work(cli: CliRunner, tmp_path: Path) -> None:
    home = tmp_path / "new" / "home"
    out = cli("--home", str(home), "remember", "--global", "deploys go through make release")
    assert out.returncode == 0, out.stderr
    assert home.is_dir()
    out = cli("--home", str(home), "recall", "deploy", "--store", "global")
    assert out.returncode == 0 and "make release" in out.stdout
    other = tmp_path / "other"
    assert cli("--home", str(other), "config", "set", "memory.default_mode", "grep").returncode == 0
    assert cli("--home", str(other), "config", "get", "memory.default_mode").stdout.strip() == "grep"
    empty = tmp_path / "made-by-hand"
    empty.mkdir()  # what the error line says to do
    assert cli("--home", str(empty), "stores", "list").returncode == 0


def test_the_default_home_is_not_made_by_a_read(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``--home`` and no ``$COFFER_HOME``: nothing was named, so nothing can be a typo, but a
    read still makes nothing: no memories yet (tests/test_faces27_home.py runs the console script)."""
    from coffer_memory._cli import main

    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.delenv("COFFER_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["recall", "deploy", "--store", "global"]) == 1
    assert not (tmp_path / "user").exists()
    assert main(["remember", "--global", "deploys go through make release"]) == 0
    assert (tmp_path / "user" / ".coffer").is_dir()
