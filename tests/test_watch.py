"""The inotify feed of a long-lived process: outside edits of a larger store on the next read.

Real files, a real inotify fd, real services; the periodic full scan is put an hour away, so only
the feed (or its fallback's verifying scan) can show an in-place edit.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import count_state_reads

from coffer_memory import MemoryService
from coffer_memory._config import Settings
from coffer_memory._grep_recall import MACHINE_LINE as _MACHINE_LINE
from coffer_memory._store.lock import store_lock
from coffer_memory._store.paths import lock_path
from coffer_memory._store.watch import FolderFeed
from coffer_memory.plugins.builtin import _grep_texts
from coffer_memory.plugins.builtin import grep as grep_module
from coffer_memory.plugins.builtin.grep import PythonGrepBackend, RipgrepBackend

pytestmark = pytest.mark.skipif(not FolderFeed.supported(), reason="inotify is Linux only")
HOUR = 3600.0
STUCK = 60.0


def _settings(home: Path, **extra: object) -> Settings:
    values: dict[str, object] = {
        "reconcile_full_scan_max_files": 2,
        "reconcile_full_scan_seconds": HOUR,
        "reconcile_watch_full_scan_seconds": HOUR,
    }
    return Settings.load(home, **{**values, **extra})


# Without the feed's word, every read schedules the full scan (in the background).
FALLBACK_SCANS = {"reconcile_full_scan_seconds": 0.0}


def _feed(svc: MemoryService) -> FolderFeed:
    feed = svc.index.reconciler.feed
    assert feed is not None
    return feed


def _settle(svc: MemoryService) -> None:
    deadline = time.monotonic() + STUCK
    while svc.index.reconciler.scanning():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _warm(svc: MemoryService, store: str = "global") -> None:
    """A full scan of a store known to be large (``coffer reindex``; in a server the one that falls
    due) sets the watches."""
    svc.recall("anything", stores=[store])
    svc.reindex(store)
    assert _feed(svc).status(store) == "verified"


def _facts(svc: MemoryService, n: int = 5) -> list[Path]:
    return [svc.remember(f"fact zq{i}zq about the falcon build", store="global").path for i in range(n)]


def _sneaky_edit(path: Path, old: str, new: str) -> None:
    """Rewrite ``path`` in place keeping its size and mtime (``cp -p``): its folder does not move."""
    st = path.stat()
    data = path.read_bytes().replace(old.encode(), new.encode())
    assert len(data) == st.st_size
    path.write_bytes(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _ids(svc: MemoryService, query: str) -> set[str]:
    return {h.id for h in svc.recall(query, stores=["global"], mode="keyword").hits}


def _external(svc: MemoryService) -> list[tuple[str, str]]:
    return [
        (e.event, Path(str(e.details["path"])).name)
        for e in reversed(svc.audit(store="global").items)
        if e.actor == "external"
    ]


def edit_shows_at_once(svc: MemoryService, path: Path) -> None:
    """An in-place edit of ``path`` keeping its size and mtime, found by the next recall as an
    outside change, while the feed goes on vouching."""
    _sneaky_edit(path, "falcon", "kestr1")
    hits = svc.recall("kestr1", stores=["global"], mode="keyword").hits
    assert [h.path for h in hits] == [path]
    assert _external(svc) == [("memory_updated", path.name)]
    assert _feed(svc).status("global") == "verified"


def test_an_in_place_edit_keeping_size_and_mtime_shows_on_the_next_recall(tmp_home: Path) -> None:
    with MemoryService(settings=_settings(tmp_home)) as svc:
        paths = _facts(svc)
        _warm(svc)
        edit_shows_at_once(svc, paths[2])


def test_without_the_feed_the_same_edit_waits_for_the_full_scan(tmp_home: Path) -> None:
    """The behaviour the feed improves on (and what the CLI keeps): folder mtimes alone miss it."""
    with MemoryService(settings=_settings(tmp_home, reconcile_watch=False)) as svc:
        paths = _facts(svc)
        svc.recall("falcon", stores=["global"])
        assert svc.index.reconciler.feed is None
        _sneaky_edit(paths[2], "falcon", "kestr1")
        assert _ids(svc, "kestr1") == set()
        svc.reindex("global")
        assert len(_ids(svc, "kestr1")) == 1


def test_coffers_own_writes_are_no_outside_changes(tmp_home: Path) -> None:
    with MemoryService(settings=_settings(tmp_home)) as svc:
        paths = _facts(svc)
        _warm(svc)
        fact = svc.remember("a new fact about the osprey deploy", store="global")
        svc.edit_fact(fact.fact.id, body="the osprey deploy runs nightly", store="global")
        svc.delete_fact(svc.recall("zq1zq", stores=["global"], mode="keyword").hits[0].id, store="global")
        assert len(_ids(svc, "osprey")) == 1
        assert _ids(svc, "zq1zq") == set()
        assert _external(svc) == []
        assert len(paths) == 5 and _feed(svc).status("global") == "verified"


def test_folders_made_renamed_and_removed_by_hand(tmp_home: Path) -> None:
    with MemoryService(settings=_settings(tmp_home)) as svc:
        paths = _facts(svc)
        _warm(svc)
        knowledge = paths[0].parent.parent
        topics = knowledge / "topics"
        (topics / "deep").mkdir(parents=True)
        (topics / "deep" / "nested.md").write_text("# Nested\n\nwritten by hand in a new folder heron1\n")
        assert len(_ids(svc, "heron1")) == 1
        moved = knowledge / "moved"
        topics.rename(moved)
        hits = svc.recall("heron1", stores=["global"], mode="keyword").hits
        assert [h.path for h in hits] == [moved / "deep" / "nested.md"]
        # The new folder is watched: an in-place edit inside it shows at once too.
        _sneaky_edit(moved / "deep" / "nested.md", "heron1", "egret1")
        assert len(_ids(svc, "egret1")) == 1
        shutil.rmtree(moved)
        assert _ids(svc, "egret1") == set()
        paths[4].unlink()
        assert _ids(svc, "zq4zq") == set()
        assert _feed(svc).status("global") == "verified"
        nested = "nested.md"
        assert _external(svc) == [
            ("memory_added", nested),
            ("memory_added", nested),  # a move is the file added at its new path, gone at its old
            ("memory_deleted", nested),
            ("memory_updated", nested),
            ("memory_deleted", nested),
            ("memory_deleted", paths[4].name),
        ]


def test_an_overflowed_queue_falls_back_to_a_full_scan(tmp_home: Path) -> None:
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    with MemoryService(settings=_settings(tmp_home, **FALLBACK_SCANS)) as svc:
        paths = _facts(svc)
        _warm(svc)
        a, b = paths[0], paths[1]
        for i in range(limit + 100):  # alternating files: the kernel merges only repeats of the last event
            os.utime(a if i % 2 else b)
        _sneaky_edit(paths[2], "falcon", "kestr1")  # its event is dropped: the queue is full
        svc.recall("kestr1", stores=["global"])  # learns of the overflow; the due full scan starts
        _settle(svc)
        assert len(_ids(svc, "kestr1")) == 1
        assert _feed(svc).status("global") == "verified"  # the feed vouches again after that scan


def test_a_store_folder_replaced_by_hand_falls_back_to_a_full_scan(tmp_home: Path) -> None:
    with MemoryService(settings=_settings(tmp_home, **FALLBACK_SCANS)) as svc:
        paths = _facts(svc)
        _warm(svc)
        root = paths[0].parents[2]
        shutil.copytree(root, root.with_name("copy"), copy_function=shutil.copy2)
        _sneaky_edit(root.with_name("copy") / paths[2].relative_to(root), "falcon", "kestr1")
        shutil.rmtree(root)
        root.with_name("copy").rename(root)
        svc.recall("kestr1", stores=["global"])
        _settle(svc)
        assert len(_ids(svc, "kestr1")) == 1
        assert _feed(svc).status("global") == "verified"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_reads_its_parents_queue(tmp_home: Path) -> None:
    with MemoryService(settings=_settings(tmp_home)) as svc:
        paths = _facts(svc)
        _warm(svc)
        feed = _feed(svc)
        _sneaky_edit(paths[2], "falcon", "kestr1")  # queued on the parent's fd
        pid = os.fork()
        if pid == 0:  # the child: the feed drops its copy of the fd instead of reading it
            ok = feed.news("global") is None and feed.fd == -1 and feed.status("global") == "off"
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert len(_ids(svc, "kestr1")) == 1  # the event was still there for the parent


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")
def test_opening_and_closing_many_services_leaks_no_fd(tmp_home: Path) -> None:
    settings = _settings(tmp_home, grep_backend="python")
    with MemoryService(settings=settings) as svc:
        _facts(svc)
        _warm(svc)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(200):
        svc = MemoryService(settings=settings)
        _warm(svc)
        assert _feed(svc).fd >= 0
        for _ in range(2):  # the grep backend watches from its second search
            assert svc.recall("falcon", stores=["global"], mode="grep").hits
        grep = svc.index.retrieval.grep.resolve()  # type: ignore[attr-defined]
        assert (
            isinstance(grep, PythonGrepBackend)
            and grep._watched.listing(str(svc.paths("global").root), ["knowledge", "journal"]) is not None
        )
        svc.close()
    assert len(os.listdir("/proc/self/fd")) == before


def knowledge_behind_a_symlink(svc: MemoryService, home: Path) -> list[Path]:
    """Five facts, their ``knowledge`` folder moved out of the store and a symlink left in its
    place (a watch does not follow it), then one read; their paths as moved."""
    paths = _facts(svc)
    knowledge = paths[0].parent.parent
    elsewhere = home.parent / "elsewhere"
    knowledge.rename(elsewhere)
    knowledge.symlink_to(elsewhere, target_is_directory=True)
    svc.recall("falcon", stores=["global"])
    return [elsewhere / p.relative_to(knowledge) for p in paths]


def test_a_store_the_feed_cannot_watch_keeps_the_full_scan(tmp_home: Path) -> None:
    """A top recall folder that is a symlink is not followed by a watch: that store falls back to
    folder mtimes and the full scan falling due (here on every read, in the background)."""
    with MemoryService(settings=_settings(tmp_home, **FALLBACK_SCANS)) as svc:
        moved = knowledge_behind_a_symlink(svc, tmp_home)
        _settle(svc)
        svc.reindex("global")
        assert _feed(svc).status("global") == "unwatchable"
        _sneaky_edit(moved[2], "falcon", "kestr1")
        svc.recall("kestr1", stores=["global"])  # the due full scan starts in the background
        _settle(svc)
        assert len(_ids(svc, "kestr1")) == 1


def test_a_top_recall_folder_made_by_hand_is_watched(tmp_home: Path) -> None:
    with MemoryService(settings=_settings(tmp_home)) as svc:
        paths = _facts(svc)
        _warm(svc)
        journal = paths[0].parents[2] / "journal"
        assert not journal.exists()
        journal.mkdir()
        day = journal / "2026-01-02.md"
        day.write_text("the grebe deploy went fine\n")
        assert len(_ids(svc, "grebe")) == 1
        _sneaky_edit(day, "grebe", "heron")
        assert len(_ids(svc, "heron")) == 1
        assert _feed(svc).status("global") == "verified"


@pytest.mark.skipif(not RipgrepBackend().available(), reason="compares with ripgrep")
def test_python_grep_trusts_kept_texts_while_the_feed_vouches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From its second search of a store's folders on, the pure-Python backend skips each file's
    lstat; its answers stay ripgrep's through edits by hand (in place too), creates, deletes,
    renames and folders made and removed."""
    monkeypatch.setattr(grep_module, "RACY_NS", 0)  # keep every text, as an old file's
    root = tmp_path / "store"
    inbox = root / "knowledge" / "inbox"
    inbox.mkdir(parents=True)
    for i in range(6):
        (inbox / f"f{i}.md").write_text(f"fact {i}: the deploy runs at noon\n")
    os.link(inbox / "f3.md", tmp_path / "outside.md")  # a second link, outside the watched folders
    (root / "knowledge" / ".hidden.md").write_text("deploy hidden\n")
    folders = [root / "knowledge", root / "journal"]
    patterns = ["deploy", "rollback", "heron"]
    python, rg = PythonGrepBackend(), RipgrepBackend()

    def same() -> dict[str, frozenset[int]]:
        held = python.held(folders, patterns, skip=_MACHINE_LINE)
        assert held == rg.held(folders, patterns, skip=_MACHINE_LINE)
        return held

    assert len(same()) == 6
    same()  # the second search arms the feed, the walk after it lets it vouch
    assert python._watched.listing(str(root), ["knowledge", "journal"]) is not None
    _sneaky_edit(inbox / "f2.md", "deploy", "heron!")
    assert same()[str(inbox / "f2.md")] == frozenset({2})
    _sneaky_edit(tmp_path / "outside.md", "deploy", "heron!")  # no event names f3.md
    assert same()[str(inbox / "f3.md")] == frozenset({2})
    (inbox / "f0.md").unlink()
    (inbox / "f1.md").rename(inbox / "moved.md")
    (inbox / "new.md").write_text("a rollback by hand\n")
    (root / "knowledge" / "topic" / "deep").mkdir(parents=True)
    (root / "knowledge" / "topic" / "deep" / "n.md").write_text("deep rollback\n")
    (root / "journal").mkdir()
    (root / "journal" / "2026-01-02.md").write_text("journal heron\n")
    assert len(same()) == 8
    _sneaky_edit(root / "knowledge" / "topic" / "deep" / "n.md", "rollback", "deploy!!")
    same()
    shutil.rmtree(root / "knowledge" / "topic")
    assert len(same()) == 7
    assert python._watched.listing(str(root), ["knowledge", "journal"]) is not None  # still vouched
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "s.md").write_text("deploy from outside the store\n")
    (root / "knowledge" / "linked").symlink_to(elsewhere, target_is_directory=True)  # never followed
    assert len(same()) == 7
    (root / "knowledge" / "real").mkdir()
    same()
    (root / "knowledge" / "real").rmdir()
    (root / "knowledge" / "real").symlink_to(elsewhere, target_is_directory=True)
    assert len(same()) == 7
    python.close()


