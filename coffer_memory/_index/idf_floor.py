"""Keyword scores of a query whose every term FTS5 gives its idf floor.

FTS5's bm25 weighs a term by ``log((N - n + 0.5) / (n + 0.5))`` (``N`` rows in the word index, ``n``
of them holding the term) and, where that is 0 or less (a term in half the rows or more), by
``1e-6`` instead. In a home of one fact (or two) every term is such a term: every hit's score came
out near ``1e-6``, which reads as "no match" to whoever sees it. When every term of the query is
floored, its scores are multiplied by ``1e6``: bm25 with an idf of 1 for each term, its
term-frequency part alone. One factor for the whole query (``N`` and ``n`` are the whole index's,
whatever store is searched), so no order changes anywhere: coverage multiplies scores, session
lending and hybrid's fusion scale them away (min-max), stores fuse by rank. A query with one term
that is not floored keeps bm25's scores as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .db import IndexDB

IDF_FLOOR = 1e-6
"""What FTS5's bm25 uses as the idf of a term in half the rows or more (``fts5_aux.c``)."""
# The most one floored term adds to a row's score: IDF_FLOOR x (k1 + 1 = 2.2) x the weights of the
# columns that hold it (words: text 1, context fts.CONTEXT_WEIGHT 0.3; trigrams: text 1), times
# coverage's most (1 + 4, words only). A list whose best score is above this per term holds a
# term that is not floored: no lookup needed.
MOST_PER_FLOORED_WORD = IDF_FLOOR * 2.2 * 1.3 * 5.0 * 1.01
MOST_PER_FLOORED_TRIGRAM = IDF_FLOOR * 2.2 * 1.01


def floor_scale(
    db: IndexDB, table: str, terms: Sequence[str], scores: Sequence[float], most_per_term: float
) -> float:
    """``1 / IDF_FLOOR`` when every one of ``terms`` is floored in the FTS5 ``table``, else 1.

    ``scores``: the query's bm25 scores (any sign); when one is more than ``most_per_term`` per
    term, a term is not floored and that answers without reading the index.
    """
    # The largest magnitude from two C passes: a generator of abs() per score was ~700 bytecodes
    # of every keyword recall (80 scores).
    if not terms or not scores or max(max(scores), -min(scores)) > most_per_term * len(terms):
        return 1.0
    [(rows,)] = db.rows(f"SELECT count(*) FROM {table}_docsize")

    def holding(term: str) -> int:
        phrase = '"' + term.replace('"', '""') + '"'
        return int(db.rows(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (phrase,))[0][0])

    return 1.0 / IDF_FLOOR if all_floored(rows, map(holding, terms)) else 1.0


def all_floored(rows: int, holding: Iterable[int]) -> bool:
    """Whether bm25 floors the idf of every term: each held by half the ``rows`` or more, where
    ``log((N - n + 0.5) / (n + 0.5))`` is 0 or less. Read lazily: the first term with a real idf
    answers. The PostgreSQL index scales ``ts_rank`` under the same condition (``pg.words``)."""
    return all(rows - n <= n for n in holding)
