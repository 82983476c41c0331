"""The keyword recall's hot paths: the small-store check on every read, and what it must still see."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from coffer_memory import MemoryService
from coffer_memory._index import reindex as reindex_module
from coffer_memory._store.paths import GLOBAL_STORE


@pytest.fixture
def small(tmp_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryService]:
    """A global store of a few facts, indexed with full stats (no racy window: a test's files are new)."""
    monkeypatch.setattr(reindex_module, "RACY_NS", 0)
    with MemoryService(tmp_home) as svc:
        for word in ("alpha", "bravo", "charlie"):
            svc.remember(f"the {word} service deploys at noon", scope="global")
        svc.recall("deploys", stores=[GLOBAL_STORE], mode="keyword")  # the first scan
        yield svc


def _knowledge(svc: MemoryService) -> Path:
    return svc.paths(GLOBAL_STORE).knowledge


def _found(svc: MemoryService, query: str) -> list[str]:
    return [h.text for h in svc.recall(query, stores=[GLOBAL_STORE], mode="keyword").hits]


def test_a_read_of_an_unchanged_small_store_writes_nothing(small: MemoryService) -> None:
    conn = small.index.db.conn
    before = conn.total_changes()
    assert len(_found(small, "deploys")) == 3
    assert conn.total_changes() == before  # the full scan wrote the store's state on every read


def _same_size_and_mtime(svc: MemoryService) -> None:
    path = next(_knowledge(svc).rglob("*alpha*.md"))
    st = path.stat()
    path.write_text(path.read_text().replace("alpha", "delta"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size


def _new_subfolder(svc: MemoryService) -> None:
    folder = _knowledge(svc) / "topics" / "deep"
    folder.mkdir(parents=True)
    (folder / "delta.md").write_text("the delta service deploys at dusk\n")


def _deleted(svc: MemoryService) -> None:
    next(_knowledge(svc).rglob("*bravo*.md")).unlink()


def _renamed(svc: MemoryService) -> None:
    path = next(_knowledge(svc).rglob("*charlie*.md"))
    path.rename(path.with_name("moved.md"))


@pytest.mark.parametrize(
    ("edit", "query", "count"),
    [
        (_same_size_and_mtime, "delta", 1),
        (_new_subfolder, "delta", 1),
        (_deleted, "bravo", 0),
        (_renamed, "charlie", 1),
    ],
)
def test_a_hand_edit_of_a_small_store_is_seen_by_the_next_read(
    small: MemoryService, edit: Callable[[MemoryService], None], query: str, count: int
) -> None:
    edit(small)
    assert len(_found(small, query)) == count
    assert len(_found(small, query)) == count  # and the read after it is the unchanged check


def test_a_broken_file_left_as_it_is_keeps_small_reads_on_the_check(small: MemoryService) -> None:
    broken = _knowledge(small) / "broken.md"
    broken.write_text("---\ntitle: [unclosed\n---\nthe echo service deploys\n")
    assert len(_found(small, "deploys")) == 3  # skipped, with a broken_files row
    conn = small.index.db.conn
    before = conn.total_changes()
    assert len(_found(small, "deploys")) == 3
    assert conn.total_changes() == before
    broken.write_text("the echo service deploys at dawn\n")
    assert "the echo service deploys at dawn" in _found(small, "echo")[0]


def test_a_symlink_in_a_small_store_is_never_indexed(small: MemoryService, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("the foxtrot service deploys\n")
    (_knowledge(small) / "link.md").symlink_to(outside)
    conn = small.index.db.conn
    assert _found(small, "foxtrot") == []
    before = conn.total_changes()
    assert _found(small, "foxtrot") == []
    assert conn.total_changes() == before


# -- odd entries and replaced files ----------------------------------------------------------
def _fifo(folder: Path) -> None:
    os.mkfifo(folder / "pipe.md")


def _bad_file_name(folder: Path) -> None:
    (Path(os.fsdecode(bytes(folder) + b"/caf\xe9.md"))).write_text("the golf service deploys\n")


def _bad_folder_name(folder: Path) -> None:
    odd = Path(os.fsdecode(bytes(folder) + b"/t\xffpics"))
    odd.mkdir()
    (odd / "golf.md").write_text("the golf service deploys\n")


@pytest.mark.parametrize("odd", [_fifo, _bad_file_name, _bad_folder_name])
def test_an_entry_the_full_scan_skips_keeps_small_reads_on_the_check(
    small: MemoryService, odd: Callable[[Path], None]
) -> None:
    odd(_knowledge(small) / "inbox")
    assert len(_found(small, "deploys")) == 3  # the full scan skips it, with one warning
    conn = small.index.db.conn
    before = conn.total_changes()
    assert len(_found(small, "deploys")) == 3
    assert conn.total_changes() == before  # every read ran the full scan and wrote the store state


def _alpha(svc: MemoryService) -> Path:
    return next(_knowledge(svc).rglob("*alpha*.md"))


def _replaced_by_symlink(svc: MemoryService) -> None:
    path = _alpha(svc)
    outside = path.parent.parent.parent / "outside.md"
    path.rename(outside)
    path.symlink_to(outside)


def _replaced_by_folder(svc: MemoryService) -> None:
    path = _alpha(svc)
    path.unlink()
    path.mkdir()


def _moved_across_folders(svc: MemoryService) -> None:
    path = _alpha(svc)
    (_knowledge(svc) / "topics").mkdir()
    path.rename(_knowledge(svc) / "topics" / "echo.md")


def _edited_with_a_future_mtime(svc: MemoryService) -> None:
    path = _alpha(svc)
    st = path.stat()
    path.write_text(path.read_text().replace("alpha", "omega"))
    future = st.st_mtime_ns + 10 * 365 * 86400 * 10**9
    os.utime(path, ns=(future, future))


@pytest.mark.parametrize(
    ("change", "query", "count"),
    [
        (_replaced_by_symlink, "alpha", 0),
        (_replaced_by_folder, "alpha", 0),
        (_moved_across_folders, "alpha", 1),
        (_edited_with_a_future_mtime, "omega", 1),
    ],
)
def test_a_replaced_or_moved_file_is_seen_by_the_next_small_read(
    small: MemoryService, change: Callable[[MemoryService], None], query: str, count: int
) -> None:
    change(small)
    assert len(_found(small, query)) == count
    conn = small.index.db.conn
    before = conn.total_changes()
    assert len(_found(small, query)) == count
    assert conn.total_changes() == before  # and the read after it is the read-only check again