def test_a_folder_swapped_for_a_symlink_is_not_followed(tmp_home: Path) -> None:
    """The full scan never follows a symlink below a top recall folder; the feed's re-scan of the
    folder it names must not either (it took the symlink for the folder and indexed its target)."""
    with MemoryService(settings=_settings(tmp_home)) as svc:
        paths = _facts(svc)
        topic = paths[0].parent.parent / "topic"
        topic.mkdir()
        (topic / "t.md").write_text("the topic of the plover\n")
        elsewhere = tmp_home.parent / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "s.md").write_text("outside the store: plover and avocet\n")
        _warm(svc)
        assert len(_ids(svc, "plover")) == 1
        shutil.rmtree(topic)
        topic.symlink_to(elsewhere, target_is_directory=True)
        assert _ids(svc, "avocet") == set()
        assert _ids(svc, "plover") == set()
        (elsewhere / "s2.md").write_text("avocet again\n")
        assert _ids(svc, "avocet") == set()
        svc.reindex("global")  # the full scan agrees
        assert _ids(svc, "avocet") == set()


def test_an_edit_through_another_hard_link_shows_on_the_next_recall(tmp_home: Path) -> None:
    """inotify names the path a write went through: a file with a second link (in the store or
    outside it) changed through that link raises no event for its own name."""
    with MemoryService(settings=_settings(tmp_home)) as svc:
        paths = _facts(svc)
        twin = paths[0].with_name("twin.md")
        os.link(paths[0], twin)
        outside = tmp_home.parent / "outside.md"
        os.link(paths[1], outside)
        _warm(svc)
        _sneaky_edit(twin, "falcon", "kestr1")
        assert {h.path for h in svc.recall("kestr1", stores=["global"], mode="keyword").hits} == {
            paths[0],
            twin,
        }
        _sneaky_edit(outside, "falcon", "kestr2")
        assert [h.path for h in svc.recall("kestr2", stores=["global"], mode="keyword").hits] == [paths[1]]
        outside.unlink()  # one link again: its changes raise events once more
        _sneaky_edit(paths[1], "kestr2", "kestr3")
        assert [h.path for h in svc.recall("kestr3", stores=["global"], mode="keyword").hits] == [paths[1]]
        later = paths[3].with_name("later.md")
        os.link(paths[3], later)  # made while the feed vouches: its event names the new link alone
        assert len(_ids(svc, "zq3zq")) == 2
        _sneaky_edit(later, "falcon", "kestr4")
        assert {h.path for h in svc.recall("kestr4", stores=["global"], mode="keyword").hits} == {
            paths[3],
            later,
        }
        assert _feed(svc).status("global") == "verified"


