"""Keyword search on PostgreSQL: words through the tsvector and its GIN index, ranked by
``ts_rank``; substrings (``ILIKE``, pg_trgm's index when there) when no word matches; and the
idf floor's scale for a small store (``idf_floor``).

``ts_rank`` has no idf: a one-fact store's hits scored about 0.03, where SQLite's bm25 (once
``idf_floor`` lifts its floor) scores about 1 a term. When every term of the query is held by
half the store's chunks or more (``idf_floor.all_floored``, the condition under which FTS5's
bm25 floors them), the scores are scaled by one factor for the query and store: what undoes
``ts_rank``'s own constants (the weight of an unlabelled word, the sum its position weights
tend to, the division by the query's words) and its length normalisation at the store's
average chunk, so a word found once in a chunk of average length scores 1, as bm25's
term-frequency part does with an idf of 1. One factor: no order changes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from ...plugins.hookspecs import BackendHit
from ..fts import STOPWORDS, keyword_terms, plan_query
from ..idf_floor import all_floored
from . import forms
from . import vectors as vec
from .near import near_rows
from .schema import TS_CONFIG
from .text import escape_like, tsquery_terms

# Chunks read per document wanted: a document's best chunk is usually among them.
CHUNKS_PER_DOC = 4
# ``ts_rank``'s weight of a word without a label (class D; ``ts_rank(words, query)``'s default
# weights are {0.1, 0.2, 0.4, 1.0}) and the sum its position weights tend to (pi^2 / 6, by which
# ``calc_rank_or`` divides): a word once in a chunk ranks WORD_WEIGHT / RANK_SUM before the
# division by the query's words and the length normalisation (PostgreSQL's ``tsrank.c``).
WORD_WEIGHT = 0.1
RANK_SUM = 1.64493406685
_LEXEME = re.compile(r"'((?:[^']|'')*)'")

Conn = vec.Conn
Only = vec.Only

_SELECT = (
    "SELECT d.id, d.path, d.title, d.updated_at, c.text, {score} AS score "
    "FROM coffer_chunks c JOIN coffer_documents d ON d.store = c.store AND d.path = c.path "
)


def search(conn: Conn, store: str, query: str, limit: int, only: Only) -> list[BackendHit]:
    """The best documents of ``store`` for ``query``: words first (those the parser drops as whole
    words, ``_dropped_words``), then substrings, then near spellings (``near.py``)."""
    rows = _words(conn, store, query, limit, only)
    if not rows:
        rows = (
            _dropped_words(conn, store, query, limit, only)
            or _substrings(conn, store, query, limit, only)
            or near_rows(conn, _SELECT, store, query, limit * CHUNKS_PER_DOC, only)
        )
    return best(rows, limit)


def _word_pattern(word: str) -> str:
    """``word`` as a whole word in a PostgreSQL regular expression (``\\m``/``\\M``: its ends)."""
    return r"\m" + re.sub(r"([^\w\s])", r"\\\1", word) + r"\M"


def _dropped_words(conn: Conn, store: str, query: str, limit: int, only: Only) -> list[tuple[Any, ...]]:
    """The chunks holding, as whole words, the query's words that PostgreSQL's parser drops (its
    stop words: no tsvector holds them). FTS5 indexes every word, so on SQLite "the and of" finds
    the facts with those words; here no word matched and the substring scan found "the" in
    "theory" and "other", nearly every document. Ranked as the substring scan ranks."""
    words = keyword_terms(query)
    if not words:
        return []
    dropped = [
        w
        for (w,) in conn.execute(
            f"SELECT w FROM unnest(%s::text[]) w WHERE numnode(plainto_tsquery('{TS_CONFIG}', w)) = 0",
            (list(dict.fromkeys(words)),),
        ).fetchall()
    ]
    if not dropped:
        return []
    where, params = only
    patterns = [_word_pattern(w) for w in dropped]
    count = " + ".join(["(c.text ~* %s)::int"] * len(patterns))
    any_of = " OR ".join(["c.text ~* %s"] * len(patterns))
    sql = _SELECT.format(score=f"({count})") + (
        f"WHERE c.store = %s AND ({any_of}){where} ORDER BY score DESC, length(c.text), d.path LIMIT %s"
    )
    return conn.execute(sql, (*patterns, store, *patterns, *params, limit * CHUNKS_PER_DOC)).fetchall()


def _tsquery(terms: Sequence[str]) -> str:
    return "(" + " || ".join([f"plainto_tsquery('{TS_CONFIG}', %s)"] * len(terms)) + ")"


def _words(conn: Conn, store: str, query: str, limit: int, only: Only) -> list[tuple[Any, ...]]:
    where, params = only
    words = forms.with_forms(conn, store, query, keyword_terms(query), STOPWORDS)
    terms = tsquery_terms(words)
    if not terms:
        return []
    # Rank the chunks alone and join the documents for the best few only: joining every match
    # first took twice as long at 100k facts. A filter needs the documents inside.
    join = " JOIN coffer_documents d ON d.store = c.store AND d.path = c.path" if where else ""
    cap = limit * CHUNKS_PER_DOC
    sql = (
        f"WITH q AS (SELECT {_tsquery(terms)} AS q), top AS ("
        "SELECT c.store, c.path, c.position, c.text, ts_rank(c.words, q.q, 1) AS score "
        f"FROM coffer_chunks c{join}, q WHERE c.store = %s AND c.words @@ q.q{where} "
        "ORDER BY score DESC, c.path, c.position LIMIT %s) "
        "SELECT d.id, d.path, d.title, d.updated_at, top.text, top.score, (SELECT q::text FROM q) "
        "FROM top JOIN coffer_documents d ON d.store = top.store AND d.path = top.path "
        "ORDER BY top.score DESC, top.path, top.position"
    )
    rows = conn.execute(sql, (*terms, store, *params, cap)).fetchall()
    scale = _floor_scale(conn, store, words, rows, cap) if rows else 1.0
    return [(*row[:5], row[5] * scale) for row in rows]


def _floor_scale(
    conn: Conn, store: str, words: Sequence[str], rows: Sequence[tuple[Any, ...]], cap: int
) -> float:
    """The factor of the module docstring when every one of ``words`` is floored in ``store``,
    else 1. Asked only of a store that may be small enough: with every match of the query in
    ``rows`` (fewer than ``cap``), a store of more than twice as many chunks holds each word in
    fewer than half of them, which a bounded count says without reading the store."""
    if len(rows) >= cap:  # matches beyond those read: a store this large is not a small one
        return 1.0
    [(total,)] = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM coffer_chunks WHERE store = %s LIMIT %s) s",
        (store, 2 * len(rows) + 1),
    ).fetchall()
    if total > 2 * len(rows):
        return 1.0
    per_word = [t for t in (tsquery_terms([w]) for w in words) if t]
    # Per word: whether its tsquery holds a lexeme, and how many chunks hold it.
    holding = ", ".join(
        f"numnode({_tsquery(t)}) > 0, count(*) FILTER (WHERE c.words @@ {_tsquery(t)})" for t in per_word
    )
    lengths = (
        "avg(log(2, (SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0) "
        "FROM unnest(c.words) u) + 1))"
    )
    [(*held, mean_log)] = conn.execute(
        f"SELECT {holding}, {lengths} FROM coffer_chunks c WHERE c.store = %s",
        (*(x for t in per_word for x in (*t, *t)), store),
    ).fetchall()
    # Words PostgreSQL's parser drops whole (stop words) are in no chunk and in no tsquery: they
    # neither rank nor count, where FTS5 indexes them in every row (floored there too).
    counted = [int(n) for lexical, n in zip(held[::2], held[1::2], strict=True) if lexical]
    lexemes = set(_LEXEME.findall(str(rows[0][6] or "")))
    if not lexemes or not counted or not all_floored(int(total), counted) or not mean_log:
        return 1.0
    # ``ts_rank`` sums over the tsquery's lexemes, bm25 over the query's words: a word PostgreSQL
    # keeps whole beside its parts (``make-release``: 'make-releas', 'make', 'releas'; a host, a
    # version) is three lexemes and one phrase in FTS5. Dividing by the words, not the lexemes,
    # scores a one-fact store's "stand-up deploy" 10 on both backends (it was 15 here).
    return len(counted) * RANK_SUM / WORD_WEIGHT * float(mean_log)


def _substrings(conn: Conn, store: str, query: str, limit: int, only: Only) -> list[tuple[Any, ...]]:
    where, params = only
    plan = plan_query(query)
    terms = [*plan.fts_terms, *plan.short_terms]
    if not terms:
        return []
    # Each term found counts one; shorter passages first among equals (as on SQLite).
    count = " + ".join(["(c.text ILIKE %s)::int"] * len(terms))
    likes = [f"%{escape_like(t)}%" for t in terms]
    any_of = " OR ".join(["c.text ILIKE %s"] * len(terms))
    sql = _SELECT.format(score=f"({count})") + (
        f"WHERE c.store = %s AND ({any_of}){where} ORDER BY score DESC, length(c.text), d.path LIMIT %s"
    )
    return conn.execute(sql, (*likes, store, *likes, *params, limit * CHUNKS_PER_DOC)).fetchall()


def best(rows: Sequence[tuple[Any, ...]], limit: int) -> list[BackendHit]:
    """The first (best) chunk of each document, for the first ``limit`` documents."""
    out: dict[str, BackendHit] = {}
    for doc_id, path, title, updated_at, text, score in rows:
        if path not in out:
            when = updated_at.astimezone(UTC)
            out[path] = BackendHit(str(doc_id), str(path), str(title), when, str(text), float(score))
            if len(out) == limit:
                break
    return list(out.values())
