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
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw
import attrs

from ._ahead import Planned, embed_later, embedding_ahead
from ._config import Settings
from ._errors import CofferError, EmbeddingUnavailable, ServiceClosed, StorageNotWritable
from ._home import INDEX_REPAIR_LOCK
from ._index.db import IndexDB
from ._index.reconcile import Reconciler
from ._index.reindex import Reindexer
from ._index.vec import VecIndex
from ._retrieval import KnowledgeRetrieval
from ._store.audit import AuditEvent, AuditLog
from ._store.lock import store_lock
from ._store.looks import Looks
from .plugins.manager import DeferredGrepBackend, failure, get_embedder, get_index_backend, get_llm, plugin_of

if TYPE_CHECKING:  # the plugin surface imports pluggy, which a keyword recall does without
    from ._index.mirror import SharedIndex
    from .plugins.hookspecs import LLM, Embedder, IndexBackend

log = logging.getLogger("coffer_memory")
# How often a read waiting for the lock looks whether a background full scan is what holds it.
SCAN_POLL_SECONDS = 0.02
# Set on the log record of the vector problem warning, which a report that says it leaves out.
VECTOR_PROBLEM = "coffer_vector_problem"
# The extra that brings each built-in embedder's packages (pyproject.toml).
_EXTRAS = {"multilingual-e5": "vector", "minilm": "minilm"}


class _Owner:
    """A thread's token, kept in a ``threading.local``: freed when its thread ends, whether
    ``threading`` knows the thread or not (one started by ``_thread`` or by C code calling in)."""

    __slots__ = ("__weakref__",)


@attrs.define
class _Reader:
    """One thread's reader retrieval and, once recall fanned out, its second reader."""

    main: KnowledgeRetrieval
    owner: weakref.ref[_Owner]  # dead once the thread that uses it ended
    side: KnowledgeRetrieval | None = None

    def close(self) -> bool:
        """Close its connections; False when one is busy in another thread's statement or read
        transaction (it stays open: ``IndexDB.close_idle``; reader connections have no SQLite
        mutex, so closing one under a running statement would free what that statement uses)."""
        self.main.close()
        closed = True
        for retrieval in (self.main, self.side):
            if retrieval is not None and not retrieval.db.closed:
                closed = retrieval.db.close_idle() and closed
        return closed