@pytest.mark.skipif(not RipgrepBackend().available(), reason="compares with ripgrep")
def test_python_grep_walks_again_when_its_vouching_grows_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hard link made outside the watched folders after the walk raises no event, nor does a write
    through it: the pure-Python backend trusts its kept texts no longer than ``REWALK_NS``."""
    monkeypatch.setattr(grep_module, "RACY_NS", 0)
    inbox = tmp_path / "store" / "knowledge" / "inbox"
    inbox.mkdir(parents=True)
    for i in range(3):
        (inbox / f"f{i}.md").write_text(f"fact {i}: the deploy runs at noon\n")
    folders = [inbox.parent]
    python, rg = PythonGrepBackend(), RipgrepBackend()
    for _ in range(3):  # the second search arms the feed, the walk after it lets it vouch
        python.held(folders, ["deploy"], skip=_MACHINE_LINE)
    os.link(inbox / "f1.md", tmp_path / "outside.md")
    _sneaky_edit(tmp_path / "outside.md", "deploy", "heron!")
    monkeypatch.setattr(_grep_texts, "REWALK_NS", 0)
    held = python.held(folders, ["deploy", "heron"], skip=_MACHINE_LINE)
    assert held == rg.held(folders, ["deploy", "heron"], skip=_MACHINE_LINE)
    assert held[str(inbox / "f1.md")] == frozenset({1})
    python.close()


def test_a_read_during_a_background_scan_waits_when_the_feed_has_news(tmp_home: Path) -> None:
    """Reads skip the reconcile while a background full scan holds the lock (it brings the index up
    to date itself), but a scan that passed a file before its edit does not: with news from the
    feed the read waits for the scan, then applies them."""
    with MemoryService(settings=_settings(tmp_home)) as svc:
        paths = _facts(svc)
        _warm(svc)
        watched = _feed(svc)._stores["global"]
        found: list[set[str]] = []
        with store_lock(lock_path(tmp_home, "global")):  # the scan waits for it, holding the service lock
            svc.index.reconciler._scan_in_background("global")
            while svc.index.lock.acquire(blocking=False):
                svc.index.lock.release()
            _sneaky_edit(paths[2], "falcon", "kestr1")
            reader = threading.Thread(target=lambda: found.append(_ids(svc, "kestr1")))
            reader.start()
            while not found and not watched.files:  # answered, or the news drained while it waits
                time.sleep(0.01)
        reader.join()
        _settle(svc)
        assert len(found[0]) == 1


@pytest.mark.skipif(not RipgrepBackend().available(), reason="compares with ripgrep")
def test_python_grep_after_close_trusts_no_listing_of_the_closed_feed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend searched again after ``close`` arms a new feed, whose epochs start again at 1: the
    files kept for a folder by the closed feed's epoch 1 passed for this one's."""
    monkeypatch.setattr(grep_module, "RACY_NS", 0)
    root = tmp_path / "store"
    for name in ("knowledge", "journal"):
        (root / name).mkdir(parents=True)
        (root / name / "a.md").write_text(f"{name}: the deploy runs at noon\n")
    both, knowledge = [root / "knowledge", root / "journal"], [root / "knowledge"]
    python, rg = PythonGrepBackend(), RipgrepBackend()
    for _ in range(3):  # armed on the second search, vouched after it
        python.held(both, ["deploy"], skip=_MACHINE_LINE)
    python.close()
    (root / "journal" / "b.md").write_text("a deploy written while nothing watched\n")
    python.held(knowledge, ["deploy"], skip=_MACHINE_LINE)
    held = python.held(both, ["deploy"], skip=_MACHINE_LINE)
    assert held == rg.held(both, ["deploy"], skip=_MACHINE_LINE) and len(held) == 3
    python.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")
