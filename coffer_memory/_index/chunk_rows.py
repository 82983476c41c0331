"""The chunk rows a keyword recall reads, kept while the index is unchanged (``snapshot.reading``).

A recall ranks rowids of the word index; what it makes of them (text, store, document, coverage)
comes from the trigram table's content rows, read by rowid and kept for later recalls, with
what the index stores beside each chunk: its tokens (``chunks.tokens``, schema 12), so that
coverage tokenizes no candidate text, and its document's row, so that the hits a recall makes of
its candidates need no documents query of their own (``_recall_rows.doc_rows`` finds them kept).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .coverage import held_tokens
from .db import IndexDB
from .keys import KIND
from .snapshot import in_list
from .values import OutOfStep

# The most characters of chunk text a reader connection (one per thread) keeps between recalls
# (``snapshot.reading``): the candidates of a long-lived process's recalls come back again and
# again. 200 recalls at 10k facts met 6,200 texts, 1.4 M characters (about 4 MB kept).
KEPT_TEXT_CHARS = 2_000_000
CONTENT = "fts.content"  # ``reading``'s key of the chunk rows kept
# And of the documents rows read (``_recall_rows.doc_rows``): by (store, id), the row as apsw
# gives it (id, path, title, description, updated_at, store), a ``DocRow`` once a hit needed it,
# or None (no such document).
KEPT_DOCS = "retrieval.docs"


class ChunkRows(dict[int, tuple[str, str, str, str]]):
    """Chunk rows by FTS rowid: (chunk id, text, store, document id), with the characters of text
    they hold; in ``stores``, each row's store; in ``tokens``, the rows' stored tokens where the
    index keeps them (``coverage.stored_tokens``); and ``docs``, where the rows' documents rows go
    as they are read (``KEPT_DOCS``'s dict; None: not kept)."""

    chars = 0

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.stores: dict[int, str] = {rowid: row[2] for rowid, row in self.items()}  # each row's store
        self.tokens: dict[int, str] = {}
        self.docs: dict[tuple[str, str], Any] | None = None


def kept_rows(kept: dict[Any, Any]) -> ChunkRows:
    """The chunk rows kept in ``kept``, emptied first when they hold too much text (never during a
    recall: its rows must stay until it is done); their documents rows go to ``kept``'s."""
    content: ChunkRows | None = kept.get(CONTENT)
    if content is None or content.chars > KEPT_TEXT_CHARS:
        content = kept[CONTENT] = ChunkRows()
        content.docs = kept.setdefault(KEPT_DOCS, {})
    return content


def read_content(db: IndexDB, content: ChunkRows, rowids: Sequence[int]) -> None:
    """Add the chunk id, text and store of the FTS rows ``rowids`` that ``content`` lacks."""
    missing = [r for r in rowids if r not in content]
    if missing:
        read_missing(db, content, missing)


# The chunk rows' text, store and id from FTS5's content table itself (id = rowid, c0 text, c1
# store, c2 chunk id, c3 written: ``keys.SHOWN``): a plain rowid lookup, where the virtual table
# took twice as long (80 rows: 0.11 against 0.06 ms). Beside them the chunk's stored tokens, and
# its document's row as ``doc_rows`` reads it (the chunk row names the document; the row is
# taken only when it is the document the chunk id names, of the chunk's store: a row with none is
# the index out of step with itself, ``values.OutOfStep``).
_READ = (
    "SELECT f.id, f.c2, coalesce(f.c3, f.c0), f.c1, k.tokens, "
    "d.id, d.path, d.title, coalesce(d.description, ''), d.updated_at "
    "FROM documents_fts_content f LEFT JOIN chunks k ON k.rowid = f.id "
    f"LEFT JOIN documents d ON d.kind = '{KIND}' AND d.resource_name = f.c1 AND d.id = k.document_id "
    "WHERE f.id IN ({marks})"
)


def read_missing(db: IndexDB, content: ChunkRows, missing: Sequence[int]) -> None:
    """``read_content`` of rowids that ``content`` lacks."""
    marks, values = in_list(missing)
    rows = db.rows(_READ.format(marks=marks), values)
    # int and three str, as apsw gives them, and the document id (a hit is one per document)
    made = [(r[0], (r[1], r[2], r[3], r[1].split(":")[-2])) for r in rows]
    tokens = content.tokens
    docs = content.docs
    for r, (_, (_, _, store, doc)) in zip(rows, made, strict=True):
        if r[5] != doc:  # no document row of the id its chunk id names (before a row is kept)
            raise OutOfStep(f"chunk {r[1]!r} names no document of store {store!r}")
        if r[4] is not None and held_tokens(r[4]):
            tokens[r[0]] = r[4]
        if docs is not None and (store, doc) not in docs:
            docs[store, doc] = (doc, r[6], r[7], r[8], r[9], store)
    content.update(made)
    content.stores.update((r[0], r[3]) for r in rows)
    content.chars += sum(len(r[2]) for r in rows)
