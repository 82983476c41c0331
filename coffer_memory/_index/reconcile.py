"""Lazy reconcile-on-read: bring a store's index rows in line with its files.

Fast path: a store with at most ``reconcile_full_scan_max_files`` recall files is fully
stat'ed on every read (a few ms), so an outside edit shows at once. A larger store stats
only its recall folders (a handful of ``stat`` calls): any create, delete or rename
changes a folder's mtime and re-lists that folder alone. An in-place edit of an existing
file does not touch its folder, so larger stores also need the full stat scan, at most
once every ``reconcile_full_scan_seconds``. In a service (a long-lived process) that scan
runs on a background thread when it falls due, so reads stay on the fast path; when the
last full scan is older than ``STALE_SECONDS`` (a short-lived process such as the CLI),
the read runs it inline. So an outside in-place edit of a large store shows up within
``reconcile_full_scan_seconds`` (plus the scan) in a server, within ``STALE_SECONDS`` in
the CLI, and at once after ``coffer reindex``. Only files whose size, mtime, ctime or inode
changed are read and hashed (ctime and inode catch an edit that keeps size and mtime).

A long-lived process on Linux (``reconcile_watch``, which the CLI turns off) watches a store's
recall folders with inotify (``watch.FolderFeed``; a small store from its first read, whose full
scan arms it): each read drains the queue and re-checks only the files named there, so an outside
in-place edit shows on the next read. While
the feed vouches for a store, its full stat scan is a safety net run in the background at most
once per ``reconcile_watch_full_scan_seconds``; whatever the feed cannot vouch for (an overflow,
a failed watch, a moved store folder, a fork, a network file system) falls back to the above.

Odd entries never take a store down: a name that is not UTF-8, a FIFO named ``*.md``, a file
over ``[memory] max_file_bytes`` or with unreadable frontmatter is skipped with one warning
(``coffer doctor`` lists it). A damaged index found here is moved aside and rebuilt.

Changes made outside coffer (an editor, ``git pull``, ``rm``) are audited here, the one place
that sees them, each with ``actor: external``: a file new to a store the index knew is
``memory_added``, a changed one ``memory_updated``, a vanished one ``memory_deleted``, a vanished
store folder ``store_deleted``; the store's version then advances once (older cursors are
refused). The first scan of a store (a new or rebuilt index) learns its files without recording
them; edits and deletions are measured against the rows coffer wrote. Coffer's own writes are
indexed in their transaction, so a later scan finds them unchanged.

This module decides which files a read looks at (the fast path, the folder and full scans, the
background scan); how the files it found become index rows is ``apply.Applier``'s.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import apsw

from .._config import Settings
from .._models import ReindexReport
from .._store.audit import AuditLog
from .._store.lock import store_lock
from .._store.looks import Looks
from .._store.paths import StorePaths, lock_path
from .._store.scan import OddFiles, list_folder, scan_markdown
from .._store.watch import FolderFeed
from . import read_checks, segments
from .apply import Applier
from .db import DAMAGE, IndexDB
from .read_checks import MISSING, PATHS_KEPT, arm, from_feed, from_feed_kept
from .reindex import Reindexer
from .tally import Progress, Tally, unchanged, warn_odd

log = logging.getLogger("coffer_memory.reconcile")
# After a load only the word index is merged into one segment (``segments.after_bulk_load``):
# merging the trigram index too cost 0.13-0.58 s at 10k files, a tenth to a fifth of the rebuild.
# A full scan older than this runs inline again: short-lived processes (the CLI) never keep a
# background scan alive long enough, so they would otherwise never see in-place edits.
STALE_SECONDS = 60.0


class Reconciler(Applier):
    """Keeps one home's index in line with its memory files."""

    def __init__(
        self,
        db: IndexDB,
        reindexer: Reindexer,
        settings: Settings,
        lock: threading.RLock | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        self.db = db
        self.reindexer = reindexer
        self.settings = settings
        self.lock = lock  # the owning service's lock; enables background full scans
        # The index file (``IndexDB.file_id``) the last reconcile brought up to date; 0 when it
        # straddled another process's repair twice (``_reconcile_once``): none is.
        self.brought = 0
        self.audit = audit if audit is not None else AuditLog(settings.home)
        self._background: set[str] = set()
        self._guard = threading.Lock()
        # One StorePaths per store read (its folders are cached on it): every read reconciles.
        self._paths: dict[str, StorePaths] = {}
        # The state each store's last fast-path check read, with what it was read under (``read_checks.quick``).
        self._states: dict[str, tuple[tuple[object, int], tuple[dict[str, int], float, int] | None]] = {}
        # inotify, for long-lived processes (it opens nothing before a larger store's full scan)
        self.feed = FolderFeed() if lock is not None and settings.reconcile_watch else None
        # Called with a store once a background scan let the lock go (its owner embeds then).
        self.after: Callable[[str], object] | None = None

    def close(self) -> None:
        """Release the inotify fd (the index connection is closed by its owner)."""
        if self.feed is not None:
            self.feed.close()

    def scanning(self) -> bool:
        """True while a background full scan runs (or waits for the lock)."""
        with self._guard:
            return bool(self._background)

    def has_news(self, store: str) -> bool:
        """True when the inotify feed has news of ``store`` that the index does not hold yet (a read
        waits for a background scan then: the scan may have passed the file before its edit)."""
        return self.feed is not None and self.feed.pending(store)

    def fresh_beside_scan(self, store: str, db: IndexDB) -> bool:
        """Whether a read of ``store`` may answer from the rows ``db`` (a reader connection) holds
        while a background full scan holds the lock, or must wait for the lock and reconcile.

        The store being scanned is brought up to date by its scan, unless the feed has news of it
        (the scan may have passed the file before its edit) or the index holds no state of it yet. Any other store is checked as the read
        would check it without the scan, on ``db`` and without the lock: by the feed where it
        vouches, else its files (a small store) or its folders' mtimes (a larger one; a due full
        scan is started in the background, as a read starts it). A scan of one store must not leave
        the reads of another on stale rows: a read waits only for a store found changed. An index
        file found damaged (cut short by another program, say) is never read beside the scan: the
        read waits for the lock, where the reconcile moves it aside and rebuilds it.
        """
        if db.needs_repair():
            return False
        with self._guard:
            scanned = store in self._background
        if scanned:
            # A store the scan indexes from nothing (its first index, or every store after the
            # scan found the file damaged and began a new one) has no committed state to read.
            return not self.has_news(store) and bool(
                db.rows("SELECT 1 FROM store_state WHERE resource_name = ?", (store,))
            )
        vouched = self.feed.vouches(store) if self.feed is not None else None
        if vouched is not None:
            return vouched
        sp = self._paths.get(store) or self.reindexer.paths(store)
        rows = db.rows(
            "SELECT dirs, last_full_scan, file_count FROM store_state WHERE resource_name = ?", (store,)
        )
        if not rows:
            return False
        dirs, age, count = json.loads(rows[0][0]), read_checks.scan_age(float(rows[0][1])), int(rows[0][2])
        if count <= self.settings.reconcile_full_scan_max_files:
            return read_checks.small_unchanged(self, sp, dirs, db)
        if age >= self.settings.reconcile_full_scan_seconds:
            if age >= STALE_SECONDS:
                return False  # the read scans it itself
            self._scan_in_background(store)
        return not read_checks.changed_dirs(sp, dirs) and not all(m == MISSING for m in dirs.values())

    def _scan_in_background(self, store: str) -> None:
        with self._guard:
            if store in self._background:
                return
            self._background.add(store)

        def run() -> None:
            try:
                assert self.lock is not None
                with self.lock:
                    if self.db.closed:  # the service closed while this scan waited for it
                        return
                    self.reconcile(store, full=True)
                    segments.settle(self.db)  # what single writes left: every MATCH reads each segment
                if self.after is not None:  # what it indexed is embedded after the lock
                    self.after(store)
            except Exception:
                log.exception("background full scan of %s failed", store)
            finally:
                with self._guard:
                    self._background.discard(store)

        threading.Thread(target=run, name=f"coffer-scan-{store}", daemon=True).start()

    def _state(self, store: str) -> tuple[dict[str, int], float, int] | None:
        rows = self.db.rows(
            "SELECT dirs, last_full_scan, file_count FROM store_state WHERE resource_name = ?", (store,)
        )
        if not rows:
            return None
        return json.loads(rows[0][0]), float(rows[0][1]), int(rows[0][2])

    def _keep_state(self, store: str, key: tuple[object, int]) -> tuple[dict[str, int], float, int] | None:
        """``_state(store)``, kept in ``_states`` as read under ``key`` (connection, total changes)."""
        if len(self._states) >= PATHS_KEPT:
            self._states.clear()
        state = self._state(store)
        self._states[store] = (key, state)
        return state

    def _save_state(self, store: str, dirs: dict[str, int], last_full: float, count: int) -> None:
        self.db.conn.execute(
            "INSERT INTO store_state (resource_name, dirs, last_full_scan, file_count) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(resource_name) DO UPDATE SET dirs = excluded.dirs, "
            "last_full_scan = excluded.last_full_scan, file_count = excluded.file_count",
            (store, json.dumps(dirs, sort_keys=True), last_full, count),
        )

    def reconcile(
        self, store: str, *, full: bool = False, progress: Progress | None = None, looks: Looks | None = None
    ) -> ReindexReport:
        """Reconcile ``store``; ``full=True`` forces the full stat scan.

        A damaged index (met here or reported by an earlier query) is moved aside first and
        the store rebuilt from its files. The caller holds the service lock, outside any
        transaction. In a service (``lock`` given) nothing is embedded here: the documents keep
        the sentinel, for the caller to embed after it lets the lock go (``_ahead.embed_later``).
        ``looks``: the read's ``Looks`` (``_store/looks.py``): the store folder's stat
        taken before, and whether this read checked the index file's size with nothing written
        since (then it is not checked again; it is after a reconcile that wrote).
        """
        with self._holding():
            return self._reconcile_once(store, full=full, progress=progress, looks=looks)

    def _holding(self) -> AbstractContextManager[None]:
        return self.reindexer.holding() if self.lock is not None else nullcontext()

    def _reconcile_once(
        self, store: str, *, full: bool, progress: Progress | None, looks: Looks | None
    ) -> ReindexReport:
        for attempt in range(2):
            if self.db.needs_repair(check_size=looks is None or not looks.index_checked):
                self.repair()
                full = True
            conn = self.db.conn
            sized = conn.get_autocommit()  # the size is checked outside a transaction only
            changes = conn.total_changes()
            try:
                report = self._reconcile(store, full=full, progress=progress, looks=looks)
                self.brought = self.db.file_id
                if self.db.conn is not conn:
                    # The file was replaced while this ran (another process's repair moved it
                    # aside): the rows written before went into the old file and the store's
                    # state into the new one, which then read as complete, and a service's
                    # recalls answered nothing for good (tests/_index_race.py). Again, in full.
                    if not attempt:
                        full = True
                        continue
                    # Replaced again: without the state the new file would vouch for rows it
                    # lacks, the next read scans in full; this one's read is to be done again.
                    self.db.conn.execute("DELETE FROM store_state WHERE resource_name = ?", (store,))
                    self.brought = 0
                if looks is not None:  # the reader reads right after: its check is this one
                    looks.index_checked = sized and self.db.conn is conn and conn.total_changes() == changes
                return report
            except DAMAGE as exc:
                if attempt:
                    raise
                self.db.note_damage(exc)
        raise AssertionError("unreachable")  # pragma: no cover

    def rebuild(self, store: str, *, progress: Progress | None = None) -> ReindexReport:
        """Drop ``store``'s index rows and index its files again, in one transaction: a process
        reading the store meanwhile (a server, coffer-mcp) keeps the rows from before until the
        commit, where a commit between the two answered MEMORY_NOT_FOUND for facts on disk and
        recalled nothing. A damaged index is moved aside and rebuilt as ``reconcile`` does.
        """
        with self._holding():
            return self._rebuild(store, progress=progress)

    def _rebuild(self, store: str, *, progress: Progress | None) -> ReindexReport:
        if not self.db.needs_repair():
            conn = self.db.conn
            try:
                with store_lock(lock_path(self.settings.home, store)), self.db.transaction():
                    self.reindexer.remove_store(store)
                    if self.db.conn is conn:  # else damage met there was repaired: start over below
                        return self._reconcile(store, full=True, progress=progress)
            except DAMAGE as exc:
                self.db.note_damage(exc)
            except apsw.SQLError:
                if self.db.conn is conn:
                    raise  # only the COMMIT on the connection a repair put in its place is expected
        self.reindexer.remove_store(store)
        return self.reconcile(store, full=True, progress=progress)

    def repair(self) -> None:
        """Reopen the index, moving it aside first if it was found damaged (service lock held)."""
        self.reindexer.repair_index()

    def _reconcile(
        self, store: str, *, full: bool, progress: Progress | None, looks: Looks | None = None
    ) -> ReindexReport:
        sp = self._paths.get(store)
        if sp is None:
            if len(self._paths) >= PATHS_KEPT:
                self._paths.clear()
            sp = self._paths[store] = self.reindexer.paths(store)
        # A folder linked to another store's is never read through (``StorePaths.linked_store``):
        # its store reads as gone, before the quick checks below could vouch for rows read before.
        linked = sp.linked_store(looks) is not None
        # A store the inotify feed watches is checked by its news (``read_checks.from_feed``): folder mtimes
        # alone (``read_checks.quick``) miss an in-place edit.
        fed = from_feed_kept(self, sp, looks) if self.feed is not None and not full and not linked else None
        if fed is not None:
            return fed
        watched = self.feed is not None and self.feed.status(store) != "off"
        quick = None if full or watched or linked else read_checks.quick(self, sp)
        if quick is not None:
            return quick
        if linked or not sp.root.is_dir():
            if self.db.scalar("SELECT 1 FROM store_state WHERE resource_name = ?", (store,)):
                self.reindexer.remove_store(store)  # coffer's own delete_store leaves no state behind
                self._record_external(sp, Tally(external=[("store_deleted", None, "", {})]))
            elif linked and self.db.scalar(
                "SELECT 1 FROM documents WHERE resource_name = ? LIMIT 1", (store,)
            ):
                self.reindexer.remove_store(store)  # rows of its own files, now out of reach
            return Tally().report(store)
        vectors = self.reindexer.vectors
        if vectors is not None and vectors.existing_table(store) is None:
            with store_lock(lock_path(self.settings.home, store)):
                vectors.ensure_table(store)  # marks every document for re-embedding
        state = self._state(store)
        seen = state is not None  # the index knew this store: what changed, changed outside coffer
        if not full and state is not None:
            dirs, last_full, count = state
            age = read_checks.scan_age(last_full)
            due = age >= self.settings.reconcile_full_scan_seconds
            large = count > self.settings.reconcile_full_scan_max_files
            if self.feed is not None:
                fed = from_feed(self, sp, count, age)
                if fed is not None:
                    return fed
            if large and due and self.lock is not None and age < STALE_SECONDS:
                # In a long-lived process the due full scan runs beside the reads, not in one.
                self._scan_in_background(store)
                due = False
            if large and not due:
                changed = read_checks.changed_dirs(sp, dirs)
                pending = self.reindexer.pending_paths(store)
                if not changed and not pending:
                    return unchanged(store, count)
                with store_lock(lock_path(self.settings.home, store)):
                    report = self._reconcile_dirs(sp, read_checks.changed_dirs(sp, dirs))
                    return self._retry_pending(sp, report, progress)
            if not large:
                # A small store the feed could watch but does not vouch for yet (never armed in this
                # process, or its watches lost) is armed by this check: later reads drain the feed
                # where ``small_unchanged`` stats every file on every read.
                armable = self.feed is not None and self.feed.status(store) != "unwatchable"
                check = read_checks.arm_small if armable else read_checks.small_unchanged
                if check(self, sp, dirs) and not self.reindexer.pending_paths(store):
                    return unchanged(store, count)
        with store_lock(lock_path(self.settings.home, store)):
            report = self._reconcile_full(sp, progress, seen=seen)
            return self._retry_pending(sp, report, progress)

    def _reconcile_full(self, sp: StorePaths, progress: Progress | None, *, seen: bool) -> ReindexReport:
        epoch = arm(self, sp)
        tally = Tally(external=[], seen=seen)
        odd: OddFiles = {}
        linked: set[str] = set()
        files, dirs = scan_markdown(sp.root, sp.recall_dirs(), odd, linked)
        warn_odd(sp.name, odd)
        for folder in sp.recall_dirs():
            dirs.setdefault(sp.relative(folder), MISSING)
        prefix = self._prefix(sp.root)
        rows = self._rows_under(sp.name, prefix)
        self._apply(sp, files, rows, tally, progress, self._broken_under(sp.name, prefix))
        count = tally.scanned - len(tally.skipped)
        with self.db.transaction():
            self._save_state(sp.name, dirs, time.time(), count)
        self._record_external(sp, tally)
        if self.feed is not None:
            self.feed.relink(sp.name, linked, trees=[sp.relative(d) for d in sp.recall_dirs()])
            self.feed.verify(sp.name, epoch)
        return tally.report(sp.name)

    def _reconcile_dirs(self, sp: StorePaths, changed: list[str]) -> ReindexReport:
        tally = Tally(external=[])  # only runs on a store the index knows
        state = self._state(sp.name)
        assert state is not None
        dirs, last_full, count = state
        odd: OddFiles = {}
        for rel in changed:
            listing = list_folder(sp.root, rel, odd)
            prefix = self._prefix(sp.root / rel)
            rows = self._rows_under(sp.name, prefix)
            if listing is None:  # the folder is gone: so is everything under it
                roots = {sp.relative(f) for f in sp.recall_dirs()}
                for sub in [d for d in list(dirs) if d == rel or d.startswith(rel + "/")]:
                    if sub in roots:
                        dirs[sub] = MISSING
                    else:
                        del dirs[sub]
                self._apply(sp, {}, rows, tally, broken=self._broken_under(sp.name, prefix))
                continue
            mtime, files, subdirs = listing
            direct = {p: v for p, v in rows.items() if "/" not in p[len(prefix) :]}
            bad = {
                p: v for p, v in self._broken_under(sp.name, prefix).items() if "/" not in p[len(prefix) :]
            }
            self._apply(sp, files, direct, tally, broken=bad)
            dirs[rel] = mtime
            for sub in subdirs:
                if sub not in dirs:
                    sub_files, sub_dirs = scan_markdown(sp.root, (sp.root / sub,), odd)
                    self._apply(sp, sub_files, self._rows_under(sp.name, self._prefix(sp.root / sub)), tally)
                    dirs.update(sub_dirs)
        warn_odd(sp.name, odd)
        count = int(self.db.scalar("SELECT count(*) FROM documents WHERE resource_name = ?", (sp.name,)) or 0)
        with self.db.transaction():
            self._save_state(sp.name, dirs, last_full, count)
        self._record_external(sp, tally)
        return tally.report(sp.name)

    def note_write(self, store: str, folder: Path, before_ns: int, after_ns: int, delta: int) -> None:
        """After our own write in ``folder``: move its recorded mtime forward if nobody else moved it.

        Keeps the next read on the fast path instead of re-listing a folder we just changed.
        """
        state = self._state(store)
        if state is None:
            return
        dirs, last_full, count = state
        rel = self.reindexer.paths(store).relative(folder)
        if dirs.get(rel) != before_ns:
            return
        dirs[rel] = after_ns
        self._save_state(store, dirs, last_full, count + delta)
