"""The chunk texts a vector recall's hits are made of, kept while the index is unchanged.

A hybrid recall reads its vector hits' rows after the query embedding, on the path its caller
waits for; the documents' rows come from ``_recall_rows.doc_rows`` (kept in
``snapshot.reading``'s dict), their texts from here, read for every store in one query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._index.db import IndexDB
from ._index.snapshot import in_list

KEPT_TEXTS = "retrieval.vector_texts"  # ``reading``'s key: full chunk id -> text (None: no such chunk)
# Texts kept at most (a vector hit is a chunk of at most a few thousand characters); emptied
# when a read would pass it, as the word index's kept rows are.
TEXTS_KEPT = 4096


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
            f"SELECT c.id, f.text FROM chunks c JOIN documents_fts f ON f.rowid = c.rowid WHERE c.id IN ({marks})",
            values,
        )
        found = {str(r[0]): str(r[1]) for r in rows}
        held.update({i: found.get(i) for i in missing})
    return {i: text for i in ids if (text := held.get(i)) is not None}
