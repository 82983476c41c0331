"""The inotify feed watches small stores too (at most ``reconcile_full_scan_max_files`` files).

Until session 22 a small store was never watched: every read of it stat'ed each of its files
(``read_checks.small_unchanged``), two thirds of a served recall at 300 facts. Now its first read in
a long-lived process runs the full scan that arms the feed, and later reads drain the queue.
Real files, a real inotify fd, real services, the default store size threshold.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from test_watch import _external, _feed, _ids, _sneaky_edit, edit_shows_at_once, knowledge_behind_a_symlink

from coffer_memory import MemoryService
from coffer_memory._config import Settings
from coffer_memory._index import reindex
from coffer_memory._store.watch import FolderFeed

pytestmark = pytest.mark.skipif(not FolderFeed.supported(), reason="inotify is Linux only")
HOUR = 3600.0


def _settings(home: Path, **extra: object) -> Settings:
    # The periodic scans an hour away: only the feed, or a read's own check, can show an edit.
    values: dict[str, object] = {
        "reconcile_full_scan_seconds": HOUR,
        "reconcile_watch_full_scan_seconds": HOUR,
    }
    return Settings.load(home, **{**values, **extra})


def _facts(svc: MemoryService, n: int = 5) -> list[Path]:
    return [svc.remember(f"fact zq{i}zq about the falcon build", store="global").path for i in range(n)]


def test_a_small_store_is_watched_from_its_first_read(tmp_home: Path) -> None:
    with MemoryService(settings=_settings(tmp_home)) as svc:
        assert svc.settings.reconcile_full_scan_max_files >= 5  # a small store by the default
        paths = _facts(svc)
        assert _feed(svc).status("global") == "off"
        assert len(_ids(svc, "falcon")) == 5
        assert _feed(svc).status("global") == "verified"
        edit_shows_at_once(svc, paths[2])


def test_a_new_store_is_watched_from_its_first_scan(tmp_home: Path) -> None:
    """A store the index has never seen is armed by the scan that first indexes it."""
    with MemoryService(settings=_settings(tmp_home)) as svc:
        paths = _facts(svc, 2)
    (tmp_home / "index.db").unlink()
    with MemoryService(settings=_settings(tmp_home)) as svc:
        assert len(_ids(svc, "falcon")) == 2
        assert _feed(svc).status("global") == "verified"
        paths[0].unlink()
        shutil.copy2(paths[1], paths[1].with_name("copied.md"))
        assert len(_ids(svc, "falcon")) == 2
        assert sorted(_external(svc)) == [("memory_added", "copied.md"), ("memory_deleted", paths[0].name)]


def test_a_small_store_whose_watches_were_lost_is_armed_again_by_its_next_read(tmp_home: Path) -> None:
    with MemoryService(settings=_settings(tmp_home)) as svc:
        paths = _facts(svc)
        svc.recall("falcon", stores=["global"])
        _feed(svc).lose("global")  # as an overflowed queue or a moved store folder leaves it
        _sneaky_edit(paths[2], "falcon", "kestr1")
        assert _feed(svc).status("global") == "off"
        assert len(_ids(svc, "kestr1")) == 1
        assert _feed(svc).status("global") == "verified"
        _sneaky_edit(paths[3], "falcon", "kestr2")
        assert len(_ids(svc, "kestr2")) == 1


def test_a_small_store_the_feed_cannot_watch_is_checked_file_by_file(tmp_home: Path) -> None:
    """A top recall folder that is a symlink is not followed by a watch: every read of that small
    store stats its files, as before the feed watched small stores, and still sees an edit."""
    with MemoryService(settings=_settings(tmp_home)) as svc:
        moved = knowledge_behind_a_symlink(svc, tmp_home)
        assert _feed(svc).status("global") == "unwatchable"
        _sneaky_edit(moved[2], "falcon", "kestr1")
        assert len(_ids(svc, "kestr1")) == 1
        os.utime(moved[3])
        _sneaky_edit(moved[3], "falcon", "kestr2")
        assert len(_ids(svc, "kestr2")) == 1


def test_the_cli_watches_nothing_and_still_sees_an_edit(tmp_home: Path) -> None:
    """Short-lived processes (``reconcile_watch`` off) keep checking a small store file by file."""
    with MemoryService(settings=_settings(tmp_home, reconcile_watch=False)) as svc:
        paths = _facts(svc)
        svc.recall("falcon", stores=["global"])
        assert svc.index.reconciler.feed is None
        _sneaky_edit(paths[2], "falcon", "kestr1")
        assert len(_ids(svc, "kestr1")) == 1


def test_a_small_store_is_armed_by_its_check_without_a_scan_and_knows_its_hard_links(
    tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small store the index holds unchanged is armed by the read-only file-by-file check (no
    full scan, so no write of its state row), and that check finds the files with a second link,
    whose edits through the other link raise no event for the file in the store."""
    # Rows of files changed in the last 2 s are marked to be hashed again, which sends the check to
    # the full scan: the test's files are seconds old, a real store's are not.
    monkeypatch.setattr(reindex, "RACY_NS", 0)
    outside = tmp_home.parent / "outside.md"
    with MemoryService(settings=_settings(tmp_home)) as svc:
        paths = _facts(svc)
        os.link(paths[1], outside)
        assert len(_ids(svc, "falcon")) == 5
        state = svc.index.reconciler._state("global")
    with MemoryService(settings=_settings(tmp_home)) as svc:
        assert len(_ids(svc, "falcon")) == 5
        assert _feed(svc).status("global") == "verified"
        assert svc.index.reconciler._state("global") == state  # no full scan wrote it
        _sneaky_edit(outside, "falcon", "kestr2")
        assert [h.path for h in svc.recall("kestr2", stores=["global"], mode="keyword").hits] == [paths[1]]
