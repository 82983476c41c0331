"""How the files a scan found become index rows: new and changed files are read and indexed in
batches (``BATCH`` a transaction), rows whose file is gone are dropped, a file that cannot be
indexed is remembered in ``broken_files`` (and not re-read until it changes), and what changed
outside coffer is audited. ``reconcile.Reconciler`` decides which files to look at and inherits
this; ``read_checks`` calls it through the ``Reconciling`` protocol.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import NamedTuple

import attrs

from .._config import Settings
from .._models import ReindexReport
from .._store.audit import AuditLog
from .._store.files import FactParseError
from .._store.paths import StorePaths, is_recall_rel
from .._store.scan import FileStat, file_stat
from .._store.versions import bump_version
from .db import IndexDB
from .readahead import Read, read_ahead
from .reindex import Reindexer, stat_columns
from .tally import Progress, Stat, Tally

log = logging.getLogger("coffer_memory.reconcile")
# Files per write transaction of a bulk load. Each commit flushes FTS5's pending terms into a
# new segment that automerge then merges again: 500 made a 10k rebuild ~25% slower than 2500.
# A transaction of 2500 files takes ~1-2 s, well inside other writers' busy timeout.
BATCH = 2500
PROGRESS_EVERY = 500
# After a load only the word index is merged into one segment (``segments.after_bulk_load``):
# merging the trigram index too cost 0.13-0.58 s at 10k files, a tenth to a fifth of the rebuild.


class _Todo(NamedTuple):
    """A file a scan found new or changed."""

    path: str  # a Path is made only where one is needed (10k of them were 2% of a rebuild)
    rel: str  # relative to the store's root
    key: str  # documents.path
    forget: bool  # it may have a broken_files row to clear
    absent: bool  # the index has no row for it


class Applier:
    """The part of ``Reconciler`` that writes what a scan found into the index."""

    db: IndexDB
    reindexer: Reindexer
    settings: Settings
    audit: AuditLog

    def _record_external(self, sp: StorePaths, tally: Tally) -> None:
        """Audit the changes made outside coffer and advance the store's version (store lock held)."""
        if not tally.external:
            return
        try:
            for event, document_id, rel, details in tally.external:
                where = (
                    {"lane": rel.split("/", 1)[0], "path": str(sp.root / rel)}
                    if rel
                    else {"store_dir": str(sp.root)}
                )
                self.audit.append(event, sp.name, document_id, {"actor": "external", **where, **details})
            bump_version(self.settings.home, sp.name)
        except Exception:  # the index is in line with the files already; a full disk must not undo that
            log.exception("could not audit the outside changes to %s", sp.name)

    def _retry_pending(
        self, sp: StorePaths, report: ReindexReport, progress: Progress | None
    ) -> ReindexReport:
        """Re-index documents still holding the sentinel (their embedding failed or never ran)."""
        pending = self.reindexer.pending_paths(sp.name)
        if not pending:
            return report
        tally = Tally()
        files = {}
        for path in pending:
            try:
                st = os.stat(path)
            except OSError:
                continue
            files[sp.relative(path)] = file_stat(st)
        # Unknown to _apply's row map, so every pending file is re-read and re-embedded.
        self._apply(sp, files, {}, tally, progress, rows_complete=False)
        return attrs.evolve(report, updated=report.updated + tally.added + tally.updated)

    def _prefix(self, folder: Path) -> str:
        """The ``documents.path`` prefix of everything under ``folder``."""
        return self.db.key(folder) + "/"

    def _rows_under(self, store: str, prefix: str, table: str = "documents") -> dict[str, Stat]:
        rows = self.db.rows(
            f"SELECT path, file_size, file_mtime_ns, file_ctime_ns, file_ino FROM {table} "
            "WHERE resource_name = ? AND path >= ? AND path < ?",
            (store, prefix, prefix + "\U0010ffff"),
        )
        # Plain tuples (a FileStat compares equal to one): this runs over every row of a store.
        return {r[0]: r[1:] for r in rows}

    def _apply(
        self,
        sp: StorePaths,
        files: dict[str, FileStat],
        rows: dict[str, Stat],
        tally: Tally,
        progress: Progress | None = None,
        broken: dict[str, Stat] | None = None,
        rows_complete: bool = True,
    ) -> None:
        """Index new/changed files among ``files`` and drop ``rows`` whose file is gone.

        ``broken`` holds files that failed to parse before: unchanged ones are not re-read.
        ``rows_complete``: ``rows`` holds every index row of ``files``, so one missing there
        has none (a new file's row is not looked up).
        """
        # Without a map of broken files, any indexed file may have a broken_files row to clear.
        forget_all = broken is None
        broken = broken if broken is not None else {}
        todo: list[_Todo] = []
        root = self._prefix(sp.root)
        folder = str(sp.root)
        for rel, st in files.items():
            if not is_recall_rel(rel):
                continue
            tally.scanned += 1
            key = root + rel
            known = rows.pop(key, None)
            was_broken = broken.pop(key, None)
            if known == st:
                tally.unchanged += 1
            elif known is None and was_broken == st:
                tally.skipped.append(rel)
            else:
                todo.append(
                    _Todo(
                        f"{folder}/{rel}",
                        rel,
                        key,
                        forget_all or was_broken is not None,
                        rows_complete and known is None,
                    )
                )
        if broken:  # broken files that are gone now
            with self.db.transaction():
                for key in broken:
                    self._forget_broken(sp.name, key)
        gone = [self.db.file(p) for p in rows]
        total = len(todo) + len(gone)
        vectors = self.reindexer.vectors
        # With an embedder, a file counts as done once its vectors are in: embedding is most of
        # the work (about 40 ms a fact), and a bar at 100% while it runs looked hung.
        embedding = progress is not None and vectors is not None and not vectors.paused()
        if embedding and self.reindexer.held():  # embedded after the lock: its caller says progress
            progress = None
        with self.reindexer.bulk_load():
            for start in range(0, len(todo), BATCH):
                batch = todo[start : start + BATCH]
                with self.db.transaction():
                    ahead = read_ahead(batch, self.reindexer.max_file_bytes)
                    for done, (entry, read) in enumerate(ahead, start=start + 1):
                        self._index_one(sp, entry, tally, read)
                        if (
                            progress is not None
                            and not embedding
                            and (done % PROGRESS_EVERY == 0 or done == len(todo))
                        ):
                            progress(done, total)
                    self.reindexer.write_new()
                embedded = None
                if embedding and progress is not None:

                    def embedded(n: int, start: int = start, files: int = len(batch)) -> None:
                        progress(start + min(n, files), total)

                self.reindexer.flush_embeddings(embedded)
                if embedded is not None:
                    embedded(len(batch))
        if gone:
            with self.db.transaction():
                for path in gone:
                    document_id = self.reindexer.remove_path(sp.name, path)
                    if document_id:
                        tally.removed += 1
                        if tally.external is not None:
                            tally.external.append(("memory_deleted", document_id, sp.relative(path), {}))
            if progress is not None:
                progress(total, total)

    def _index_one(self, sp: StorePaths, entry: _Todo, tally: Tally, read: Read | None = None) -> None:
        name, rel, key, was_broken, absent = entry
        before = None
        if tally.external is not None and not absent:
            before = self.db.scalar(
                "SELECT content_sha256 FROM documents WHERE resource_name = ? AND path = ?", (sp.name, key)
            )
        try:
            if absent:  # queued, written with the batch's other new files (``write_new``)
                outcome, parsed = "added", self.reindexer.add_new(sp.name, name, (rel, key), read)
            else:
                self.reindexer.write_new()  # the queued rows first: they hold the next rowids
                outcome, parsed = self.reindexer.index_file(
                    sp.name, Path(name), defer_embedding=True, names=(rel, key), absent=absent
                )
        except FactParseError as exc:
            path = Path(name)
            if self._remember_broken(sp.name, path, str(exc)):
                log.warning("skipping %s: %s", path, exc)
            tally.skipped.append(rel)
            return
        except PermissionError as exc:  # there but unreadable: reported as broken, not taken for gone
            path = Path(name)
            self.reindexer.remove_path(sp.name, path)
            if self._remember_broken(sp.name, path, f"cannot be read: {exc.strerror or exc}"):
                log.warning("skipping %s: %s", path, exc)
            tally.skipped.append(rel)
            return
        except (FileNotFoundError, IsADirectoryError, OSError) as exc:
            path = Path(name)
            log.info("file vanished while indexing %s: %s", path, exc)
            self.reindexer.remove_path(sp.name, path)
            self._forget_broken(sp.name, key)
            return
        if was_broken:
            self._forget_broken(sp.name, key)
        if outcome == "added":
            tally.added += 1
        elif outcome == "updated":
            tally.updated += 1
        else:
            tally.unchanged += 1
        if tally.external is not None and outcome != "unchanged":
            after = {"after_sha256": parsed.sha256}
            if before is None:
                if tally.seen:
                    tally.external.append(("memory_added", parsed.fact.id, rel, after))
            elif before:  # an empty sha256 is the index's own "embedding pending" mark, not an edit
                tally.external.append(
                    ("memory_updated", parsed.fact.id, rel, {"before_sha256": before, **after})
                )

    def _remember_broken(self, store: str, path: Path, error: str) -> bool:
        """Record a file that cannot be indexed; True when this is news (a new file or reason)."""
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return False
        key = self.db.key(path)
        before = self.db.scalar(
            "SELECT error FROM broken_files WHERE resource_name = ? AND path = ?", (store, key)
        )
        self.db.conn.execute(
            "INSERT INTO broken_files (resource_name, path, file_size, file_mtime_ns, file_ctime_ns, file_ino, "
            "error) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(resource_name, path) DO UPDATE SET "
            "file_size = excluded.file_size, file_mtime_ns = excluded.file_mtime_ns, "
            "file_ctime_ns = excluded.file_ctime_ns, file_ino = excluded.file_ino, error = excluded.error",
            (store, key, *stat_columns(st), error),
        )
        return bool(before != error)

    def _forget_broken(self, store: str, path: str) -> None:
        self.db.conn.execute("DELETE FROM broken_files WHERE resource_name = ? AND path = ?", (store, path))

    def _broken_under(self, store: str, prefix: str) -> dict[str, Stat]:
        return self._rows_under(store, prefix, "broken_files")
