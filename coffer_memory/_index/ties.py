"""The order of keyword rows of one score: their chunk ids', not their rowids'.

A rowid follows the order rows were written in, and a rebuild writes files in the walk's order,
not the order they were written: rows of one bm25 score ordered (or cut at a limit) by rowid
swapped places after ``reindex --rebuild``. A chunk id is the fact's own (``keys.chunk_id``).
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# A (score, rowid) row's score, in C.
SCORE = operator.itemgetter(0)


def tie_end(rows: Sequence[tuple[int, float]], limit: int) -> int:
    """Where (rowid, bm25) ``rows`` in score order are cut to keep ``limit`` of them and every
    later row of the last kept row's score (as many as there are when fewer)."""
    if len(rows) <= limit or limit <= 0:
        return min(len(rows), max(limit, 0))
    last = rows[limit - 1][1]
    end = limit
    while end < len(rows) and rows[end][1] == last:
        end += 1
    return end


def in_fact_order(
    scored: list[tuple[float, int]], content: Mapping[int, Sequence[str]]
) -> list[tuple[float, int]]:
    """(score, rowid) rows in score order with rows of one score put in their chunk ids' order:
    rowids follow the order rows were written in (a rebuild writes files in the walk's order), a
    chunk id is the fact's own. The rows are sorted again only when two scores are equal."""
    if len(set(map(SCORE, scored))) == len(scored):
        return scored
    get = content.get
    return sorted(scored, key=lambda row: (row[0], found[0] if (found := get(row[1])) else ""))


def taken(
    best: dict[str, tuple[str, float]], rows: list[tuple[float, int]], get: Callable[[int], Any], cap: int
) -> int:
    """``fts.best_per_document`` of (score, rowid) ``rows`` into ``best``, ``cap`` documents at most;
    returns where the rows that could take those places end (after the last row of the last
    taken row's score)."""
    for score, rowid in rows:
        found = get(rowid)
        if found is not None and found[3] not in best:
            best[found[3]] = (found[1], -score)
            if len(best) == cap:
                return bisect.bisect_right(rows, score, key=SCORE)
    return len(rows)
