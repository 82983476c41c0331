"""Changes made outside coffer are audited by reconcile (actor ``external``) and advance the store version."""

from __future__ import annotations

from pathlib import Path

import pytest

from coffer_memory import InvalidCursor, MemoryService, Settings
from coffer_memory._home import HomeLayout
from coffer_memory._store.files import sha256_bytes


def _external(svc: MemoryService, store: str = "global") -> list[tuple[str, str]]:
    return [
        (e.event, Path(e.details["path"]).name) for e in svc.audit(store=store).items if e.actor == "external"
    ]


def _two_facts(svc: MemoryService) -> tuple[Path, Path]:
    a = svc.remember("the deploy runs from CI", title="deploy", scope="global")
    b = svc.remember("staging resets nightly", title="staging", scope="global")
    return a.path, b.path


def test_an_edit_in_an_editor_is_memory_updated_by_external(svc: MemoryService) -> None:
    path, _ = _two_facts(svc)
    before = path.read_bytes()
    path.write_bytes(before.replace(b"from CI", b"from CI, never by hand"))
    [event] = [e for e in svc.audit(store="global").items if e.actor == "external"]
    assert event.event == "memory_updated" and event.details["path"] == str(path)
    assert event.details["before_sha256"] == sha256_bytes(before)
    assert event.details["after_sha256"] == sha256_bytes(path.read_bytes())
    assert event.details["lane"] == "knowledge" and event.document_id is not None
    # Seen once: later reads record nothing more.
    svc.recall("deploy", stores=["global"])
    assert _external(svc) == [("memory_updated", path.name)]


def test_files_created_and_removed_outside_coffer_are_audited(svc: MemoryService) -> None:
    path, other = _two_facts(svc)
    svc.recall("deploy", stores=["global"])
    made = path.parent.parent / "handwritten.md"
    made.write_text("---\ntitle: handwritten\n---\n\nwritten in an editor\n")
    other.unlink()
    svc.list_facts(store="global")
    assert sorted(_external(svc)) == [("memory_added", "handwritten.md"), ("memory_deleted", other.name)]


def test_an_outside_edit_makes_an_older_cursor_invalid(svc: MemoryService) -> None:
    path, _ = _two_facts(svc)
    svc.remember("a third fact", title="third", scope="global")
    cursor = svc.list_facts(store="global", limit=1).next_cursor
    assert cursor
    version = svc.writer.version("global")
    path.write_bytes(path.read_bytes().replace(b"from CI", b"from CI only"))
    with pytest.raises(InvalidCursor) as err:
        svc.list_facts(store="global", limit=1, cursor=cursor)
    assert err.value.code == "INVALID_CURSOR"
    assert svc.writer.version("global") == version + 1
    # A read that finds nothing new leaves the version alone.
    svc.recall("deploy", stores=["global"])
    assert svc.writer.version("global") == version + 1


def test_coffer_own_writes_are_never_external(svc: MemoryService, repo: Path) -> None:
    r = svc.remember("the deploy runs from CI", cwd=repo)
    svc.edit_fact(r.fact.id, body="the deploy runs from CI, twice", cwd=repo)
    svc.journal_append("an episode", cwd=repo)
    svc.journal_append("another episode", cwd=repo)
    svc.remember("temp", title="temp", cwd=repo)
    svc.delete_fact(svc.list_facts(cwd=repo, limit=1).items[0].fact.id, cwd=repo)
    svc.recall("episode", cwd=repo)
    assert _external(svc, r.store) == []


def test_a_rebuilt_index_learns_the_files_without_recording_them(tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        _two_facts(svc)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{HomeLayout(tmp_home).index_db}{suffix}").unlink(missing_ok=True)
    with MemoryService(tmp_home) as svc:
        assert svc.recall("deploy", stores=["global"]).hits
        svc.reindex("global", rebuild=True)
        assert _external(svc) == []


def test_a_large_store_sees_outside_creates_through_its_folder_scan(tmp_home: Path) -> None:
    settings = Settings.load(tmp_home, reconcile_full_scan_max_files=0, reconcile_full_scan_seconds=3600)
    with MemoryService(settings=settings) as svc:
        path, _ = _two_facts(svc)
        svc.recall("deploy", stores=["global"])
        (path.parent / "dropped-in.md").write_text("---\ntitle: dropped\n---\n\ncopied in by hand\n")
        svc.recall("copied", stores=["global"])
        assert _external(svc) == [("memory_added", "dropped-in.md")]


def test_the_cli_shows_outside_edits(cli, tmp_home: Path) -> None:  # type: ignore[no-untyped-def]
    with MemoryService(tmp_home) as svc:
        path, _ = _two_facts(svc)
        svc.recall("deploy", stores=["global"])
    path.write_bytes(path.read_bytes() + b"\nmore\n")
    out = cli("audit", "--store", "global", "--event", "memory_updated")
    assert out.returncode == 0 and "memory_updated" in out.stdout and "actor=external" in out.stdout


def test_a_store_folder_removed_by_hand_is_store_deleted_by_external(svc: MemoryService, repo: Path) -> None:
    import shutil

    r = svc.remember("the deploy runs from CI", cwd=repo)
    svc.recall("deploy", cwd=repo)
    shutil.rmtree(svc.paths(r.store).root)
    svc.recall("deploy", cwd=repo)
    events = [e for e in svc.audit().items if e.actor == "external"]  # every store the index knew
    assert [(e.event, e.store) for e in events] == [("store_deleted", r.store)]
    assert events[0].details["store_dir"] == str(svc.paths(r.store).root)
    svc.recall("deploy", cwd=repo)  # recorded once
    assert [e.event for e in svc.audit(store=r.store).items if e.actor == "external"] == ["store_deleted"]
