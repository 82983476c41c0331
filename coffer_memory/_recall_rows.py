"""The documents rows a keyword recall's hits are made of, read for several stores in one query.

What a ``KnowledgeRetrieval`` makes hits of (``_retrieval.py``): ``DocRow``s, read by id with
the session neighbours the lending needs and kept in ``snapshot.reading``'s dict while the index
is unchanged.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, TypeVar, cast

from ._fusion import NEIGHBOUR_DEPTH, disjoint_taken, rrf_disjoint
from ._index.chunk_rows import KEPT_DOCS as KEPT_DOCS
from ._index.db import IndexDB
from ._index.session import neighbour_columns, neighbour_ids
from ._index.snapshot import in_list

# Rows a keyword recall keeps in ``snapshot.reading``'s dict: ``DocRow``s (a row tuple until a
# hit needs it; None: no such document; also read with the chunk rows, ``chunk_rows``) and session
# neighbours, by (store, id).
KEPT_NEIGHBOURS = "retrieval.neighbours"
KEPT_SESSIONS = "retrieval.sessions"  # and whether a store holds facts of an agent session
T = TypeVar("T")
# SQLite takes at most 500 SELECTs in one compound statement.
STORES_PER_QUERY = 100


class DocRow(NamedTuple):
    """What a hit takes from its document's index row (a tuple: made for every candidate of a
    recall, where an attrs class's ``__init__`` cost five ``__setattr__`` calls)."""

    id: str
    path: str
    title: str
    description: str
    updated_at: datetime


# ``DocRow(...)`` calls the class's ``__new__``, a Python function around ``tuple.__new__``: a
# frame fewer for each document a recall's hits meet for the first time.
_TUPLE_NEW = tuple.__new__
_FROM_ISO = datetime.fromisoformat


def doc_row(home: str, r: Sequence[Any]) -> DocRow:
    """A ``DocRow`` of (id, path, title, description, updated_at) with ``home`` before the path.
    An id or title that is no text (another program's value) is a ``TypeError``, as a path or a
    time that is none fails: the recall then checks the rows (``_index/values.py``)."""
    if type(r[0]) is not str or type(r[2]) is not str:
        raise TypeError(f"documents row {r[0]!r}: its id or title is no text")
    return _TUPLE_NEW(DocRow, (r[0], home + r[1], r[2], r[3], _FROM_ISO(r[4])))


def with_sessions(db: IndexDB, stores: Sequence[str], kept: dict[Any, Any]) -> bool:
    """True when any of ``stores`` holds a fact of an agent session: only then can a hit lend its
    session neighbours score (``_fusion.lend``). Kept in ``kept`` (``snapshot.reading``'s dict)."""
    known: dict[str, bool] = kept.setdefault(KEPT_SESSIONS, {})
    for store in stores:
        found = known.get(store)
        if found is None:  # one probe of the partial index idx_documents_session
            found = known[store] = (
                db.scalar(
                    "SELECT 1 FROM documents WHERE resource_name = ? AND origin_session IS NOT NULL LIMIT 1",
                    (store,),
                )
                is not None
            )
        if found:
            return True
    return False


def doc_rows(
    db: IndexDB, ids: Mapping[str, Collection[str]], kept: dict[Any, Any], *, near: bool = False
) -> dict[tuple[str, str], DocRow]:
    """The ``DocRow``s of several stores' documents by id (store name -> ids), by (store,
    id). ``kept`` keeps the rows (a ``DocRow`` is made only for a hit; None: no such document)
    and, with ``near``, each id's session neighbours (``_lent``), read in the same query: rows
    only for what ``kept`` lacks."""
    docs: dict[tuple[str, str], tuple[Any, ...] | DocRow | None] = kept.setdefault(KEPT_DOCS, {})
    known: dict[tuple[str, str], list[tuple[str, int]]] = kept.setdefault(KEPT_NEIGHBOURS, {})
    missing = {
        store: [i for i in some if (store, i) not in docs or (near and (store, i) not in known)]
        for store, some in ids.items()
    }
    stores = [store for store, some in missing.items() if some]
    if stores:
        columns = "c.id, c.path, c.title, coalesce(c.description, ''), c.updated_at, c.resource_name"
        if near:
            columns += ", " + neighbour_columns(NEIGHBOUR_DEPTH)
        # A SELECT per store: one index probe per id (``resource_name IN`` x ``id IN`` probed each
        # store for every id); SQLite takes at most 500 in one compound statement.
        found = {}
        for start in range(0, len(stores), STORES_PER_QUERY):
            part = stores[start : start + STORES_PER_QUERY]
            lists = [in_list(missing[store]) for store in part]
            rows = db.rows(
                " UNION ALL ".join(
                    f"SELECT {columns} FROM documents c WHERE c.kind = 'memory' AND c.resource_name = ? "
                    f"AND c.id IN ({marks})"
                    for marks, _ in lists
                ),
                [value for store, (_, some) in zip(part, lists, strict=True) for value in (store, *some)],
            )
            found.update({(r[5], r[0]): r for r in rows})
        for key in ((store, i) for store in stores for i in missing[store]):
            row = found.get(key)
            docs[key] = row
            if near:
                known[key] = neighbour_ids(row[6], row[7]) if row is not None else []
    out: dict[tuple[str, str], DocRow] = {}
    home = f"{db.home}/"
    for store, some in ids.items():
        for i in some:
            doc = docs.get((store, i))
            if doc is not None:
                if type(doc) is tuple:  # a row as apsw gives it (a DocRow is a tuple too, not of this type)
                    doc = docs[store, i] = doc_row(home, doc)
                out[store, i] = cast(DocRow, doc)
    return out


def fused_fronts(
    db: IndexDB,
    found: Mapping[str, Mapping[str, tuple[str, float]]],
    limit: int,
    kept: dict[Any, Any],
    make: Callable[[str, DocRow, str, float], T],
) -> list[T] | None:
    """``make(store, doc, text, score)`` of each (store, id) key ``rrf_disjoint`` makes of the
    stores' lists of ``found`` documents (store -> id -> (text, score), best first), in that order,
    reading rows only for the front of each list that can place (``disjoint_taken``: half of them
    at two stores); None when one of those has no row (the fusion then reaches further down a
    list: the caller reads every candidate's row). The stores' lists share no id (no store is
    named twice). The rows are taken from ``kept`` (``doc_rows`` reads those it lacks first), and
    each made in the one loop: a dict of the fronts' rows and a list of their keys and rows
    between were ~1,000 bytecodes a recall."""
    taken = disjoint_taken([len(best) for best in found.values()], limit)
    fronts = [
        [(store, i) for i in itertools.islice(best, n)]
        for (store, best), n in zip(found.items(), taken, strict=True)
    ]
    docs: dict[tuple[str, str], Any] = kept.setdefault(KEPT_DOCS, {})
    fused = rrf_disjoint(fronts, limit)
    if not all(map(docs.__contains__, fused)):
        doc_rows(db, {store: [i for _, i in front] for store, front in zip(found, fronts, strict=True)}, kept)
    out = []
    for key in fused:
        doc = docs[key]
        if type(doc) is not DocRow:
            if doc is None:
                return None
            # a row as apsw gives it (a DocRow is a tuple too, not of this type)
            doc = docs[key] = doc_row(f"{db.home}/", doc)
        store, i = key
        text, score = found[store][i]
        out.append(make(store, doc, text, score))
    return out
