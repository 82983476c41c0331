"""A vector recall's nearest documents, and the chunk texts its hits are made of, kept while the
index is unchanged.

A hybrid recall reads its vector hits' rows after the query embedding, on the path its caller
waits for; the documents' rows come from ``_recall_rows.doc_rows`` (kept in
``snapshot.reading``'s dict), their texts from here, read for every store in one query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._index.chunking import MAX_WINDOWS
from ._index.db import IndexDB
from ._index.keys import store_scope
from ._index.snapshot import in_list

if TYPE_CHECKING:  # the plugin surface imports pluggy, which a keyword recall does without
    from ._index.filters import FactFilter
    from ._index.vec import VecIndex
    from ._query_vectors import Rows
    from .plugins.hookspecs import Vector

KEPT_TEXTS = "retrieval.vector_texts"  # ``reading``'s key: full chunk id -> text (None: no such chunk)
# Texts kept at most (a vector hit is a chunk of at most a few thousand characters); emptied
# when a read would pass it, as the word index's kept rows are.
TEXTS_KEPT = 4096
KNN_MAX_K = 4096  # the most rows sqlite-vec's knn returns (a larger k is an error)


def nearest_documents(
    vectors: VecIndex, store: str, qvec: Vector, limit: int, where: FactFilter | None, scanned: Rows | None
) -> dict[str, tuple[str, float]]:
    """The ``limit`` documents of ``store`` nearest ``qvec``: id -> (full chunk id, score).

    ``scanned``: the store's first ``limit * 4`` nearest rows, when they were found beside the
    embedding."""
    best: dict[str, tuple[str, float]] = {}
    scope = store_scope(store)
    # A long chunk has a vector per window (``vector_windows``), so ``k`` rows may hold fewer
    # than ``limit`` documents: then ask once more for enough rows whatever the windows.
    for k in (limit * 4, min(limit * 4 * MAX_WINDOWS, KNN_MAX_K)):
        if where is not None:
            nearest = vectors.knn_within(store, qvec, k, where.chunk_rowids(store))
        elif scanned is not None and k == limit * 4:
            nearest = scanned
        else:
            nearest = vectors.knn(store, qvec, k)
        best.clear()
        for bare, distance in nearest:
            # ``chunk_of_vec_id`` and ``chunk_id`` inline, on the path after the embedding:
            # a bare id is ``doc:position`` (``:window`` after it for a later window).
            doc_id, _, rest = bare.partition(":")
            if doc_id not in best:
                best[doc_id] = (f"{scope}:{doc_id}:{rest.partition(':')[0]}", 1.0 - distance)
                if len(best) == limit:
                    break
        if len(best) == limit or len(nearest) < k:
            break
    return best


def chunk_texts(db: IndexDB, ids: Sequence[str], kept: dict[Any, Any]) -> dict[str, str]:
    """The texts of the chunks ``ids`` (full chunk ids, any stores) that exist, by id; read in one
    query for those ``kept`` lacks."""
    held: dict[str, str | None] = kept.setdefault(KEPT_TEXTS, {})
    missing = [i for i in dict.fromkeys(ids) if i not in held]
    if missing and len(held) + len(missing) > TEXTS_KEPT:
        held.clear()
        missing = list(dict.fromkeys(ids))
    if missing:
        marks, values = in_list(missing)
        rows = db.rows(
            f"SELECT c.id, coalesce(f.written, f.text) FROM chunks c JOIN documents_fts f ON f.rowid = c.rowid WHERE c.id IN ({marks})",
            values,
        )
        found = {str(r[0]): str(r[1]) for r in rows}
        held.update({i: found.get(i) for i in missing})
    return {i: text for i in ids if (text := held.get(i)) is not None}
