"""Embedding ahead of the lock: every write that indexes a recall file embeds it first.

A write holds the service's lock (and the store's file lock) for the file and its index rows.
The embedder may take seconds (a remote provider), and every keyword recall's reconcile waits for
that lock, so a write works out what it is about to index before it takes the lock and embeds
that here; under the lock the re-indexer takes those vectors by text (``Reindexer.ahead``) and
asks the embedder only for texts it lacks. What was predicted is never trusted: a document that
changed meanwhile (another write, a content check, an append in between) has other texts, and
only those are embedded under the lock, as written. A prediction that fails costs nothing but
that: the write embeds under the lock, as it always could.

What a write predicts (``Planned``): a fact as drafted (``remember``, ``edit_fact``), or the bytes
a recall file will hold (journal appends, organizer and reorg topics, imports). Both become
the texts the re-indexer embeds through the same parsing and chunking it uses.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ._index import later
from ._index.db import IndexDB
from ._index.pending import session_windows, stored_by_text
from ._index.reindex import SESSION_CONTEXT_LINES
from ._index.rows import indexed_chunks
from ._index.session import appended_context, context_lines
from ._index.vec import VecIndex, embedded, paused_in
from ._models import MemoryFact
from ._store.files import parse_fact
from ._store.lock import store_lock
from ._store.paths import lock_path

if TYPE_CHECKING:
    from ._config import Settings
    from ._index.reindex import Reindexer
    from .plugins.hookspecs import Vector


class IndexHandle(Protocol):
    """What embedding ahead asks of ``_indexing.IndexHandle`` (which imports this module)."""

    settings: Settings
    lock: threading.RLock

    @property
    def db(self) -> IndexDB: ...

    @property
    def embeds(self) -> bool: ...

    @property
    def reader_db(self) -> IndexDB: ...

    @property
    def reindexer(self) -> Reindexer: ...

    @property
    def vectors(self) -> VecIndex | None: ...

    def wants_vectors(self) -> bool: ...

    def embedded(self, store: str, keys: list[str]) -> None: ...


log = logging.getLogger("coffer_memory.ahead")

# A fact as drafted, or (path, bytes) of a file about to be written whole.
Planned = MemoryFact | tuple[Path, bytes]


@contextmanager
def embedding_ahead(
    index: IndexHandle, store: str, planned: Callable[[], Iterable[Planned]], *, existing: str | None = None
) -> Iterator[None]:
    """Embed what ``planned()`` says a write will index, before the write takes the lock, and
    let the write's indexing (on this thread, inside the block) take those vectors.

    ``planned`` is called only when the write would embed (a vector mode, an embedder, sqlite-vec,
    no back-off after a failure), so a keyword-only home pays nothing for it. ``existing``: the id
    of the fact a drafted edit rewrites (its session context is its predecessor's). The index is
    opened here when it is not yet (a service's first write): opening takes the lock for that
    alone, and a failure to open is the write's to meet, after its file is durable, as before.
    """
    texts: list[str] = []
    try:
        if index.wants_vectors():
            _ = index.db  # opened here on a service's first write, not under the write's lock
        if index.embeds:
            reader = index.reader_db  # the last committed state, without the lock
            if not paused_in(reader):
                texts = _texts(index, reader, store, planned(), existing)
    except Exception:  # the prediction could not be made: the write embeds under the lock
        log.debug("no embedding ahead of the write to %s", store, exc_info=True)
        texts = []
    if not texts:
        yield
        return
    with index.reindexer.ahead(_embedded(index, texts)):
        yield


def _embedded(index: IndexHandle, texts: list[str]) -> dict[str, Vector] | Exception:
    """``texts`` embedded in the configured batch size, by text; the failure, if one: it is said
    under the lock, where a failure pauses the embedder for every writer (``Reindexer``)."""
    vectors = index.vectors
    assert vectors is not None
    unique = list(dict.fromkeys(texts))
    step = max(1, index.settings.embedding.batch_size)
    found: dict[str, Vector] = {}
    try:
        for at in range(0, len(unique), step):
            batch = unique[at : at + step]
            got = embedded(vectors.embedder, batch)
            found.update(zip(batch, got, strict=True))
    except Exception as exc:
        return exc
    return found


def _texts(
    index: IndexHandle, reader: IndexDB, store: str, planned: Iterable[Planned], existing: str | None
) -> list[str]:
    """The texts the re-indexer will embed for ``planned`` (files that are not recall files
    index nothing, so they embed nothing)."""
    paths = index.reindexer.paths(store)
    out: list[str] = []
    for item in planned:
        if isinstance(item, MemoryFact):
            # Title, description and body as ``render_fact`` writes them and ``parse_fact`` reads
            # them back (a round trip through both cost a remember a third more CPU: YAML
            # quoting); were they read otherwise, the write would embed them again, nothing worse.
            fact, known = item, existing
            title, description, body = (
                " ".join(fact.title.split()),
                " ".join(fact.description.split()),
                fact.body.strip("\n"),
            )
        else:
            path, data = item
            if not paths.is_recall_file(path):
                continue
            fact = parse_fact(data, store=store, relpath=paths.relative(path), mtime=0).fact
            title, description, body = fact.title, fact.description, fact.body
            known = fact.id if fact.origin_session_id and _indexed(reader, store, fact.id) else None
        texts = index.reindexer.texts_of(
            indexed_chunks(title, description, body), _context(reader, store, fact, known)
        )
        if not isinstance(item, MemoryFact):  # a file re-indexed: its unchanged texts keep their vectors
            held = _held_texts(index, reader, store, item[0])
            texts = [t for t in texts if t not in held]
        out += texts
    return out


def _held_texts(index: IndexHandle, reader: IndexDB, store: str, path: Path) -> set[str]:
    """The texts whose vectors the index holds for the document at ``path`` (``stored_by_text``):
    under the lock the re-index takes them from there, so they are not embedded ahead."""
    vectors = index.vectors
    doc_id = reader.scalar(
        "SELECT id FROM documents WHERE resource_name = ? AND path = ?", (store, reader.key(path))
    )
    if vectors is None or doc_id is None:
        return set()
    return set(
        stored_by_text(reader, VecIndex(reader, vectors.embedder, cache_tables=False), store, str(doc_id))
    )


def _context(reader: IndexDB, store: str, fact: MemoryFact, existing: str | None) -> str:
    """The session context ``fact`` is embedded with (``SESSION_CONTEXT_LINES``)."""
    if not fact.origin_session_id or SESSION_CONTEXT_LINES <= 0:
        return ""
    if existing is None:
        return appended_context(reader, store, fact.origin_session_id, SESSION_CONTEXT_LINES)
    return context_lines(reader, store, [existing], SESSION_CONTEXT_LINES).get(existing, "")


def _indexed(reader: IndexDB, store: str, fact_id: str) -> bool:
    return bool(reader.rows("SELECT 1 FROM documents WHERE resource_name = ? AND id = ?", (store, fact_id)))


def embed_later(index: IndexHandle, store: str, progress: Callable[[int, int], None] | None = None) -> int:
    """Embed the documents of ``store`` that reconciles left with the sentinel (``Reindexer.holding``),
    ``[embedding] batch_size`` (at most ``later.BATCH_DOCS``) at a time: each batch read and embedded without the lock, then, under it
    (and the store's file lock), written for the documents that read the same there; a document
    that changed meanwhile waits for the reconcile that re-indexes it. Returns how many got their
    vectors; ``progress(done, total)`` after each batch. Nothing when another thread or process
    embeds the store's documents (``later.claim``): this one answers from the rows as they stand.
    """
    if not index.embeds:
        return 0
    reader, reindexer = index.reader_db, index.reindexer
    # A batch is what the embedder is given at once (``[embedding] batch_size``), up to BATCH_DOCS.
    size = max(1, min(later.BATCH_DOCS, index.settings.embedding.batch_size))
    first = later.waiting(reader, store, 0, size)
    if not first or paused_in(reader):
        return 0
    total = later.count_waiting(reader, store)
    # The store's file lock too, as for every claim after: under the index lock alone (one per
    # process) two processes each read "no claim", wrote their own and both embedded this batch.
    with index.lock, store_lock(lock_path(index.settings.home, store)):
        if not later.claim(index.db, store):
            return 0
    done, batch = 0, first
    try:
        while batch:
            docs = {key: later.read_doc(reader, reindexer, store, key) for _, key in batch}
            texts = [
                w
                for per_doc in session_windows(reader, [d for d in docs.values() if d is not None])
                for per_chunk in per_doc
                for w in per_chunk
            ]
            found = _embedded(index, texts)
            with index.lock, store_lock(lock_path(index.settings.home, store)):
                if not later.claim(index.db, store):
                    return done
                same = [
                    (key, doc)
                    for key, doc in docs.items()
                    if doc is not None and later.read_doc(index.db, reindexer, store, key) == doc
                ]
                with reindexer.ahead(found):
                    got = reindexer.embed_docs([doc for _, doc in same])
                index.embedded(store, [key for key, _ in same])
            done += got
            if progress is not None:
                progress(min(done, total), total)
            if got < len(same):  # the embedder failed: it is paused, the rest keep the sentinel
                break
            batch = later.waiting(reader, store, batch[-1][0], size)
    finally:
        with index.lock:
            later.release(index.db, store)
    return done
