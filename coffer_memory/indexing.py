"""``IndexHandle``: one home's derived index (connection, re-indexer, reconciler, retrieval, audit).

Every component of the service shares one handle and its lock; the lock serialises use of the
index connection (apsw connections are not shared across threads mid-statement). The handle is
also the ``IndexSink`` the Writer re-indexes and audits through.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .config import Settings
from .index.db import IndexDB
from .index.reconcile import Reconciler
from .index.reindex import Reindexer
from .index.vec import VecIndex
from .plugins.hookspecs import LLM
from .plugins.manager import get_embedder, get_grep_backend, get_llm
from .retrieval import KnowledgeRetrieval
from .store.files import now_utc

log = logging.getLogger("coffer_memory")


class IndexHandle:
    """The index of one home, opened (and migrated) on first use. Thread-safe."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.lock = threading.RLock()
        self._db: IndexDB | None = None
        self._reindexer: Reindexer | None = None
        self._reconciler: Reconciler | None = None
        self._retrieval: KnowledgeRetrieval | None = None
        self._side: KnowledgeRetrieval | None = None

    # -- opening ------------------------------------------------------------------------------
    @property
    def db(self) -> IndexDB:
        """The index connection, opened (and migrated) on first use."""
        with self.lock:
            if self._db is None:
                db = IndexDB(self.settings.index_path, busy_timeout_ms=self.settings.busy_timeout_ms)
                vectors = self._vector_index(db)
                self._reindexer = Reindexer(
                    db,
                    self.settings.memory_dir,
                    vectors,
                    batch_size=self.settings.embedding.batch_size,
                    max_file_bytes=self.settings.memory.max_file_bytes,
                )
                self._reconciler = Reconciler(db, self._reindexer, self.settings, self.lock)
                self._retrieval = KnowledgeRetrieval(
                    db, self.settings, get_grep_backend(self.settings.grep_backend), vectors
                )
                self._retrieval.side = self._side_retrieval
                self._db = db
            return self._db

    def _side_retrieval(self) -> KnowledgeRetrieval | None:
        """A retrieval on a second, read-only-in-practice connection, so that recall searches a
        project store and the global store at the same time (None on a single CPU)."""
        if (os.cpu_count() or 1) < 2:
            return None
        if self._side is None:
            main = self.retrieval
            db = IndexDB(self.settings.index_path, busy_timeout_ms=self.settings.busy_timeout_ms)
            vectors = (
                VecIndex(db, main.vectors.embedder, cache_tables=False) if main.vectors is not None else None
            )
            self._side = KnowledgeRetrieval(db, self.settings, main.grep, vectors)
        return self._side

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
        """The recall facade over this home's index."""
        _ = self.db
        assert self._retrieval is not None
        return self._retrieval

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
            if self._db is not None:
                if self._retrieval is not None:
                    self._retrieval.close()
                if self._side is not None:
                    self._side.db.close()
                    self._side = None
                self._db.close()
                self._db = None

    # -- the Writer's sink --------------------------------------------------------------------
    def index_file(self, store: str, path: Path, data: bytes, st: os.stat_result) -> None:
        """Index one file just written."""
        self.reindexer.index_file(store, path, data=data, st=st)

    def remove_path(self, store: str, path: Path) -> None:
        """Drop the rows of a file just deleted."""
        self.reindexer.remove_path(store, path)

    def note_write(self, store: str, folder: Path, before_ns: int, after_ns: int, delta: int) -> None:
        """Keep the reconcile fast path warm after our own change to ``folder``."""
        self.reconciler.note_write(store, folder, before_ns, after_ns, delta)

    def reconcile(self, store: str, *, full: bool = False) -> None:
        """Bring a store's index in line with its files."""
        self.reconciler.reconcile(store, full=full)

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
        with self.lock:
            where, params = ("WHERE store = ?", (store,)) if store else ("", ())
            rows = self.db.rows(
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
