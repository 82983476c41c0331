"""An edit that changes nothing rewrote the file for nothing (fixes16): now it writes nothing and
says so. (An empty title is "derive one from the text", as in ``remember``: newuser7.)"""

from __future__ import annotations

from pathlib import Path

from conftest import CliRunner

from coffer_memory import MemoryService
from coffer_memory._fact_input import default_title


def _state(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def test_remember_takes_an_empty_title_as_none_given(svc: MemoryService) -> None:
    r = svc.remember("Deploy with make release.", scope="global", title="  ")
    assert r.fact.title == default_title("Deploy with make release.") != ""


def test_an_edit_that_changes_nothing_writes_nothing(svc: MemoryService) -> None:
    r = svc.remember("Deploy with make release.", scope="global", title="deploy")
    before = _state(r.path)
    for change in ({"title": "deploy"}, {"body": "Deploy with make release."}, {}):
        result = svc.edit_fact(r.fact.id, scope="global", **change)  # type: ignore[arg-type]
        assert result.before_sha256 == result.after_sha256 == r.after_sha256, change
        assert result.fact.title == "deploy" and _state(r.path) == before, change
    assert svc.audit_events("global", event="memory_updated") == []
    edited = svc.edit_fact(r.fact.id, scope="global", title="", body="Deploy with make ship.")
    assert edited.before_sha256 != edited.after_sha256
    assert edited.fact.title == default_title("Deploy with make ship.")


def test_the_cli_says_an_edit_changed_nothing(cli: CliRunner, tmp_home: Path) -> None:
    out = cli("remember", "--global", "--title", "deploy", "Deploy with make release.", "--json")
    assert out.returncode == 0
    svc = MemoryService(home=tmp_home)
    try:
        fact = svc.list_facts(scope="global").items[0]
    finally:
        svc.close()
    before = _state(fact.path)
    r = cli("facts", "edit", fact.fact.id, "--global", "--title", "deploy")
    assert r.returncode == 0, r.stderr
    assert "nothing written" in r.stdout
    assert _state(fact.path) == before