class IndexHandle:
    """The index of one home, opened (and migrated) on first use. Thread-safe."""

    def __init__(self, settings: Settings, *, index_path: Path | None = None) -> None:
        self.settings = settings
        # Where index.db is: the home's, or a private one (a home this process may not write).
        self.index_path = index_path if index_path is not None else settings.index_path
        # A private index takes its repair lock beside it: nothing is made in a home it may not write.
        self._repair_lock = index_path.with_name(INDEX_REPAIR_LOCK) if index_path is not None else None
        self.lock = threading.RLock()
        self._db: IndexDB | None = None
        self._reindexer: Reindexer | None = None
        self._reconciler: Reconciler | None = None
        self._vectors: VecIndex | None = None
        self._grep: DeferredGrepBackend | None = None
        # A shared backend ([index] backend = "postgresql"): None for the local index alone.
        self._shared: SharedIndex | None = None
        # Reader retrievals by thread ident (a dict, not a threading.local, so close() reaches them).
        self._readers: dict[int, _Reader] = {}
        self._readers_guard = threading.Lock()
        self._owners = threading.local()  # each thread's _Owner
        self._final = False  # closed for good (its service was closed): never opened again
        self.audit_log = AuditLog(settings.home)

    # -- opening ------------------------------------------------------------------------------
    @property
    def db(self) -> IndexDB:
        """The index connection, opened (and migrated) on first use."""
        db = self._db
        if db is not None:  # open already: readers must not queue on the lock to learn that
            return db
        with self.lock:
            if self._db is None:
                if self._final:
                    raise ServiceClosed()
                backend = get_index_backend(self.settings)
                reindexer: type[Reindexer] = Reindexer
                if backend is not None:  # its code imports the plugin surface (pluggy): only when set
                    from ._index.mirror import MirroredReindexer

                    reindexer = MirroredReindexer
                db = IndexDB(
                    self.index_path,
                    busy_timeout_ms=self.settings.busy_timeout_ms,
                    home=self.settings.home,
                    repair_lock=self._repair_lock,
                )
                vectors = self._vector_index(db)
                self._reindexer = reindexer(
                    db,
                    self.settings.memory_dir,
                    vectors,
                    batch_size=self.settings.embedding.batch_size,
                    max_file_bytes=self.settings.memory.max_file_bytes,
                )
                self._reconciler = Reconciler(db, self._reindexer, self.settings, self.lock, self.audit_log)
                self._reconciler.after = self._embed_after_read
                if backend is not None:
                    from ._index.mirror import MirroredReindexer, SharedIndex

                    assert isinstance(self._reindexer, MirroredReindexer)
                    self._shared = SharedIndex(backend, self._reindexer)
                self._vectors = vectors
                self._grep = DeferredGrepBackend(self.settings.grep_backend)
                self._db = db
                try:
                    self._import_legacy_audit(db)
                except Exception:  # the rows stay in index.db; the next open tries again
                    log.warning("could not move index.db's audit rows to the audit log", exc_info=True)
            return self._db

    def _reader(self) -> KnowledgeRetrieval:
        """A retrieval on a new reader connection (it never writes, so it needs no lock)."""
        _ = self.db  # the writer opens (and migrates) the file first
        assert self._grep is not None
        db = IndexDB(
            self.index_path,
            busy_timeout_ms=self.settings.busy_timeout_ms,
            home=self.settings.home,
            reader=True,
            repair_lock=self._repair_lock,
        )
        vectors = self._vectors
        # Vector tables are created by the writer; a reader looks them up on every search.
        own = VecIndex(db, vectors.embedder, cache_tables=False) if vectors is not None else None
        if self._shared is not None:
            from ._shared_recall import SharedRetrieval

            return SharedRetrieval(db, self.settings, self._grep, own, self._shared.backend)
        return KnowledgeRetrieval(db, self.settings, self._grep, own)

    def _owner(self) -> _Owner:
        """The calling thread's token (made on its first use)."""
        owner: _Owner | None = getattr(self._owners, "token", None)
        if owner is None:
            owner = self._owners.token = _Owner()
        return owner

    def _with_side(self, reader: KnowledgeRetrieval, owner: _Owner) -> _Reader:
        """Give ``reader`` a second reader, so that recall searches a project store and the global
        store at the same time (not on a single CPU)."""
        held = _Reader(reader, weakref.ref(owner))
        if (os.cpu_count() or 1) >= 2:

            def second() -> KnowledgeRetrieval:
                if held.side is None or held.side.db.closed:  # closed by a close() its recall outlived
                    held.side = self._reader()
                return held.side

            reader.side = second
        return held

    def vector_problem(self) -> str | None:
        """Why vector and hybrid recall answer from keyword here (the embedder or sqlite-vec is
        missing, and what to install), or None when they run or are not enabled."""
        return self._vector_setup(self.db)[1]

    def _vector_setup(self, db: IndexDB) -> tuple[Embedder | None, str | None]:
        if not {"vector", "hybrid"} & set(self.settings.memory.retrieval_modes):
            return None, None
        provider = self.settings.embedding.provider
        try:
            embedder = get_embedder(self.settings.embedding)
            usable = embedder is not None and embedder.available()
        except EmbeddingUnavailable as exc:  # a plugin's factory raised: keyword recall stays up
            return None, f"vector recall is enabled but {exc}; recall answers from keyword"
        except CofferError:  # an unknown provider: the configuration's mistake, said as such
            raise
        except Exception as exc:  # its available() raised
            return None, (
                f"vector recall is enabled but the embedding provider {provider!r} (plugin "
                f"{plugin_of('register_embedders', provider)}) failed: {failure(exc)}; "
                "recall answers from keyword"
            )
        if embedder is None or not usable:
            if provider == "auto":
                missing = "no offline embedder is installed: pip install 'coffer-memory[vector]'"
            else:
                extra = _EXTRAS.get(provider)
                fix = f"pip install 'coffer-memory[{extra}]'" if extra else "install what its plugin needs"
                missing = f"the embedding provider {provider!r} is not available: {fix}"
            return None, f"vector recall is enabled but {missing}; recall answers from keyword"
        if not db.vec_loaded:
            return None, (
                "vector recall is enabled but sqlite-vec is not installed: pip install 'coffer-memory[vector]'; "
                "recall answers from keyword"
            )
        return embedder, None

    def _vector_index(self, db: IndexDB) -> VecIndex | None:
        """Vector support when a vector mode is enabled and an embedder and sqlite-vec are here."""
        embedder, problem = self._vector_setup(db)
        if problem is not None:  # ``coffer doctor`` says it in its report: it leaves this line out
            log.warning("%s", problem, extra={VECTOR_PROBLEM: True})
        return VecIndex(db, embedder) if embedder is not None else None

    @property
    def retrieval(self) -> KnowledgeRetrieval:
        """The recall facade of the calling thread, on that thread's reader connection."""
        me = threading.get_ident()
        owner = self._owner()
        with self._readers_guard:
            held = self._readers.get(me)
            if held is not None and not held.main.db.closed:
                if held.owner() is not owner:  # an ident is reused only after its thread ended
                    held.owner = weakref.ref(owner)
                return held.main
            # A dead thread's reader is idle for good: this thread takes one over (its connection,
            # kept rows, query vectors and worker: an MCP server's tool calls run on worker threads
            # that anyio retires after 10 s idle, and a new reader cost a recall 3-8 ms), the
            # others close. Dead by its token, not by ``threading.enumerate()``, which leaves out
            # live threads it did not start.
            dead = [self._readers.pop(i) for i, r in list(self._readers.items()) if r.owner() is None]
            taken = next((r for r in dead if not r.main.db.closed), None)
            for reader in dead:
                if reader is not taken:
                    reader.close()
            if taken is not None:
                taken.owner = weakref.ref(owner)
                self._readers[me] = taken
                return taken.main
        held = self._with_side(self._reader(), owner)
        with self._readers_guard:
            self._readers[me] = held
        return held.main

    def read_another_file(self, reader: IndexDB, refreshed: Iterable[int | None]) -> bool:
        """True when ``reader`` (a thread's reader connection, after its read) read another
        ``index.db`` than one of ``refreshed`` (what ``refresh`` returned for each store read):
        another process's repair replaced the file between the two, and the reader read the new
        file before any reconcile filled it. Numbers compared: no system call."""
        return any(f is not None and f != reader.file_id for f in refreshed)

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

    def close(self, *, final: bool = False, timeout: float | None = None) -> None:
        """Close the index connections (the next use opens them again, unless ``final``: then it
        fails with ``ServiceClosed``). A call holding the lock longer than ``timeout`` seconds (a
        callback that does not return) does not hold close() up: the connections close under it,
        its transaction rolls back and its next statement fails."""
        self._final = self._final or final
        held = self.lock.acquire(timeout=-1 if timeout is None else timeout)
        if not held:
            log.warning("close: a call holds the index lock after %ss; closing under it", timeout)
        try:
            self._close()
        finally:
            if held:
                self.lock.release()

    def _close(self) -> None:
        with self._readers_guard:
            readers, self._readers = self._readers, {}
        # A reader inside a recall on another thread stays with that thread (its recall ends
        # normally) until the next close; the rest of the index closes now.
        busy = {ident: reader for ident, reader in readers.items() if not reader.close()}
        if busy:
            log.info("close: %d reader(s) busy in a recall on another thread stay open", len(busy))
            with self._readers_guard:
                for ident, reader in busy.items():
                    self._readers.setdefault(ident, reader)
        if self._reconciler is not None:
            self._reconciler.close()  # its inotify fd
        if self._grep is not None:
            self._grep.close()  # the pure-Python backend's inotify fd
        if self._db is not None:
            try:
                self._db.close()
            except apsw.ThreadingViolationError:  # a call outlived close()'s wait, in a statement
                log.warning("close: the index connection is busy in another thread; it stays open")
            self._db = None
        if self._shared is not None:
            self._shared.backend.close()
            self._shared = None

    def refresh(self, store: str, looks: Looks | None = None) -> int | None:
        """Reconcile-on-read of ``store``, under the lock, before a read on a reader connection.

        Readers wait for a background full scan only for a store found changed: while one holds
        the lock they check ``store`` on their own connection (``Reconciler.fresh_beside_scan``)
        and read the last committed state when nothing changed (the scanned store itself: unless
        the inotify feed has news of it, as the scan brings it up to date).
        ``looks``: the read's ``Looks`` (``_store/looks.py``), with what it saw before this; not
        used after a wait for the lock (what it saw may have changed meanwhile).
        Returns the ``file_id`` of the index file it found up to date (``read_another_file``).
        """
        # Asked before any wait: a reader that first waited a poll interval lost 20 ms to every
        # scan, and at 10k facts a scan holds the lock ~5% of the time (about the p95 of a server).
        acquired = self.lock.acquire(blocking=False)
        if not acquired and looks is not None:
            looks.index_checked = False  # checked before the wait: the reader checks again
            looks = None
        checked = False  # a store found changed stays so until a reconcile under the lock
        while not acquired:
            if not checked and self.reconciler.scanning():
                if self.reconciler.fresh_beside_scan(store, self.reader_db):
                    return self.reader_db.file_id
                checked = True
            acquired = self.lock.acquire(timeout=SCAN_POLL_SECONDS)
        refreshed = None
        try:
            self.reconciler.reconcile(store, looks=looks)
            # Before the embedding below, which may meet (and reopen on) a file another process's
            # repair put in place since: this file is the one the reconcile brought up to date.
            refreshed = self.reconciler.brought
            if self._shared is not None:
                self._shared.refresh(store)
        except (apsw.FullError, apsw.IOError, apsw.BusyError, StorageNotWritable) as exc:
            # The derived index cannot take writes (a full disk, a file size limit, a store lock
            # that cannot be made, another process's write held past the busy timeout): the read
            # answers from it as it stands, the next read tries again; the files are the truth.
            log.warning(
                "could not bring the index of %s up to date (%s); answering from it as it is", store, exc
            )
        finally:
            self.lock.release()
        self._embed_after_read(store)
        return refreshed

    def _embed_after_read(self, store: str) -> None:
        """What a reconcile left to embed, embedded after the lock (``embed_later``); a failure
        is the next read's to retry: this read answers from the rows as they stand."""
        try:
            self.embed_later(store)
        except Exception:
            log.warning("could not embed what the index of %s waits for", store, exc_info=True)

    def embed_later(self, store: str, progress: Callable[[int, int], None] | None = None) -> int:
        """Embed the documents of ``store`` that reconciles left waiting, the embedder running
        without the lock (``_ahead.embed_later``); how many got their vectors."""
        return embed_later(self, store, progress)

    def embedded(self, store: str, keys: list[str]) -> None:
        """Documents of ``store`` that got their vectors (lock held): the shared backend gets them."""
        if self._shared is not None and keys:
            for key in keys:
                self._shared.reindexer._note(store, key)
            self._shared.flush(store)

    @property
    def backend(self) -> IndexBackend | None:
        """The shared index backend (``[index] backend``), or None for the local index alone."""
        _ = self.db
        return self._shared.backend if self._shared is not None else None

    @property
    def embeds(self) -> bool:
        """Whether writes here embed what they index (a vector mode, an embedder, sqlite-vec), as
        far as the index, if open, says: this does not open it."""
        return self._db is not None and self._vectors is not None

    @property
    def vectors(self) -> VecIndex | None:
        """The writer's vector index (None before the index opens, or without vectors)."""
        return self._vectors

    def wants_vectors(self) -> bool:
        """Whether this home embeds what it indexes once open (a vector mode is enabled)."""
        return not self._final and bool({"vector", "hybrid"} & set(self.settings.memory.retrieval_modes))

    def embedding_ahead(
        self, store: str, planned: Callable[[], Iterable[Planned]], *, existing: str | None = None
    ) -> AbstractContextManager[None]:
        """Embed what a write is about to index before it takes the lock (``_ahead``)."""
        return embedding_ahead(self, store, planned, existing=existing)

    # -- the Writer's sink --------------------------------------------------------------------
    def write_lock(self, store: str) -> AbstractContextManager[None]:
        """The shared backend's cross-process write lock of ``store`` (nothing without one)."""
        if self.settings.index.backend == "sqlite":  # the local index alone: the file lock is all
            return nullcontext()
        backend = self.backend
        return backend.write_lock(store) if backend is not None else nullcontext()

    def check_lock(self, store: str) -> None:
        """Raise when the shared backend's lock of ``store`` was lost (a backend without
        ``check_lock`` has nothing to check)."""
        check = getattr(self._shared.backend, "check_lock", None) if self._shared is not None else None
        if check is not None:
            check(store)

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
        """Append one event to the audit log (a file: it needs no index and survives its loss)."""
        self.audit_log.append(event, store, document_id, details)

    def audit_many(self, store: str, events: Sequence[tuple[str, str | None, Mapping[str, Any]]]) -> None:
        """Append a bulk change's ``(event, document_id, details)`` events in one durable write."""
        self.audit_log.append_many([(event, store, doc, details) for event, doc, details in events])

    def indexed_stores(self) -> list[str]:
        """The stores the index has scanned (a folder removed by hand is still among them)."""
        # The calling thread's reader: ``audit`` asks without the lock, and the writer connection
        # may be inside a write on another thread (apsw's ThreadingViolationError, a REST 500).
        _ = self.db  # opened (and migrated) first, as before
        rows = self.reader_db.rows("SELECT resource_name FROM store_state ORDER BY resource_name")
        return [str(r[0]) for r in rows]

    def _import_legacy_audit(self, db: IndexDB) -> None:
        """Move the audit rows an older coffer kept in index.db into the audit log (once)."""
        if not db.scalar("SELECT 1 FROM audit_events LIMIT 1"):
            return
        with store_lock(self.audit_log.layout.audit_lock):  # one process moves them, once
            rows = db.rows("SELECT at, event, store, document_id, details FROM audit_events ORDER BY id")
            events = []
            for at, event, store, document_id, details in rows:
                try:
                    when = datetime.fromisoformat(at)
                    extra = json.loads(details)
                except (ValueError, TypeError):
                    continue
                events.append(
                    AuditEvent(
                        at=when if when.tzinfo else when.replace(tzinfo=UTC),
                        event=event,
                        store=store,
                        document_id=document_id,
                        details=extra if isinstance(extra, dict) else {},
                    )
                )
            self.audit_log.import_events(events)
            db.conn.execute("DELETE FROM audit_events")
        log.info("moved %d audit events from index.db to %s", len(events), self.audit_log.folder)

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

    def __init__(self, settings: Settings, *, index_path: Path | None = None) -> None:
        self.settings = settings
        # Where index.db is: the home's, or a private one (a home this process may not write).
        self.index_path = index_path if index_path is not None else settings.index_path
        self._llm: LLM | None = None
        self._loaded = False
        self._guard = threading.Lock()

    def llm(self) -> LLM | None:
        """The configured internal model, or None (``[llm] provider = "none"``, the default)."""
        with self._guard:
            if not self._loaded:
                llm = get_llm(self.settings.llm)
                if llm is not None:
                    from ._llm import PluginLLM

                    llm = PluginLLM(llm, plugin_of("register_llms", self.settings.llm.provider))
                self._llm = llm
                self._loaded = True
            return self._llm
