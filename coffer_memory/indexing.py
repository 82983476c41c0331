"""``IndexHandle``: one home's derived index (connection, re-indexer, reconciler, retrieval, audit).

Every component of the service shares one handle and its lock; the lock serialises use of the
writer connection (apsw connections are not shared across threads mid-statement). Reads run on
reader connections, one per thread (``retrieval``, ``reader_db``): in WAL mode they read the last
committed state beside each other and beside the writer, without the lock. The handle is also the
``IndexSink`` the Writer re-indexes and audits through.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import attrs

from .config import Settings
from .index.db import IndexDB
from .index.mirror import MirroredReindexer, SharedIndex
from .index.reconcile import Reconciler
from .index.reindex import Reindexer
from .index.vec import VecIndex
from .plugins.hookspecs import LLM, GrepBackend, IndexBackend
from .plugins.manager import get_embedder, get_grep_backend, get_index_backend, get_llm
from .retrieval import KnowledgeRetrieval
from .shared_recall import SharedRetrieval
from .store.files import now_utc

log = logging.getLogger("coffer_memory")
# How often a read waiting for the lock looks whether a background full scan is what holds it.
SCAN_POLL_SECONDS = 0.02


@attrs.define
class _Reader:
    """One thread's reader retrieval and, once recall fanned out, its second reader."""

    main: KnowledgeRetrieval
    side: KnowledgeRetrieval | None = None

    def close(self) -> None:
        self.main.close()
        for retrieval in (self.main, self.side):
            if retrieval is not None and not retrieval.db.closed:
                retrieval.db.close()


