"""The one write transaction of the truth layer.

Every mutation of a memory file goes through ``Writer.transaction``:

    lock (this process's index lock + the store's inter-process flock + a shared index's lock)
      -> content checks (NUL and lone surrogates, secrets: the hook point; a caller that
         prepares its text before the lock runs them there, ``Writer.check``)
      -> the shared lock checked still held (the fence), then
         atomic write | O_APPEND append | delete, never through a symlink
      -> re-index the touched documents (recall files only)
      -> note the folder state (keeps the reconcile fast path warm)
      -> audit event
      -> store version + 1 (what pagination cursors are bound to)
      -> receipt (store, path, before and after sha256)

A dry run is a mode of the same transaction: nothing is locked or written, each operation
returns the receipt it would have produced, and ``read`` sees the pending bytes (what the
organizer, the reorg loop and distillation show as a preview).

The truth layer does not import the index: the service hands the Writer an ``IndexSink``
(re-index, remove, folder notes, audit), so the layers stay truth -> index -> service.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from .._errors import InvalidInput, StorageFull, StorageNotWritable
from .._models import WriteReceipt
from . import lanes as fmt
from .files import atomic_write, ensure_dir, fsync_dir, now_utc, read_bytes, remove_file, sha256_bytes
from .lock import store_lock
from .paths import StorePaths, lock_path, slugify
from .scan import TEMP_PREFIX
from .versions import bump_version, read_version

log = logging.getLogger("coffer_memory.writer")

Action = Literal["created", "replaced", "appended", "deleted"]


class IndexSink(Protocol):
    """What the Writer asks of the derived index (implemented in the service layer)."""

    def index_file(self, store: str, path: Path, data: bytes, st: os.stat_result) -> None:
        """Bring the index in line with one file just written."""

    def remove_path(self, store: str, path: Path) -> None:
        """Drop the rows of a file just deleted."""

    def note_write(self, store: str, folder: Path, before_ns: int, after_ns: int, delta: int) -> None:
        """Our own change to ``folder``: keep the reconcile fast path warm."""

    def reconcile(self, store: str, *, full: bool = False) -> None:
        """Bring the whole store's index in line with its files."""

    def audit(
        self, event: str, store: str | None, document_id: str | None, details: Mapping[str, Any]
    ) -> None:
        """Record one audit event."""

    def audit_many(self, store: str, events: Sequence[tuple[str, str | None, Mapping[str, Any]]]) -> None:
        """Record a bulk transaction's ``(event, document_id, details)`` events in one write."""

    def write_lock(self, store: str) -> AbstractContextManager[None]:
        """The index's own cross-process write lock of ``store`` (a shared backend's; else none)."""
        ...

    def check_lock(self, store: str) -> None:
        """Raise when that lock was lost while held (a shared backend's session ended): asked
        right before each file change is made durable, so it is not made."""


class ContentCheck(Protocol):
    """A check every text passes before it is written: returns the text to write, or raises.

    ``findings`` collects counts by kind (never values) for the receipt.
    """

    def __call__(self, text: str, field: str, findings: dict[str, int]) -> str: ...


def reject_unwritable(text: str, field: str, findings: dict[str, int]) -> str:
    """NUL characters and lone surrogates cannot round-trip through a UTF-8 file: ``InvalidInput``."""
    if "\x00" in text:
        raise InvalidInput(f"{field} contains a NUL character", field=field)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            f"{field} contains a lone surrogate (not valid Unicode text)", field=field
        ) from None
    return text


def _folder_mtime(folder: Path) -> int:
    return os.stat(folder, follow_symlinks=False).st_mtime_ns


# What the system answers a write this process may not make (permissions, a read-only mount).
_NOT_WRITABLE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


def _storage_error(exc: OSError, path: Path) -> OSError | StorageFull:
    if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return StorageFull(str(path), os.strerror(exc.errno or 0))
    return exc


