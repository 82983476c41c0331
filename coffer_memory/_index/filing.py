"""A shared MATCH's rows filed into the lists of the stores searched (``fts._ranked_per_store``):
each row by its chunk row's store, and the rows tied with a full store's cut."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from itertools import repeat
from operator import eq

from .chunk_rows import ChunkRows, read_content
from .db import IndexDB


def _skip(row: tuple[int, float]) -> None:
    """A row of a store not searched, left out (``file_rows``)."""


def file_rows(
    batch: list[tuple[int, float]],
    file_row: dict[str | None, Callable[[tuple[int, float]], object]],
    store_of: Callable[[int], str | None],
) -> int:
    """Each row of ``batch`` appended to its store's list, by ``file_row`` (a store's append, by
    store: a store it lacks is not searched, and joins it as ``_skip``), in order, up to the first
    row whose chunk row is not kept (``store_of`` gives None); that row's index, or ``len(batch)``.

    One lookup and one call a row: a filter per store over the batch in C (``into_stores``'s
    ``compress`` of a ``map`` of ``eq``, after a list of the rowids and one of their stores) cost
    ~1.5 k instructions a row of a 1k recall against ~1 k."""
    at = 0
    while True:
        try:
            for row in itertools.islice(batch, at, None) if at else batch:
                file_row[store_of(row[0])](row)
            return len(batch)
        except KeyError:
            store = store_of(row[0])
            at = batch.index(row)
            if store is None:
                return at
            file_row[store] = _skip


def into_stores(
    rows: dict[str, list[tuple[int, float]]], batch: list[tuple[int, float]], stores: list[str]
) -> None:
    """Each row of ``batch`` appended to the list in ``rows`` of its store (``stores``, one per
    row; "" for none), in order. A few stores take their rows by a filter each, in C: a Python
    loop over the rows (a lookup and a test a row) was a tenth of a 1k recall's ranking."""
    if len(rows) <= 3:
        for store, mine in rows.items():
            mine.extend(itertools.compress(batch, map(eq, repeat(store), stores)))  # eq: any value
        return
    into = rows.get
    for row, store in zip(batch, stores, strict=True):
        found = into(store)
        if found is not None:
            found.append(row)


def take_tied(
    db: IndexDB,
    content: ChunkRows,
    rows: dict[str, list[tuple[int, float]]],
    rest: list[tuple[int, float]],
    cursor: Iterator[tuple[int, float]],
    tail: tuple[int, float],
) -> tuple[int, tuple[int, float] | None]:
    """Add to each store's list in ``rows`` (each as long as its limit, ending on its cut's score)
    the rows of that score among ``rest`` and then ``cursor`` (the rows after those taken, in
    score order), their chunk rows read into ``content``. Returns how many rows it took from
    ``cursor`` and the last row the statement gave (``tail``: the last row before ``cursor``'s,
    when ``rest`` is empty and ``cursor`` gave none), or None when it met a row past every cut:
    no row after it goes on any list.

    Rows after those taken score at least as much as any taken: the rows of the highest cut's
    score are the only ones that can go on."""
    top = max(mine[-1][1] for mine in rows.values())
    tied = []
    fetched = 0
    last: tuple[int, float] | None = rest[-1] if rest else tail
    for row in rest:
        if row[1] > top:
            last = None
            break
        tied.append(row)
    if last is not None:
        for row in cursor:
            fetched += 1
            if row[1] > top:
                last = None
                break
            tied.append(row)
            last = row
    file_tied(db, content, rows, tied)
    return fetched, last


def file_tied(
    db: IndexDB,
    content: ChunkRows,
    rows: dict[str, list[tuple[int, float]]],
    tied: list[tuple[int, float]],
) -> None:
    """Append each of ``tied`` (rows in score order, after every row of the lists in ``rows``) to
    the list of its store when that list ends on the row's score, their chunk rows read into
    ``content``."""
    if not tied:
        return
    read_content(db, content, [r[0] for r in tied])
    get = content.get
    for row in tied:
        found = get(row[0])
        mine = rows.get(found[2]) if found is not None else None
        if mine is not None and mine[-1][1] == row[1]:
            mine.append(row)
