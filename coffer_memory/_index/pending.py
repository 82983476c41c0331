"""The rows a bulk re-index holds before it writes them (``reindex.Reindexer``): documents whose
vectors are still to come, and the rows of files the index has no row for yet."""

from __future__ import annotations

import attrs


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
    """

    next_document: int
    next_chunk: int
    documents: list[tuple[object, ...]] = attrs.Factory(list)
    tags: list[tuple[int, str]] = attrs.Factory(list)
    chunks: list[tuple[object, ...]] = attrs.Factory(list)
    fts: list[tuple[object, ...]] = attrs.Factory(list)
    words: list[tuple[object, ...]] = attrs.Factory(list)