class IndexHandle:
    """The index of one home, opened (and migrated) on first use. Thread-safe."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.lock = threading.RLock()
        self._db: IndexDB | None = None
        self._reindexer: Reindexer | None = None
        self._reconciler: Reconciler | None = None
        self._vectors: VecIndex | None = None
        self._grep: GrepBackend | None = None
        # A shared backend ([index] backend = "postgresql"): None for the local index alone.
        self._shared: SharedIndex | None = None
        # Reader retrievals by thread ident (a dict, not a threading.local, so close() reaches them).
        self._readers: dict[int, _Reader] = {}
        self._readers_guard = threading.Lock()

    # -- opening ------------------------------------------------------------------------------
    @property
    def db(self) -> IndexDB:
        """The index connection, opened (and migrated) on first use."""
        db = self._db
        if db is not None:  # open already: readers must not queue on the lock to learn that
            return db
        with self.lock:
            if self._db is None:
                backend = get_index_backend(self.settings)
                db = IndexDB(self.settings.index_path, busy_timeout_ms=self.settings.busy_timeout_ms)
                vectors = self._vector_index(db)
                self._reindexer = (Reindexer if backend is None else MirroredReindexer)(
                    db,
                    self.settings.memory_dir,
                    vectors,
                    batch_size=self.settings.embedding.batch_size,
                    max_file_bytes=self.settings.memory.max_file_bytes,
                )
                self._reconciler = Reconciler(db, self._reindexer, self.settings, self.lock)
                if backend is not None:
                    assert isinstance(self._reindexer, MirroredReindexer)
                    self._shared = SharedIndex(backend, self._reindexer)
                self._vectors = vectors
                self._grep = get_grep_backend(self.settings.grep_backend)
                self._db = db
            return self._db

    def _reader(self) -> KnowledgeRetrieval:
        """A retrieval on a new reader connection (it never writes, so it needs no lock)."""
        _ = self.db  # the writer opens (and migrates) the file first
        assert self._grep is not None
        db = IndexDB(self.settings.index_path, busy_timeout_ms=self.settings.busy_timeout_ms)
        vectors = self._vectors
        # Vector tables are created by the writer; a reader looks them up on every search.
        own = VecIndex(db, vectors.embedder, cache_tables=False) if vectors is not None else None
        if self._shared is not None:
            return SharedRetrieval(db, self.settings, self._grep, own, self._shared.backend)
        return KnowledgeRetrieval(db, self.settings, self._grep, own)

    def _with_side(self, reader: KnowledgeRetrieval) -> _Reader:
        """Give ``reader`` a second reader, so that recall searches a project store and the global
        store at the same time (not on a single CPU)."""
        held = _Reader(reader)
        if (os.cpu_count() or 1) >= 2:

            def second() -> KnowledgeRetrieval:
                if held.side is None:
                    held.side = self._reader()
                return held.side

            reader.side = second
        return held

    def _vector_index(self, db: IndexDB) -> VecIndex | None:
        """Vector support when a vector mode is enabled and an embedder and sqlite-vec are here."""
        if not {"vector", "hybrid"} & set(self.settings.memory.retrieval_modes):
            return None
        embedder = get_embedder(self.settings.embedding)
        if embedder is None or not embedder.available():
            log.warning("vector recall is enabled but no embedder is available: answering from keyword")
            return None
        if not db.vec_loaded:
            log.warning(
                "vector recall is enabled but sqlite-vec is not installed: pip install 'coffer-memory[vector]'"
            )
            return None
        return VecIndex(db, embedder)

    @property
    def retrieval(self) -> KnowledgeRetrieval:
        """The recall facade of the calling thread, on that thread's reader connection."""
        me = threading.get_ident()
        with self._readers_guard:
            held = self._readers.get(me)
            if held is not None and not held.main.db.closed:
                return held.main
            # A dead thread's reader is idle for good: close it (a new thread may reuse the ident).
            alive = {t.ident for t in threading.enumerate()}
            for ident in [i for i in self._readers if i not in alive]:
                self._readers.pop(ident).close()
        held = self._with_side(self._reader())
        with self._readers_guard:
            self._readers[me] = held
        return held.main

    @property
    def reader_db(self) -> IndexDB:
        """The calling thread's reader connection: the last committed state, without the lock."""
        return self.retrieval.db

    @property
    def reindexer(self) -> Reindexer:
        """The single re-index routine of this home."""
        _ = self.db
        assert self._reindexer is not None
        return self._reindexer

    @property
    def reconciler(self) -> Reconciler:
        """The reconcile-on-read driver of this home."""
        _ = self.db
        assert self._reconciler is not None
        return self._reconciler

    @property
    def is_open(self) -> bool:
        """True while the index connection is open."""
        return self._db is not None

    def close(self) -> None:
        """Close the index connections (the next use opens them again)."""
        with self.lock:
            with self._readers_guard:
                readers, self._readers = list(self._readers.values()), {}
            for reader in readers:
                reader.close()
            if self._db is not None:
                self._db.close()
                self._db = None
            if self._shared is not None:
                self._shared.backend.close()
                self._shared = None

    def refresh(self, store: str) -> None:
        """Reconcile-on-read of ``store``, under the lock, before a read on a reader connection.

        Readers never wait for a background full scan: while one holds the lock they skip this
        and read the last committed state (the scan itself brings the index up to date).
        """
        while not self.lock.acquire(timeout=SCAN_POLL_SECONDS):
            if self.reconciler.scanning():
                return
        try:
            self.reconciler.reconcile(store)
            if self._shared is not None:
                self._shared.refresh(store)
        finally:
            self.lock.release()

    @property
    def backend(self) -> IndexBackend | None:
        """The shared index backend (``[index] backend``), or None for the local index alone."""
        _ = self.db
        return self._shared.backend if self._shared is not None else None

    # -- the Writer's sink --------------------------------------------------------------------
    def write_lock(self, store: str) -> AbstractContextManager[None]:
        """The shared backend's cross-process write lock of ``store`` (nothing without one)."""
        if self.settings.index.backend == "sqlite":  # the local index alone: the file lock is all
            return nullcontext()
        backend = self.backend
        return backend.write_lock(store) if backend is not None else nullcontext()

    def index_file(self, store: str, path: Path, data: bytes, st: os.stat_result) -> None:
        """Index one file just written."""
        self.reindexer.index_file(store, path, data=data, st=st)
        if self._shared is not None:
            self._shared.flush(store)

    def remove_path(self, store: str, path: Path) -> None:
        """Drop the rows of a file just deleted."""
        self.reindexer.remove_path(store, path)
        if self._shared is not None:
            self._shared.flush(store)

    def note_write(self, store: str, folder: Path, before_ns: int, after_ns: int, delta: int) -> None:
        """Keep the reconcile fast path warm after our own change to ``folder``."""
        self.reconciler.note_write(store, folder, before_ns, after_ns, delta)

    def reconcile(self, store: str, *, full: bool = False) -> None:
        """Bring a store's index in line with its files."""
        self.reconciler.reconcile(store, full=full)
        if self._shared is not None:
            self._shared.refresh(store)

    def audit(
        self, event: str, store: str | None, document_id: str | None, details: Mapping[str, Any]
    ) -> None:
        """Append one audit row."""
        self.db.conn.execute(
            "INSERT INTO audit_events (at, event, store, document_id, details) VALUES (?, ?, ?, ?, ?)",
            (now_utc().isoformat(), event, store, document_id, json.dumps(dict(details), default=str)),
        )

    def audit_events(self, store: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """The newest audit rows (optionally of one store), newest first."""
        where, params = ("WHERE store = ?", (store,)) if store else ("", ())
        rows = self.reader_db.rows(
            f"SELECT at, event, store, document_id, details FROM audit_events {where} ORDER BY id DESC LIMIT ?",
            (*params, limit),
        )
        return [
            {"at": r[0], "event": r[1], "store": r[2], "document_id": r[3], "details": json.loads(r[4])}
            for r in rows
        ]

    def record_project_root(self, store: str, root: Path) -> None:
        """Remember which checkout a project store came from (shown as its display name)."""
        try:
            self.db.conn.execute(
                "INSERT OR IGNORE INTO memory_store_project_roots (store_name, project_root) VALUES (?, ?)",
                (store, str(root)),
            )
        except Exception:  # display metadata only; never fails a write whose file is durable
            log.warning("could not record the project root of %s", store, exc_info=True)


class Models:
    """Typed, lazy getters for the plugins a component may need (the internal LLM)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._llm: LLM | None = None
        self._loaded = False
        self._guard = threading.Lock()

    def llm(self) -> LLM | None:
        """The configured internal model, or None (``[llm] provider = "none"``, the default)."""
        with self._guard:
            if not self._loaded:
                self._llm = get_llm(self.settings.llm)
                self._loaded = True
            return self._llm
