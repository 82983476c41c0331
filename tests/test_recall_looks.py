"""One recall looks at each store folder and at the index file once (``_store/looks.py``).

Real homes, a real git repository, a real inotify feed. The ``stat`` and ``lstat`` calls are
counted by wrapping ``os.stat`` and ``os.lstat`` (the system calls, not coffer's code; ``os.path.islink``
calls ``os.lstat``); what is checked is that the answers handed from
one step of a recall to the next never outlive the recall: a store folder replaced, or an index
the recall itself wrote to, is looked at again.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from test_watch import _settings  # stores of more than two files watched, full scans an hour away

from coffer_memory import MemoryService
from coffer_memory._store.watch import FolderFeed


def _stats(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The paths ``os.stat`` and ``os.lstat`` are called with from now on, counted together."""
    seen: Counter[str] = Counter()
    for name in ("stat", "lstat"):
        real = getattr(os, name)

        def counted(
            path: object, *args: object, _real: Callable[..., os.stat_result] = real, **kwargs: object
        ) -> os.stat_result:
            seen[os.fspath(path)] += 1  # type: ignore[arg-type]
            return _real(path, *args, **kwargs)

        monkeypatch.setattr(os, name, counted)
    return seen


def _two_watched_stores(svc: MemoryService, repo: Path) -> tuple[Path, Path]:
    """Five facts in the project store and five in the global one, both watched by the feed."""
    for i in range(5):
        svc.remember(f"fact zq{i}zq about the falcon build", cwd=repo)
        svc.remember(f"global fact zq{i}zq about the falcon release", scope="global")
    project = svc.target(cwd=repo).store
    for store in (project, "global"):
        svc.recall("anything", stores=[store])
        svc.reindex(store)  # a full scan of a large store arms the feed
    return svc.paths(project).root, svc.paths("global").root


