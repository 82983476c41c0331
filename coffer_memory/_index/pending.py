"""The rows a bulk re-index holds before it writes them (``reindex.Reindexer``): documents whose
vectors are still to come, and the rows of files the index has no row for yet."""

from __future__ import annotations

import array
from typing import TYPE_CHECKING

import attrs

from .chunking import vector_windows
from .keys import vec_chunk_id
from .session import context_lines

if TYPE_CHECKING:
    from .db import IndexDB
    from .vec import VecIndex

# A fact of an agent session is embedded with the last line of the fact before it in front (a
# reply alone does not say what it answers), as a long chunk's windows are (``chunking.py``).
SESSION_CONTEXT_LINES = 1


@attrs.frozen
class PendingDoc:
    """A document whose keyword rows are in but whose vectors are not (its row holds the sentinel)."""

    store: str
    document_id: str
    sha256: str
    chunks: tuple[str, ...]
    session: bool = False  # the fact has an origin_session_id


@attrs.define
class NewRows:
    """Rows of files the index has no row for, written with one ``executemany`` per table.

    Rowids are handed out as SQLite would (one past the largest), so the rows are those a
    file-by-file insert gives (``tests/test_speed_paths_same_results.py`` compares them).

    A chunk's rows (``chunks``, ``documents_fts``, ``documents_words``) are kept as their values,
    ``CHUNK_VALUES`` a chunk in one list, and made into rows as they are written: three tuples kept
    per chunk until the batch was written set off Python's garbage collector every ~230 files,
    and its passes over them were ~1% of a cold rebuild's CPU (docs/benchmarks.md, rb31).
    """

    next_document: int
    next_chunk: int
    documents: list[tuple[object, ...]] = attrs.Factory(list)
    tags: list[tuple[int, str]] = attrs.Factory(list)
    chunk_values: list[object] = attrs.Factory(list)


# A queued chunk's values, in ``NewRows.chunk_values``: its rowid, chunk id, document id, store,
# position and stored tokens (``chunks``), its trigram and written text (``documents_fts``), its
# word-index text and store scope (``documents_words``).
CHUNK_VALUES = 10


def session_windows(db: IndexDB, batch: list[PendingDoc]) -> list[list[list[str]]]:
    """The texts each document of ``batch`` is embedded as: one per window of each chunk
    (``vector_windows``: the chunk itself unless long), the first led by the last line of the
    fact before it in its session (as ``db`` holds it), as a chunk's later windows are."""
    windows = [[vector_windows(text) for text in doc.chunks] for doc in batch]
    if SESSION_CONTEXT_LINES <= 0:
        return windows
    by_store: dict[str, list[int]] = {}
    for index, doc in enumerate(batch):
        if doc.session:
            by_store.setdefault(doc.store, []).append(index)
    for store, indexes in by_store.items():
        before = context_lines(db, store, [batch[i].document_id for i in indexes], SESSION_CONTEXT_LINES)
        for i in indexes:
            context = before.get(batch[i].document_id)
            if context and windows[i] and windows[i][0]:
                windows[i][0][0] = f"{context}\n{windows[i][0][0]}"
    return windows


def stored_by_text(
    db: IndexDB, vectors: VecIndex, store: str, document_id: str
) -> dict[str, array.array[float]]:
    """The vectors the index holds for the document ``document_id``, by the text each was
    embedded from (its chunks' windows, with its session context as ``db`` holds it now): a
    re-index of the document takes these for its texts that did not change (a journal append
    re-indexes a day file of hundreds of entries for one line). Nothing for a document whose
    vectors are not in or not of its rows (the empty-sha256 sentinel)."""
    row = db.rows(
        "SELECT content_sha256, origin_session FROM documents WHERE resource_name = ? AND id = ?",
        (store, document_id),
    )
    if not row or not row[0][0]:
        return {}
    chunks = db.rows(
        "SELECT coalesce(f.written, f.text) FROM chunks c JOIN documents_fts f ON f.rowid = c.rowid "
        "WHERE c.document_id = ? AND c.resource_name = ? ORDER BY c.position",
        (document_id, store),
    )
    doc = PendingDoc(store, document_id, "", tuple(str(r[0]) for r in chunks), row[0][1] is not None)
    ids = {
        (text, vec_chunk_id(document_id, position, part))
        for position, per_chunk in enumerate(session_windows(db, [doc])[0])
        for part, text in enumerate(per_chunk)
    }
    blobs = vectors.stored(store, [key for _, key in ids])
    return {text: array.array("f", blobs[key]) for text, key in ids if key in blobs}
