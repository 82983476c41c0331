"""Keeps a shared index backend (``[index] backend = "postgresql"``) in line with the files.

The machine-local SQLite index stays what it is (listing, cursors, audit, vectors). Every
document that its re-index routine touches is noted (``MirroredReindexer``), and ``SharedIndex``
pushes those to the backend: under the store's cross-process write lock it reads each file
again, so what it pushes is the file as it is now (never an older copy another process read
before a write), and the backend skips documents whose content hash it has already.

When the backend keeps vectors, a document goes with the vectors the local index computed for
exactly that content (nothing is embedded twice); a document whose vectors are not in yet goes
without, and again once they are (its re-index notes it).
"""

from __future__ import annotations

import array
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._errors import IndexUnavailable
from .._store.files import FactParseError, parse_fact, read_bytes
from .._store.paths import StorePaths
from ..plugins.hookspecs import DocVectors, IndexBackend, IndexedDoc
from .chunking import vector_windows
from .keys import vec_chunk_id
from .readahead import Read
from .reindex import Outcome, Reindexer
from .rows import indexed_chunks

log = logging.getLogger("coffer_memory.mirror")


class MirroredReindexer(Reindexer):
    """The re-index routine, noting the ``documents.path`` key of every document it changes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.changed: dict[str, set[str]] = {}
        self.dropped: set[str] = set()

    def _note(self, store: str, key: str) -> None:
        self.changed.setdefault(store, set()).add(key)

    def index_file(self, store: str, path: Path, **kwargs: Any) -> tuple[Outcome, Any]:
        """``Reindexer.index_file``, noting the document unless it was unchanged."""
        names = kwargs.get("names")
        key = names[1] if names is not None else self.db.key(path)
        try:
            outcome, parsed = super().index_file(store, path, **kwargs)
        except (FactParseError, OSError):
            self._note(store, key)  # its rows were dropped
            raise
        if outcome != "unchanged":
            self._note(store, key)
        return outcome, parsed

    def add_new(self, store: str, path: str | Path, names: tuple[str, str], read: Read | None = None) -> Any:
        """``Reindexer.add_new``, noting the document (its failed read too: nothing to push)."""
        self._note(store, names[1])
        return super().add_new(store, path, names, read)

    def remove_path(self, store: str, path: Path) -> str | None:
        """``Reindexer.remove_path``, noting the document."""
        self._note(store, self.db.key(path))
        return super().remove_path(store, path)

    def remove_store(self, store: str) -> None:
        """``Reindexer.remove_store``; the backend forgets the store too."""
        super().remove_store(store)
        self.changed.pop(store, None)
        self.dropped.add(store)


class SharedIndex:
    """Pushes the documents a ``MirroredReindexer`` noted to an ``IndexBackend``."""

    def __init__(self, backend: IndexBackend, reindexer: MirroredReindexer) -> None:
        self.backend = backend
        self.reindexer = reindexer
        self._compared: set[str] = set()
        self._generation = 0

    def refresh(self, store: str) -> None:
        """After a local reconcile: compare the whole store once per process (and again once the
        backend's tables were made anew: ``generation``), then push what changed."""
        generation = getattr(self.backend, "generation", 0)
        if generation != self._generation:
            self._compared.clear()
            self._generation = generation
        if store not in self._compared:
            self._compare(store)
            self._compared.add(store)
        self.flush(store)

    def _compare(self, store: str) -> None:
        """Note every document whose hash differs between the local index and the backend."""
        db = self.reindexer.db
        local = {
            str(key): str(sha)
            for key, sha in db.rows(
                "SELECT path, content_sha256 FROM documents WHERE resource_name = ?", (store,)
            )
        }
        prefix = self._prefix(store)
        model = self._model()
        digests = self.backend.digests(store, model) if model is not None else self.backend.digests(store)
        remote = {prefix + path: sha for path, sha in digests.items()}
        for key in local.keys() | remote.keys():
            if local.get(key) != remote.get(key):
                self.reindexer._note(store, key)

    def _model(self) -> str | None:
        """The local embedder's model id when its vectors go to the backend, else None."""
        vectors = self.reindexer.vectors
        return vectors.embedder.model_id if vectors is not None and self.backend.vectors else None

    def _prefix(self, store: str) -> str:
        return self.reindexer.db.key(self.reindexer.paths(store).root) + "/"

    def flush(self, store: str | None = None) -> None:
        """Push the noted documents of ``store`` (every store for None) to the backend; a backend
        the role may only read is not pushed to (its rows are the writers' to keep)."""
        if not getattr(self.backend, "writable", True):
            if store is None:
                self.reindexer.changed.clear()
            else:
                self.reindexer.changed.pop(store, None)
            self.reindexer.dropped.clear()
            return
        for gone in list(self.reindexer.dropped):
            self.backend.drop_store(gone)
            self.reindexer.dropped.discard(gone)
            self._compared.discard(gone)
        names = [store] if store is not None else list(self.reindexer.changed)
        for name in names:
            keys = self.reindexer.changed.pop(name, set())
            if not keys:
                continue
            try:
                self._push(name, keys)
            except BaseException:
                self.reindexer.changed.setdefault(name, set()).update(keys)  # tried again next time
                raise

    def _push(self, store: str, keys: set[str]) -> None:
        """Read ``keys`` under the backend's lock of ``store`` and sync them; once more when the
        backend failed after the lock was taken (the connection holding it broke: the second
        takes it afresh). Not when the lock itself could not be had: the backend tried that
        again already, and a server that is down would make each request wait twice as long."""
        for last in (False, True):
            locked = False
            try:
                with self.backend.write_lock(store):
                    locked = True
                    docs, removed = self._read(store, keys)
                    self.backend.sync(store, docs, removed)
                return
            except IndexUnavailable:
                if last or not locked:
                    raise

    def _read(self, store: str, keys: Iterable[str]) -> tuple[list[IndexedDoc], list[str]]:
        """The documents at ``keys`` as their files are now; the paths of those that are gone."""
        sp = StorePaths.of(self.reindexer.memory_dir, store)
        prefix = self._prefix(store)
        docs: list[IndexedDoc] = []
        removed: list[str] = []
        for key in sorted(keys):
            rel = key.removeprefix(prefix)
            doc = self._doc(sp, rel)
            if doc is None:
                removed.append(rel)
            else:
                docs.append(doc)
        return docs, removed

    def _doc(self, sp: StorePaths, rel: str) -> IndexedDoc | None:
        path = sp.root / rel
        try:
            data, st = read_bytes(path, max_bytes=self.reindexer.max_file_bytes)
            parsed = parse_fact(data, store=sp.name, relpath=rel, mtime=st.st_mtime)
        except (FactParseError, OSError) as exc:
            if not isinstance(exc, FileNotFoundError):
                log.debug("not in the shared index: %s (%s)", path, exc)
            return None
        fact = parsed.fact
        chunks = tuple(indexed_chunks(fact.title, fact.description, fact.body))
        return IndexedDoc(
            id=fact.id,
            path=rel,
            sha256=parsed.sha256,
            title=fact.title,
            description=fact.description,
            created_at=fact.created_at,
            updated_at=fact.updated_at,
            tags=tuple(fact.tags),
            chunks=chunks,
            vectors=self._vectors(sp, rel, fact.id, parsed.sha256, chunks),
        )

    def _vectors(
        self, sp: StorePaths, rel: str, doc_id: str, sha256: str, chunks: tuple[str, ...]
    ) -> DocVectors | None:
        """The local index's vectors of this document when they are of exactly this content."""
        local = self.reindexer.vectors
        if local is None or self._model() is None:
            return None
        db = self.reindexer.db
        held = db.scalar(
            "SELECT content_sha256 FROM documents WHERE resource_name = ? AND path = ?",
            (sp.name, self._prefix(sp.name) + rel),
        )
        if held != sha256:  # another content, or its vectors are not in yet (the '' sentinel)
            return None
        keys = [
            (position, part, vec_chunk_id(doc_id, position, part))
            for position, text in enumerate(chunks)
            for part in range(len(vector_windows(text)))
        ]
        blobs = local.stored(sp.name, [key for _, _, key in keys])
        if len(blobs) != len(keys):
            return None
        rows = tuple((position, part, array.array("f", blobs[key])) for position, part, key in keys)
        return DocVectors(local.embedder.model_id, local.embedder.dimensions, rows)