class Transaction:
    """One locked unit of writes to one store; build it with ``Writer.transaction``."""

    def __init__(self, writer: Writer, paths: StorePaths, *, dry_run: bool, bulk: bool = False) -> None:
        self._writer = writer
        self.paths = paths
        self.store = paths.name
        self.dry_run = dry_run
        self.bulk = bulk
        self._unsynced: set[Path] = set()  # bulk: folders whose new entries are not fsync'ed yet
        self._audits: list[tuple[str, str | None, dict[str, Any]]] = []
        self.receipts: list[WriteReceipt] = []
        self.findings: dict[str, int] = {}
        self._pending: dict[Path, bytes | None] = {}
        self._recall: dict[Path, bool] = {}

    @property
    def pending(self) -> Mapping[Path, bytes | None]:
        """A dry run's planned file contents (None: deleted); empty for a real transaction."""
        return dict(self._pending)

    # -- content ------------------------------------------------------------------------------
    def check(self, text: str, field: str = "text") -> str:
        """Run the content checks over one text (raises before anything is written)."""
        return self._writer.check(text, field, self.findings)

    def check_bytes(self, data: bytes, field: str = "text") -> bytes:
        """Run the content checks over a file restored byte for byte (``Writer.check_bytes``)."""
        return self._writer.check_bytes(data, field, self.findings)

    def read(self, path: Path) -> bytes | None:
        """The file's bytes as this transaction sees them (pending bytes in a dry run); None if absent."""
        if path in self._pending:
            return self._pending[path]
        try:
            return read_bytes(path)[0]
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a symlink: never read through it
                return None
            raise

    # -- writes -------------------------------------------------------------------------------
    def create(self, path: Path, data: bytes) -> WriteReceipt:
        """Write a new file; ``FileExistsError`` (nothing written) when ``path`` exists."""
        self._refuse_links(path)
        if self.dry_run:
            if self.read(path) is not None:
                raise FileExistsError(str(path))
            return self._planned(path, "created", None, data)
        ensure_dir(path.parent)
        before_ns = _folder_mtime(path.parent)
        self._durable(
            lambda: atomic_write(
                path, data, overwrite=False, before_commit=self.fence, sync_dir=not self.bulk
            ),
            path,
        )
        self._later(path)
        return self._written(path, data, "created", None, before_ns)

    def write(self, path: Path, data: bytes) -> WriteReceipt:
        """Write ``path`` whole (create or replace, atomically); a symlink there is replaced, not followed."""
        self._refuse_links(path)
        try:
            before = self.read(path)
        except IsADirectoryError:  # no regular file (a FIFO): the write puts one in its place
            before = None
        before_sha = sha256_bytes(before) if before is not None else None
        action: Action = "created" if before is None else "replaced"
        if self.dry_run:
            return self._planned(path, action, before_sha, data)
        ensure_dir(path.parent)
        before_ns = _folder_mtime(path.parent)
        self._durable(
            lambda: atomic_write(path, data, before_commit=self.fence, sync_dir=not self.bulk), path
        )
        self._later(path)
        return self._written(path, data, action, before_sha, before_ns)

    def append(self, path: Path, data: bytes, *, header: bytes = b"") -> WriteReceipt:
        """Append durably (``O_APPEND``, never through a link); a missing file starts with ``header``."""
        self._refuse_links(path, including_file=True)
        try:
            before = self.read(path)
        except IsADirectoryError:  # a FIFO or device: an append to it would block or be lost
            raise StorageNotWritable(str(path), "not a regular file; move it away") from None
        before_sha = sha256_bytes(before) if before is not None else None
        if self.dry_run:
            return self._planned(path, "appended", before_sha, (before or header) + data)
        ensure_dir(path.parent)
        before_ns = _folder_mtime(path.parent)
        self.fence()  # before, not after: another writer's append may follow ours at once
        created = self._durable(lambda: fmt.append_bytes(path, data, header=header), path)
        after, st = read_bytes(path)
        self._receipt(path, "created" if created else "appended", before_sha, sha256_bytes(after))
        if self._index(path, after, st) and created:
            self._note(path, before_ns, 1)  # _index returned True: a recall file, or none to index
        return self.receipts[-1]

    def delete(self, path: Path) -> WriteReceipt:
        """Delete a file (``FileNotFoundError`` when it is not there) and its index rows."""
        self._refuse_links(path)
        before = self.read(path)
        if before is None and not (path not in self._pending and path.is_symlink()):
            raise FileNotFoundError(str(path))
        before_sha = sha256_bytes(before) if before is not None else None  # a link: removed, not followed
        if self.dry_run:
            self._pending[path] = None
            return self._receipt(path, "deleted", before_sha, None)
        before_ns = _folder_mtime(path.parent)
        self.fence()
        remove_file(path)
        receipt = self._receipt(path, "deleted", before_sha, None)
        if self._recall_file(path):
            try:
                self._writer.sink.remove_path(self.store, path)
            except Exception:  # the file is gone, which is the delete: the next read drops its rows
                log.warning("unindexing %s failed; the next read drops its rows", path, exc_info=True)
                self.receipts[-1] = receipt = receipt.pending()
                return receipt
            self._note(path, before_ns, -1)
        return receipt

    # -- lane helpers -------------------------------------------------------------------------
    def log(self, action: str, detail: str, *, at: datetime | None = None) -> WriteReceipt | None:
        """Append one line to the store's consolidation log (skipped, with a warning, if it is a link)."""
        line = fmt.log_line(at or now_utc(), action, detail)
        path = self.paths.consolidation_log
        if path.is_symlink():  # the changelog is secondary: skip it rather than fail the change it logs
            log.warning("not logging to %s: it is a symbolic link (coffer doctor lists it)", path)
            return None
        try:
            return self.append(path, line, header=fmt.LOG_HEADER.encode())
        except StorageFull:
            if not self.receipts:
                raise  # nothing is changed yet: "nothing was written" holds
            # Every caller logs a change it has made (a delete, a write): a full disk reported
            # that change as not made while it was (a handoff deleted, its error saying not).
            log.warning("not logging to %s: the disk is full; the change it records is made", path)
            return None

    def archive(self, path: Path, *, replaced_by: str | None) -> WriteReceipt:
        """Copy a topic document to ``superseded/<slug>-<ts>.md`` before it is overwritten or retired."""
        data = self.read(path)
        if data is None:
            raise FileNotFoundError(str(path))
        at = now_utc()
        target = self.paths.superseded_file(slugify(path.stem), at.strftime("%Y%m%dT%H%M%S%fZ"))
        return self.create(target, fmt.tombstone(data, replaced_by=replaced_by, at=at))

    def audit(self, event: str, document_id: str | None = None, **details: Any) -> None:
        """Record an audit event for this store (nothing in a dry run)."""
        if self.dry_run:
            return
        if self.bulk:
            self._audits.append((event, document_id, details))
            return
        try:
            self._writer.sink.audit(event, self.store, document_id, details)
        except Exception:  # the files are durable already; a damaged index must not undo that
            log.exception("could not audit %s in %s", event, self.store)

    def discard_temp(self, path: Path) -> None:
        """Remove a temp file a killed writer left behind (never part of the truth)."""
        if not self.dry_run and path.name.startswith(TEMP_PREFIX):
            path.unlink(missing_ok=True)

    def reconcile(self, *, full: bool = False) -> None:
        """Bring the store's whole index in line with its files (after bulk changes)."""
        if not self.dry_run:
            self._writer.sink.reconcile(self.store, full=full)

    def flush(self) -> None:
        """Make a bulk transaction's writes durable: fsync each folder it wrote new entries in
        once (each file was fsync'ed before its rename), then record its audit events in one
        write. Run when the transaction ends, under its lock, before it reports success."""
        folders, self._unsynced = sorted(self._unsynced), set()
        for folder in folders:
            self._durable(functools.partial(fsync_dir, folder), folder)
        events, self._audits = self._audits, []
        if events:
            try:
                self._writer.sink.audit_many(self.store, events)
            except Exception:  # the files are durable already; a damaged index must not undo that
                log.exception("could not audit %d events in %s", len(events), self.store)

    # -- plumbing -----------------------------------------------------------------------------
    def _later(self, path: Path) -> None:
        if self.bulk:
            self._unsynced.add(path.parent)

    def fence(self) -> None:
        """Raise when the store's cross-process lock was lost meanwhile: asked right before each
        change is made durable here, and by a caller that changes files by other means."""
        self._writer.sink.check_lock(self.store)

    def _durable(self, op: Callable[[], Any], path: Path) -> Any:
        try:
            return op()
        except OSError as exc:
            raised = _storage_error(exc, path)
            if raised is exc:
                raise
            raise raised from exc

    def _planned(self, path: Path, action: Action, before: str | None, data: bytes) -> WriteReceipt:
        self._pending[path] = data
        return self._receipt(path, action, before, sha256_bytes(data))

    def _written(
        self, path: Path, data: bytes, action: Action, before: str | None, before_ns: int
    ) -> WriteReceipt:
        self._receipt(path, action, before, sha256_bytes(data))
        if self._index(path, data, os.stat(path, follow_symlinks=False)):
            self._note(path, before_ns, 1 if action == "created" else 0)
        return self.receipts[-1]

    def _index(self, path: Path, data: bytes, st: os.stat_result) -> bool:
        """Index a recall file just written; False (and the receipt marked pending) when that failed."""
        if not self._recall_file(path):
            return True
        try:
            self._writer.sink.index_file(self.store, path, data, st)
        except Exception:  # durable is a success: the next read indexes the file
            log.warning("indexing %s failed; the next read indexes it", path, exc_info=True)
            self.receipts[-1] = self.receipts[-1].pending()
            return False  # and no folder note: the next read must list the folder again
        return True

    def _refuse_links(self, path: Path, *, including_file: bool = False) -> None:
        """``InvalidInput`` when a folder between the store root and ``path`` (or the file) is a
        link, or the store's folder is a link to another store's folder."""
        top = str(self.paths.root)
        root = top + os.sep
        current = str(path if including_file else path.parent)
        while current.startswith(root):  # strings, not Paths: this runs on every write
            if os.path.islink(current):
                where = self.paths.relative(Path(current))
                raise InvalidInput(
                    f"{where} is a symbolic link; coffer never writes through one", field="path"
                )
            current = os.path.dirname(current)
        self.paths.refuse_linked(
            field="path"
        )  # a folder synced elsewhere is fine; another store's took its writes

    def _recall_file(self, path: Path) -> bool:
        """Whether ``path`` is indexed (asked twice per write, answered once)."""
        if path not in self._recall:
            self._recall[path] = self.paths.is_recall_file(path)
        return self._recall[path]

    def _note(self, path: Path, before_ns: int, delta: int) -> None:
        if not self._recall_file(path):
            return
        try:
            self._writer.sink.note_write(
                self.store, path.parent, before_ns, _folder_mtime(path.parent), delta
            )
        except Exception:
            log.warning("could not note the write to %s", path.parent, exc_info=True)

    def _receipt(self, path: Path, action: Action, before: str | None, after: str | None) -> WriteReceipt:
        receipt = WriteReceipt(
            store=self.store,
            path=path,
            action=action,
            before_sha256=before,
            after_sha256=after,
            dry_run=self.dry_run,
            findings=tuple(sorted(self.findings.items())),
        )
        self.receipts.append(receipt)
        return receipt