@pytest.mark.skipif(not FolderFeed.supported(), reason="inotify is Linux only")
def test_a_recall_stats_each_store_folder_and_the_index_file_once(
    tmp_home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Main stat'ed the project store's folder three times (target, "present", the feed's identity
    check), the global one twice and the index file three times (a cut-short check per store's
    reconcile, then the reader's). Later each store folder was looked at three times again: one
    ``stat`` and two ``lstat`` (the refusal of a folder linked to another store's, asked by the
    target and by the reconcile): one ``lstat`` answers all of them."""
    with MemoryService(settings=_settings(tmp_home)) as svc:
        project, global_ = _two_watched_stores(svc, repo)
        svc.recall("falcon", cwd=repo, mode="keyword")  # warm: the feed's first news are taken
        seen = _stats(monkeypatch)
        hits = svc.recall("falcon build", cwd=repo, mode="keyword").hits
        assert hits
        assert seen[str(project)] == 1
        assert seen[str(global_)] == 1
        assert seen[str(tmp_home / "index.db")] == 1


@pytest.mark.skipif(not FolderFeed.supported(), reason="inotify is Linux only")
def test_a_reconcile_that_wrote_has_the_reader_check_the_index_file_again(
    tmp_home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader skips its own check only when the writer checked in the same recall and wrote
    nothing since: a fact written by hand is indexed by the recall, and the reader checks again."""
    with MemoryService(settings=_settings(tmp_home)) as svc:
        _two_watched_stores(svc, repo)
        svc.recall("falcon", cwd=repo, mode="keyword")
        reader = svc.retrieval.db  # this thread's reader connection
        checks: list[int | None] = []
        cut_short = reader._cut_short

        def counted(st: os.stat_result) -> int | None:
            checks.append(found := cut_short(st))
            return found

        monkeypatch.setattr(reader, "_cut_short", counted)
        inbox = svc.paths("global").root / "knowledge" / "inbox"
        (inbox / "by-hand.md").write_text("# by hand\n\nthe kestrel deploy runs nightly\n")
        hits = svc.recall("kestrel", cwd=repo, mode="keyword").hits
        assert [h.path.name for h in hits if h.path is not None] == ["by-hand.md"]
        assert checks == [None]  # the reconcile wrote: the reader checks the file itself
        checks.clear()
        assert svc.recall("kestrel", cwd=repo, mode="keyword").hits
        assert checks == []  # nothing written: the writer's check stands for the reader's


def _scans_done(svc: MemoryService) -> None:
    deadline = time.monotonic() + 60  # a bound for a hung scan, not a measurement
    while svc.index.reconciler.scanning():
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.skipif(not FolderFeed.supported(), reason="inotify is Linux only")
def test_a_store_moved_away_and_copied_back_is_seen_by_the_next_recall(tmp_home: Path, repo: Path) -> None:
    """Moving the stores' parent folder raises no event on the store folders' own watches: only the
    identity check of the folder (its stat, taken once per recall) sees that the folder at that
    path is another one. A stat kept from an earlier recall would let the feed vouch for the copy
    and miss an edit in it that kept the file's size and mtime."""
    settings = _settings(tmp_home, reconcile_full_scan_seconds=0.0)  # a lost feed scans again
    with MemoryService(settings=settings) as svc:
        _, global_ = _two_watched_stores(svc, repo)
        assert svc.recall("falcon", cwd=repo, mode="keyword").hits
        # A background scan begun by the set-up's reads (before the feed was armed) may still run:
        # one that passed the file before the edit below would answer for the one the lost feed
        # asks for (a failure seen under a load of 10-16).
        _scans_done(svc)
        memory = global_.parent
        fact = next((global_ / "knowledge" / "inbox").glob("*.md"))
        memory.rename(memory.with_name("memory-moved"))
        shutil.copytree(memory.with_name("memory-moved"), memory, copy_function=shutil.copy2)
        st = fact.stat()
        data = fact.read_bytes().replace(b"falcon", b"kestr1")
        assert len(data) == st.st_size
        fact.write_bytes(data)
        os.utime(fact, ns=(st.st_atime_ns, st.st_mtime_ns))
        # The global store alone: a recall of both stores scanned the project's (its feed is lost
        # too) in the background, and a read skips a store while a background scan holds the
        # lock (``IndexHandle.refresh``), so under load the global store went unchecked until
        # the next recall, which then only started its scan (a failure seen under a load of 5).
        svc.recall("kestr1", stores=["global"], mode="keyword")
        _scans_done(svc)  # the full scan the lost feed falls back to
        hits = svc.recall("kestr1", cwd=repo, mode="keyword").hits
        assert [h.path for h in hits] == [fact]


@pytest.mark.skipif(not FolderFeed.supported(), reason="inotify is Linux only")
def test_the_feed_is_read_once_a_recall_and_again_by_the_next(
    tmp_home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The feed's queue is read by the first store's check and not again by the second's in the
    same recall; the next recall reads it again, so an in-place edit of the second store (size and
    mtime kept: only the feed tells) made between two recalls is found by the second."""
    with MemoryService(settings=_settings(tmp_home)) as svc:
        _, global_ = _two_watched_stores(svc, repo)
        assert svc.recall("falcon", cwd=repo, mode="keyword").hits
        feed = svc.index.reconciler.feed
        assert feed is not None
        reads: list[int] = []
        drain = feed._drain

        def counted() -> None:
            reads.append(1)
            drain()

        monkeypatch.setattr(feed, "_drain", counted)
        fact = next((global_ / "knowledge" / "inbox").glob("*.md"))
        st = fact.stat()
        data = fact.read_bytes().replace(b"falcon", b"kestr1")
        fact.write_bytes(data)
        os.utime(fact, ns=(st.st_atime_ns, st.st_mtime_ns))
        hits = svc.recall("kestr1", cwd=repo, mode="keyword").hits
        assert [h.path for h in hits] == [fact]
        assert len(reads) == 1  # two stores checked, one read of the queue
