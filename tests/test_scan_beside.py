"""A background full scan of one store holds the service lock; a read of another store meanwhile
checks that store's own files (``IndexHandle.refresh``), as it would without the scan.

Real homes, a real git repository, a real inotify feed. The scan is held up the way
``test_watch`` holds it: the test takes the scanned store's file lock, so the scan waits for it
holding the service lock.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import make_repo
from test_recall_looks import _two_watched_stores
from test_watch import _settings  # stores of more than two files watched, full scans an hour away

from coffer_memory import MemoryService
from coffer_memory._index.reindex import RACY_NS
from coffer_memory._store.lock import store_lock
from coffer_memory._store.paths import lock_path
from coffer_memory._store.watch import FolderFeed

STUCK = 60.0  # a bound for a hung thread, not a measurement
# How long a reader that skipped the check takes to answer at most (it answers in milliseconds).
ANSWERED = 2.0
BY_HAND = "# by hand\n\nthe kestrel deploy runs nightly\n"


@contextmanager
def _global_scan_holding_the_lock(svc: MemoryService, home: Path) -> Iterator[None]:
    """A background full scan of the global store holds the service lock until the block ends."""
    with store_lock(lock_path(home, "global")):
        svc.index.reconciler._scan_in_background("global")
        deadline = time.monotonic() + STUCK
        while svc.index.lock.acquire(blocking=False):
            svc.index.lock.release()
            assert time.monotonic() < deadline
            time.sleep(0.001)
        assert svc.index.reconciler.scanning()
        yield


def _kestrel(svc: MemoryService, repo: Path, store: str, answers: list[list[str]]) -> threading.Thread:
    """A recall of ``store`` for the file written by hand, answering into ``answers``."""

    def read() -> None:
        hits = svc.recall("kestrel", cwd=repo, stores=[store], mode="keyword").hits
        answers.append([h.path.name for h in hits if h.path is not None])

    reader = threading.Thread(target=read)
    reader.start()
    return reader


def _wait(answers: list[list[str]], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not answers and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.skipif(not FolderFeed.supported(), reason="inotify is Linux only")
def test_a_store_whose_watch_is_lost_is_checked_while_another_store_is_scanned(
    tmp_home: Path, repo: Path
) -> None:
    """The project store's folder is replaced by hand (its watch is lost: the feed no longer vouches
    for it), then a file is added to it. A read of it during the global store's scan answered from
    the rows before the file (the scan was taken to bring the index up to date, but it scans the
    global store alone) until the next read after the scan."""
    with MemoryService(settings=_settings(tmp_home)) as svc:
        project_root, _ = _two_watched_stores(svc, repo)
        project = svc.target(cwd=repo).store
        feed = svc.index.reconciler.feed
        assert feed is not None and feed.status(project) == "verified"
        copy = project_root.with_name("copy")
        shutil.copytree(project_root, copy, copy_function=shutil.copy2)
        shutil.rmtree(project_root)
        copy.rename(project_root)
        answers: list[list[str]] = []
        with _global_scan_holding_the_lock(svc, tmp_home):
            (project_root / "knowledge" / "inbox" / "by-hand.md").write_text(BY_HAND)
            reader = _kestrel(svc, repo, project, answers)
            _wait(answers, ANSWERED)  # a reader that skips the check answers by now
        reader.join(STUCK)
        assert answers == [["by-hand.md"]]
        assert feed.status(project) == "off"  # the read fell back to the scans: the watch is lost


def test_a_small_store_is_checked_while_another_store_is_scanned(tmp_home: Path, repo: Path) -> None:
    """A store of at most ``reconcile_full_scan_max_files`` files is never watched: every read stats
    its files. During another store's scan a read of it skipped that."""
    with MemoryService(settings=_settings(tmp_home)) as svc:
        for i in range(5):
            svc.remember(f"global fact zq{i}zq about the falcon release", scope="global")
        svc.remember("a project fact about the falcon build", cwd=repo)
        project = svc.target(cwd=repo).store
        assert svc.recall("falcon", cwd=repo, stores=[project]).hits
        answers: list[list[str]] = []
        with _global_scan_holding_the_lock(svc, tmp_home):
            (svc.paths(project).root / "knowledge" / "inbox" / "by-hand.md").write_text(BY_HAND)
            reader = _kestrel(svc, repo, project, answers)
            _wait(answers, ANSWERED)
        reader.join(STUCK)
        assert answers == [["by-hand.md"]]


def test_a_read_of_an_unchanged_store_does_not_wait_for_another_stores_scan(
    tmp_home: Path, repo: Path, tmp_path: Path
) -> None:
    """The check reads the committed rows without the lock: with nothing changed the read answers
    while the scan holds the lock, small store or store the feed cannot vouch for (each read once
    before: a store's first read, or its first after the feed stopped vouching, takes the lock)."""
    with MemoryService(settings=_settings(tmp_home)) as svc:
        project_root, _ = _two_watched_stores(svc, repo)
        project = svc.target(cwd=repo).store
        (project_root / "knowledge" / "inbox" / "by-hand.md").write_text(BY_HAND)
        assert svc.recall("kestrel", cwd=repo, stores=[project]).hits
        feed = svc.index.reconciler.feed
        assert feed is not None
        feed.lose(project)
        assert svc.recall("kestrel", cwd=repo, stores=[project]).hits  # its folders' mtimes recorded anew
        other = make_repo(tmp_path / "other")
        svc.remember("the kestrel deploy of the small store", cwd=other)
        small = svc.target(cwd=other).store
        time.sleep(RACY_NS / 1e9)  # a file indexed within this of its change is hashed again by a read
        assert svc.recall("kestrel", cwd=other, stores=[small]).hits
        answers: list[list[str]] = []
        with _global_scan_holding_the_lock(svc, tmp_home):
            for store, cwd in ((project, repo), (small, other)):
                reader = _kestrel(svc, cwd, store, answers)
                reader.join(STUCK)  # with the scan still holding the lock
            assert len(answers) == 2 and all(answers), answers