class Writer:
    """Builds write transactions for the stores of one home.

    ``lock`` is the owning service's lock over its index connection; ``sink`` is that index;
    ``checks`` run over every text before it is written.
    """

    def __init__(
        self,
        home: Path,
        memory_dir: Path,
        lock: threading.RLock,
        sink: IndexSink,
        checks: Sequence[ContentCheck] = (),
        *,
        read_only: bool = False,
    ) -> None:
        self.home = home
        # A home this process may only read: each write is refused before it takes a lock, whose
        # file it made in a folder below the home left writable (``locks/<store>.lock``).
        self.read_only = read_only
        self.memory_dir = memory_dir
        self.lock = lock
        self.sink = sink
        self.checks: tuple[ContentCheck, ...] = (reject_unwritable, *checks)
        self._text_checks = tuple(checks)

    def check(self, text: str, field: str, findings: dict[str, int]) -> str:
        """Run the content checks over one text, counting what they found into ``findings``:
        outside a transaction too (they need no lock), for a write that prepares its text before
        it takes the lock; ``Transaction.findings.update`` then puts the counts on its receipt."""
        for check in self.checks:
            text = check(text, field, findings)
        return text

    def check_bytes(self, data: bytes, field: str, findings: dict[str, int]) -> bytes:
        """The checks over a whole file restored byte for byte (a coffer export): a NUL byte is
        ``InvalidInput``; bytes that are not UTF-8 are kept as they are (the other checks see them
        escaped, and a redaction leaves them in place), so such a file round-trips."""
        nul = data.find(b"\x00")
        if nul >= 0:
            raise InvalidInput(f"{field} holds a NUL byte at offset {nul} (binary, not text)", field=field)
        text = data.decode("utf-8", "surrogateescape")
        for check in self._text_checks:
            text = check(text, field, findings)
        return text.encode("utf-8", "surrogateescape")

    def paths(self, store: str) -> StorePaths:
        """The on-disk paths of a store (validates the name)."""
        return StorePaths.of(self.memory_dir, store)

    @contextmanager
    def locked(self, store: str) -> Iterator[None]:
        """Hold the index lock and the store's inter-process write lock (no transaction)."""
        if self.read_only:
            raise StorageNotWritable(str(self.home), "the home is not writable by this process")
        with self.lock, store_lock(lock_path(self.home, store)), self.sink.write_lock(store):
            yield

    @contextmanager
    def settled(self, store: str) -> Iterator[None]:
        """Hold ``store`` still while its files are read as of one moment (an export): the write
        lock, or in a home this process may only read, the store's lock file where it is (a
        writer of the home's owner is waited for; nothing is made, nothing refused)."""
        if not self.read_only:
            with self.locked(store):
                yield
            return
        with store_lock(lock_path(self.home, store)):
            yield

    @contextmanager
    def transaction(self, store: str, *, dry_run: bool = False, bulk: bool = False) -> Iterator[Transaction]:
        """A transaction on ``store``; a dry run takes no lock and writes nothing.

        ``bulk`` (many files at once, an import): each file is still fsync'ed before its rename,
        but its folder is fsync'ed, and the audit events recorded, once when the transaction ends
        (``Transaction.flush``), not once per file: a third of the fsyncs. A crash before that
        may lose some of the new files, never leave half of one; nothing reported success yet.
        """
        tx = Transaction(self, self.paths(store), dry_run=dry_run, bulk=bulk)
        if dry_run:
            yield tx
            return
        try:
            with self.locked(store):
                try:
                    yield tx
                finally:
                    try:
                        tx.flush()
                    finally:
                        if tx.receipts:
                            self.bump(tx.store)
        except OSError as exc:
            if exc.errno not in _NOT_WRITABLE and exc.errno != errno.ENOTDIR:
                raise
            # A store folder (or home) this process may not write: typed, with the path it met.
            where = Path(os.fsdecode(exc.filename)) if exc.filename else tx.paths.root
            if where.name.startswith(".tmp-"):  # the temp file a write starts with: name its folder
                where = where.parent
            if exc.errno == errno.ENOTDIR:  # a file where a folder of the store should be: name it
                where = next((p for p in (where, *where.parents) if os.path.lexists(p)), where)
                raise StorageNotWritable(
                    str(where), "not a folder, where one of the store should be"
                ) from None
            raise StorageNotWritable(str(where), os.strerror(exc.errno or 0)) from None

    def version(self, store: str) -> int:
        """The store's version: how many changes it saw (0 before the first; ``store.versions``)."""
        return read_version(self.home, self.paths(store).name)

    def bump(self, store: str) -> int:
        """Advance the store's version (under its lock); every cursor made before becomes stale."""
        name = self.paths(store).name
        with self.lock:
            return bump_version(self.home, name)

    def dry_run(self, store: str) -> Transaction:
        """A dry-run transaction that may live across several steps (the reorg loop's preview)."""
        return Transaction(self, self.paths(store), dry_run=True)