def test_services_dropped_without_close_leave_no_fd_to_the_collector(tmp_home: Path) -> None:
    """A service nobody closed (a notebook cell run again) is collected with its fds: the rows a
    reader connection kept were held in a module-level map whose value referenced its key, so every
    reader connection (and its rows) outlived its service."""
    settings = _settings(tmp_home)
    with MemoryService(settings=settings) as svc:
        _facts(svc)
        _warm(svc)
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        svc = MemoryService(settings=settings)
        _warm(svc)
        assert _ids(svc, "falcon")
        del svc
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_watched_store_keeps_its_state_row_until_the_feed_has_news(
    tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A read of a store the feed vouches for keeps the store's state row while its connection
    # writes nothing; news (here another process's write) read it again, with the new count.
    with (
        MemoryService(settings=_settings(tmp_home)) as svc,
        MemoryService(settings=_settings(tmp_home)) as other,
    ):
        _facts(svc)
        _warm(svc)
        reconciler = svc.index.reconciler
        reads = count_state_reads(svc, monkeypatch)
        assert _feed(svc).status("global") == "verified"
        for _ in range(3):
            assert reconciler.reconcile("global").unchanged == 5
        assert len(reads) <= 1  # the row the last check read, kept
        reads.clear()
        other.remember("the kestrel deploy agent", store="global")
        reconciler.reconcile("global")
        assert "global" in reads  # the row as the other process left it
        reads.clear()
        for _ in range(3):
            assert reconciler.reconcile("global").unchanged == 6
        assert len(reads) <= 1
        assert _ids(svc, "kestrel")


@pytest.mark.parametrize("folder", [False, True])
def test_a_name_that_is_not_utf8_made_while_the_feed_vouches_is_skipped(tmp_home: Path, folder: bool) -> None:
    """The scans skip such a name with a warning; the feed named it, and the read that checked it
    against the index failed with UnicodeEncodeError (its surrogates cannot be bound)."""
    with MemoryService(settings=_settings(tmp_home)) as svc:
        paths = _facts(svc)
        _warm(svc)
        inbox = os.fsencode(paths[0].parent)
        if folder:
            os.mkdir(inbox + b"/t\xffpics")
            Path(os.fsdecode(inbox + b"/t\xffpics/golf.md")).write_text("the falcon golf\n")
        else:
            Path(os.fsdecode(inbox + b"/caf\xe9.md")).write_text("the falcon golf\n")
        assert len(_ids(svc, "falcon")) == 5
        if folder:
            Path(os.fsdecode(inbox + b"/t\xffpics/golf.md")).write_text("the falcon golf again\n")
        assert len(_ids(svc, "falcon")) == 5
        assert _feed(svc).status("global") == "verified"
