"""The checks a read makes of a store before it searches: do its files still match the index rows?

The fast path (``quick``, ``small_unchanged``, ``changed_dirs``; read-only, on every read): a small
store has every recall file stat'ed against its rows; a larger one, whose full scan is not due,
has only its recall folders' mtimes compared with the store's state row. A store the inotify
feed watches (``watch.FolderFeed``; ``from_feed``) is checked by the feed's news instead: a read
drains the feed and re-checks only the files and folders it named. Any difference, and whatever
the feed cannot vouch for, falls back to the scans in ``reconcile``.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path
from stat import S_ISREG
from typing import Protocol

from .._config import Settings
from .._models import ReindexReport
from .._store.lock import store_lock
from .._store.looks import Looks
from .._store.paths import StorePaths, is_recall_rel, lock_path
from .._store.scan import FileStat, OddFiles, scan_markdown, utf8_name
from .._store.watch import FolderFeed, recall_stat, under, walkable
from .db import IndexDB
from .reindex import Reindexer
from .tally import Progress, Stat, Tally, unchanged, warn_odd

MISSING = -1
PATHS_KEPT = 1024


class Reconciling(Protocol):
    """What these checks use of ``reconcile.Reconciler``, which calls them (and so is not
    imported here: no import cycle)."""

    feed: FolderFeed | None
    settings: Settings
    db: IndexDB
    reindexer: Reindexer
    # The state each store's last fast-path check read, with what it was read under (``quick``).
    _states: dict[str, tuple[tuple[object, int], tuple[dict[str, int], float, int] | None]]

    def _scan_in_background(self, store: str) -> None: ...
    def _state(self, store: str) -> tuple[dict[str, int], float, int] | None: ...
    def _keep_state(
        self, store: str, key: tuple[object, int]
    ) -> tuple[dict[str, int], float, int] | None: ...
    def _save_state(self, store: str, dirs: dict[str, int], last_full: float, count: int) -> None: ...
    def _record_external(self, sp: StorePaths, tally: Tally) -> None: ...
    def _retry_pending(
        self, sp: StorePaths, report: ReindexReport, progress: Progress | None
    ) -> ReindexReport: ...
    def _prefix(self, folder: Path) -> str: ...
    def _rows_under(self, store: str, prefix: str, table: str = "documents") -> dict[str, Stat]: ...
    def _broken_under(self, store: str, prefix: str) -> dict[str, Stat]: ...
    def _apply(
        self,
        sp: StorePaths,
        files: dict[str, FileStat],
        rows: dict[str, Stat],
        tally: Tally,
        progress: Progress | None = None,
        broken: dict[str, Stat] | None = None,
        rows_complete: bool = True,
    ) -> None: ...


def quick(rec: Reconciling, sp: StorePaths) -> ReindexReport | None:
    """The fast path's "nothing changed" for a large store whose full scan is not due, or None
    to let ``Reconciler._reconcile`` work it out (it reads everything afresh).

    Every read of a large store asks this, so the store's state row is kept from the last
    check, read again after any write on this connection (``total_changes``: a scan, a
    write, a repair's new connection) and whenever a recorded folder's mtime differs from
    it (another process's write records new mtimes). Never a stale "unchanged": that needs
    every recall folder at the mtime of a state the index held, so a create, delete or
    rename by anyone since then shows at once; and one of them there (so is the store).
    """
    conn = rec.db.conn
    if not conn.get_autocommit():  # inside a transaction: what it wrote may roll back
        return None
    vectors = rec.reindexer.vectors
    if vectors is not None and (
        vectors.existing_table(sp.name) is None or rec.reindexer.pending_paths(sp.name)
    ):
        return None
    key = (conn, conn.total_changes())
    held = rec._states.get(sp.name)
    if held is not None and held[0] == key:
        state = held[1]
        found = unchanged_by(rec, sp, state)
        if found is not None or state is None or small(rec, state):
            return found
        # Changed folders or a due scan by the state kept: another process may have recorded them.
    state = rec._keep_state(sp.name, key)
    return unchanged_by(rec, sp, state)


def scan_age(last_full: float) -> float:
    """Seconds since a store's last full scan; a scan dated in the future (recorded while the
    clock ran ahead, before it was set back) counts as long ago, so the next one is due at once
    (it was not due again until the clock caught up: edits in place went unseen meanwhile)."""
    age = time.time() - last_full
    return age if age >= 0 else float("inf")


def small(rec: Reconciling, state: tuple[dict[str, int], float, int]) -> bool:
    """True for a store whose every file a read checks (``small_unchanged``)."""
    return state[2] <= rec.settings.reconcile_full_scan_max_files


def unchanged_by(
    rec: Reconciling, sp: StorePaths, state: tuple[dict[str, int], float, int] | None
) -> ReindexReport | None:
    """``quick``'s answer by ``state``: a large store, its full scan not due, every recall folder
    at its recorded mtime and one of them there (so the store's folder is too)."""
    if state is None or small(rec, state):
        return None
    dirs, last_full, count = state
    if scan_age(last_full) >= rec.settings.reconcile_full_scan_seconds:
        return None
    if changed_dirs(sp, dirs) or all(mtime == MISSING for mtime in dirs.values()):
        return None
    return unchanged(sp.name, count)


def changed_dirs(sp: StorePaths, dirs: dict[str, int]) -> list[str]:
    changed = []
    root = f"{sp.root}/"  # every read runs this: strings, not a Path per folder
    for rel, recorded in dirs.items():
        try:
            mtime = os.stat(root + rel, follow_symlinks=False).st_mtime_ns
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            mtime = MISSING
        if mtime != recorded:
            changed.append(rel)
    return changed


def small_unchanged(
    rec: Reconciling,
    sp: StorePaths,
    dirs: dict[str, int],
    db: IndexDB | None = None,
    linked: set[str] | None = None,
) -> bool:
    """True when every recall file of ``sp`` matches its index row and every folder its recorded
    mtime: the full scan would change nothing. Read only and without the store lock (any
    difference, or a race with a writer, sends the read to the full scan under the lock).
    ``db``: the connection whose rows are compared (the writer's unless given: a reader's
    needs no service lock). ``linked`` (when given) gets the files with another hard link, as
    the full scan's.

    A small store is checked on every read, so this walks with ``os.scandir`` and strings,
    compares stat tuples with the rows of one query, and stops at the first difference
    (the full scan's Path objects, FileStats and write of the store state cost 3-5x more).
    """
    db = rec.db if db is None else db
    folder = sp.root
    root = str(folder)
    prefix = db.key(folder) + "/"
    rows = db.rows(
        "SELECT path, file_size, file_mtime_ns, file_ctime_ns, file_ino FROM documents "
        "WHERE resource_name = ?1 AND path >= ?2 AND path < ?3 UNION ALL "
        "SELECT path, file_size, file_mtime_ns, file_ctime_ns, file_ino FROM broken_files "
        "WHERE resource_name = ?1 AND path >= ?2 AND path < ?3",
        (sp.name, prefix, prefix + "\U0010ffff"),
    )
    cut = len(prefix)
    expected = {r[0][cut:]: r[1:] for r in rows}
    if len(expected) != len(rows):  # a file with both a document and a broken row
        return False
    seen: dict[str, int] = {}
    stack = [str(top)[len(root) + 1 :] for top in sp.recall_dirs()]
    tops = list(stack)
    matched = 0
    while stack:
        rel_dir = stack.pop()
        path = f"{root}/{rel_dir}"
        try:
            mtime = os.stat(path, follow_symlinks=False).st_mtime_ns
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        except OSError as exc:  # nested past PATH_MAX: the full scan skips it too (``scan.py``)
            if exc.errno != errno.ENAMETOOLONG:
                raise
            continue
        if dirs.get(rel_dir) != mtime:
            return False
        seen[rel_dir] = mtime
        try:
            scanner = os.scandir(path)
        except PermissionError:  # the full scan skips a folder it may not list too
            continue
        except (FileNotFoundError, NotADirectoryError):
            return False
        with scanner:
            for entry in scanner:
                name = entry.name
                if name[0] == ".":
                    continue
                rel = f"{rel_dir}/{name}"
                want = expected.get(rel)
                if want is not None:  # most entries: an indexed file
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        return False
                    if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != want or not S_ISREG(
                        st.st_mode
                    ):
                        return False
                    if linked is not None and st.st_nlink > 1:
                        linked.add(rel)
                    matched += 1
                elif not name.isascii() and not utf8_name(name):
                    continue  # skipped by the full scan too (with one warning)
                elif entry.is_dir(follow_symlinks=False):
                    stack.append(rel)
                elif name.endswith(".md") and is_recall_rel(rel) and entry.is_file(follow_symlinks=False):
                    return False  # a file the index does not know (a FIFO and the like are skipped)
    for top in tops:
        seen.setdefault(top, MISSING)
    return matched == len(expected) and seen == dirs


def from_feed_kept(rec: Reconciling, sp: StorePaths, looks: Looks | None = None) -> ReindexReport | None:
    """``from_feed`` of a store the feed vouches for, with its state row as the last check read it
    while this connection wrote nothing (``total_changes``), or None to let ``reconcile`` work it
    out (its own checks, the feed's news kept). Every read of a watched store runs this: the
    row's read transaction, its JSON and a ``stat`` of the store folder (the feed's own check of
    it stands for that) were a tenth of a keyword recall at 1k facts.

    A kept row stands for what the feed's silence vouches for: no file of the store changed, so
    neither did its file count; a newer full scan by another process (a later ``last_full_scan``)
    only brings the background safety net forward. With news the row is read again. ``looks``:
    the read's ``Looks``, whose stat of the store folder the feed's identity check takes.
    """
    assert rec.feed is not None
    conn = rec.db.conn
    vectors = rec.reindexer.vectors
    if not conn.get_autocommit() or (vectors is not None and vectors.existing_table(sp.name) is None):
        return None
    key = (conn, conn.total_changes())
    held = rec._states.get(sp.name)
    state = held[1] if held is not None and held[0] == key else rec._keep_state(sp.name, key)
    if state is None:
        return None  # no state: the scans decide
    news = rec.feed.news(sp.name, looks)
    if news is None:
        return None
    if news[0] or news[1]:  # another process may have moved the count: the row as it is now
        fresh = rec._keep_state(sp.name, key)
        if fresh is None:
            rec.feed.lose(sp.name)  # its news are taken: the scans find them
            return None
        state = fresh
    return from_feed(rec, sp, state[2], scan_age(state[1]), news)


def from_feed(
    rec: Reconciling,
    sp: StorePaths,
    count: int,
    age: float,
    news: tuple[set[str], set[str]] | None = None,
) -> ReindexReport | None:
    """A read's check of a larger store from the inotify feed, or None when the feed cannot
    vouch for it (the next full scan, when it falls due, sets its watches anew). ``news``: what
    ``feed.news`` gave the caller."""
    assert rec.feed is not None
    store = sp.name
    if news is None:
        news = rec.feed.news(store)
    if news is None:
        return None
    if age >= rec.settings.reconcile_watch_full_scan_seconds:
        rec._scan_in_background(store)  # the safety net, never inline in a read
    files, trees = news
    try:
        if (
            not trees
            and (not files or news_unchanged(rec, sp, files))
            and not rec.reindexer.pending_paths(store)
        ):
            return unchanged(store, count)
        with store_lock(lock_path(rec.settings.home, store)):
            report = reconcile_news(rec, sp, files, trees)
            return rec._retry_pending(sp, report, None)
    except BaseException:
        rec.feed.lose(store)  # the news it gave are not applied: scan again
        raise


def arm(rec: Reconciling, sp: StorePaths) -> int | None:
    """Before a full scan of a store: its watches (set anew unless the feed vouches), so that the
    scan covers what happened before them and the feed what happens after. Small stores too: a
    read of one the feed vouches for drains the queue instead of stat'ing every file."""
    if rec.feed is None:
        return None
    if rec.feed.status(sp.name) == "off":
        rec.feed.arm(sp.name, str(sp.root), [sp.relative(d) for d in sp.recall_dirs()])
    return rec.feed.epoch(sp.name)


def arm_small(rec: Reconciling, sp: StorePaths, dirs: dict[str, int]) -> bool:
    """Watch a small store and vouch for it when every file still matches its row, or False to
    let the full scan decide (it verifies the watches set here). The check is the full scan's
    answer when nothing changed, without its write of the store's state and that commit's sync
    (a first read took 34-49 ms p50 at 200 files with the scan, 7 with the check alone)."""
    assert rec.feed is not None
    epoch = arm(rec, sp)
    linked: set[str] = set()
    if not small_unchanged(rec, sp, dirs, linked=linked):
        return False
    rec.feed.relink(sp.name, linked, trees=[sp.relative(d) for d in sp.recall_dirs()])
    rec.feed.verify(sp.name, epoch)
    return True


def rows_of(rec: Reconciling, store: str, keys: list[str], table: str = "documents") -> dict[str, Stat]:
    """The stat columns of the rows of ``table`` for ``keys`` (``documents.path`` values)."""
    rows: dict[str, Stat] = {}
    for start in range(0, len(keys), 500):
        part = keys[start : start + 500]
        found = rec.db.rows(
            f"SELECT path, file_size, file_mtime_ns, file_ctime_ns, file_ino FROM {table} "
            f"WHERE resource_name = ? AND path IN ({','.join('?' * len(part))})",
            (store, *part),
        )
        rows.update((r[0], r[1:]) for r in found)
    return rows


def news_unchanged(rec: Reconciling, sp: StorePaths, files: set[str]) -> bool:
    """True when every file the feed named still matches its row: coffer's own writes, most
    often (they are indexed in their transaction). Read only, without the store lock."""
    prefix = rec._prefix(sp.root)
    keys = [prefix + rel for rel in files]
    rows, broken = rows_of(rec, sp.name, keys), rows_of(rec, sp.name, keys, "broken_files")
    root = str(sp.root)
    for rel, key in zip(files, keys, strict=True):
        st = recall_stat(root, rel)
        if (st is None and (key in rows or key in broken)) or (
            st is not None and st != rows.get(key) and st != broken.get(key)
        ):
            return False
    return True


def same_inodes(rec: Reconciling, sp: StorePaths, linked: set[str], found: dict[str, FileStat]) -> set[str]:
    """The indexed files sharing an inode with the ``linked`` files among ``found``: a link made
    while the feed watched raised an event for its new name alone."""
    inodes = sorted({found[rel].ino for rel in linked if rel in found})
    if not inodes:
        return set()
    cut = len(rec._prefix(sp.root))
    rows = rec.db.rows(
        f"SELECT path FROM documents WHERE resource_name = ? AND file_ino IN ({','.join('?' * len(inodes))})",
        (sp.name, *inodes),
    )
    return {r[0][cut:] for r in rows}


def reconcile_news(rec: Reconciling, sp: StorePaths, files: set[str], trees: set[str]) -> ReindexReport:
    """Re-check the files and re-scan the folders the feed named (store lock held)."""
    assert rec.feed is not None
    tally = Tally(external=[])
    odd: OddFiles = {}
    trees = {t for t in trees if not any(under(t, o) and t != o for o in trees)}
    files = {f for f in files if not any(under(f, t) for t in trees)}
    prefix = rec._prefix(sp.root)
    keys = [prefix + rel for rel in files]
    root = str(sp.root)
    linked: set[str] = set()
    found = {rel: st for rel in files if (st := recall_stat(root, rel, odd, linked)) is not None}
    rec._apply(
        sp,
        found,
        rows_of(rec, sp.name, keys),
        tally,
        broken=rows_of(rec, sp.name, keys, "broken_files"),
    )
    for tree in sorted(trees):
        rec.feed.rewatch(sp.name, tree)  # before the scan: what changes after it is news again
        if walkable(root, tree):
            tree_files = scan_markdown(sp.root, (sp.root / tree,), odd, linked)[0]
        else:  # no folder now: maybe a file took its name (its news was dropped above)
            st = recall_stat(root, tree, odd, linked) if not os.path.isdir(f"{root}/{tree}") else None
            tree_files = {tree: st} if st is not None else {}
        tree_prefix = rec._prefix(sp.root / tree)
        # With the rows under it, the row of a file the folder took the name of (its news was
        # dropped above as lying under the folder): it is gone.
        same = [prefix + tree]
        rows = {**rows_of(rec, sp.name, same), **rec._rows_under(sp.name, tree_prefix)}
        broken = {**rows_of(rec, sp.name, same, "broken_files"), **rec._broken_under(sp.name, tree_prefix)}
        rec._apply(sp, tree_files, rows, tally, broken=broken)
        found.update(tree_files)
    rec.feed.relink(sp.name, linked | same_inodes(rec, sp, linked, found), files, trees)
    warn_odd(sp.name, odd)
    state = rec._state(sp.name)
    if (tally.added or tally.removed) and state is not None:
        count = int(rec.db.scalar("SELECT count(*) FROM documents WHERE resource_name = ?", (sp.name,)) or 0)
        with rec.db.transaction():
            rec._save_state(sp.name, state[0], state[1], count)
    rec._record_external(sp, tally)
    return tally.report(sp.name)
