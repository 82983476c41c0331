"""Keyword search on PostgreSQL: words through the tsvector and its GIN index, ranked by
``ts_rank``; substrings (``ILIKE``, pg_trgm's index when there) when no word matches; and the
idf floor's scale for a small store (``idf_floor``).

``ts_rank`` has no idf, and weighs a word found again in a chunk, and a chunk's length, otherwise
than FTS5's bm25: a one-fact store's hits scored about 0.03 where SQLite's bm25 (once ``idf_floor``
lifts its floor) scores about 1 a word, and a small store's hits came in another order than on
SQLite (a chunk with "cache" six times first there, a short one with it once first here). So a
store small enough that every chunk matching the query was read (fewer than ``4 x limit``) and
that holds at most twice as many chunks is scored by bm25 as FTS5 computes it (``bm25``): each
word's idf from the store's chunks (floored at ``IDF_FLOOR`` and lifted as ``idf_floor`` does),
its count in the chunk from the tsvector, the chunk's length in unicode61 tokens. A larger store
keeps ``ts_rank`` (no idf: a word's weight does not depend on how many chunks hold it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from ...plugins.hookspecs import BackendHit
from ..cjk import index_text
from ..fts import STOPWORDS, keyword_terms, plan_query
from ..idf_floor import IDF_FLOOR, all_floored
from ..keys import store_scope
from . import forms
from . import vectors as vec
from .near import near_rows
from .schema import TS_CONFIG
from .text import SEARCHED, escape_like, tsquery_terms

# Chunks read per document wanted: a document's best chunk is usually among them.
CHUNKS_PER_DOC = 4
# FTS5's bm25 constants (``fts5_aux.c``).
K1 = 1.2
B = 0.75
_LEXEME = re.compile(r"'((?:[^']|'')*)'")
# A token of FTS5's unicode61 tokenizer: a run of letters and digits.
_TOKEN = re.compile(r"[^\W_]+")

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
    scored = _small_store_bm25(conn, store, words, rows, cap) if rows else None
    return scored if scored is not None else [row[:6] for row in rows]


def _small_store_bm25(
    conn: Conn, store: str, words: Sequence[str], rows: Sequence[tuple[Any, ...]], cap: int
) -> list[tuple[Any, ...]] | None:
    """``rows`` scored and ordered by bm25 as FTS5 computes it (module docstring), for a store
    small enough that every match of the query is in ``rows`` (fewer than ``cap``) and that holds
    at most twice as many chunks (a bounded count says so without reading the store); else None.
    """
    if len(rows) >= cap:  # matches beyond those read: a store this large is not a small one
        return None
    [(total,)] = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM coffer_chunks WHERE store = %s LIMIT %s) s",
        (store, 2 * len(rows) + 1),
    ).fetchall()
    if total > 2 * len(rows):
        return None
    # Each word's lexeme: the first of its tsquery (PostgreSQL keeps ``make-release``, ``v1.2.3``
    # or a host whole beside its parts, as FTS5 reads it as one phrase). Words the parser drops
    # whole (its stop words) are in no chunk and no tsquery: they neither rank nor count.
    asked = list(dict.fromkeys(words))
    [queries] = conn.execute(
        "SELECT " + ", ".join([f"plainto_tsquery('{TS_CONFIG}', %s)::text"] * len(asked)), asked
    ).fetchall()
    lexemes = list(dict.fromkeys(found[0] for q in queries if (found := _LEXEME.findall(str(q)))))
    if not lexemes:
        return None
    tf = "(SELECT coalesce(max(coalesce(array_length(u.positions, 1), 1)), 0) FROM unnest(c.words) u WHERE u.lexeme = %s)"
    chunks = conn.execute(
        f"SELECT c.path, c.text, {', '.join([tf] * len(lexemes))} FROM coffer_chunks c WHERE c.store = %s",
        (*(lexeme.replace("''", "'") for lexeme in lexemes), store),
    ).fetchall()
    scores = bm25([(str(c[1]), [int(n) for n in c[2:]]) for c in chunks], _tokens(store_scope(store)))
    by_chunk = {(str(c[0]), str(c[1])): score for c, score in zip(chunks, scores, strict=True)}
    scored = [(*row[:5], by_chunk.get((str(row[1]), str(row[4])), 0.0)) for row in rows]
    return sorted(scored, key=lambda row: -row[5])  # stable: ts_rank's order among equals


def _tokens(text: str) -> int:
    """How many tokens FTS5's unicode61 tokenizer makes of ``text`` (as the word index sees it)."""
    return len(_TOKEN.findall(index_text(text)))


def bm25(chunks: Sequence[tuple[str, Sequence[int]]], extra: int = 0) -> list[float]:
    """FTS5's bm25 of each of ``chunks`` (its text, and how often it holds each query word) in a
    store of those chunks alone, higher is better, with coffer's lift of the idf floor
    (``idf_floor``): a word in half the chunks or more weighs ``IDF_FLOOR``, or 1 when every word
    held by a chunk is such a word. ``extra``: tokens each row holds beside its text (the store's
    scope column)."""
    if not chunks:
        return []
    sizes = [_tokens(text) + extra for text, _ in chunks]
    mean = sum(sizes) / len(sizes) or 1.0
    count = len(chunks)
    holding = [sum(1 for _, tfs in chunks if tfs[i]) for i in range(len(chunks[0][1]))]
    idf = [math.log((count - n + 0.5) / (n + 0.5)) for n in holding]
    idf = [w if w > 0 else IDF_FLOOR for w in idf]
    if all_floored(count, holding):
        idf = [1.0] * len(idf)
    return [
        sum(
            weight * f * (K1 + 1) / (f + K1 * (1 - B + B * size / mean))
            for weight, f in zip(idf, tfs, strict=True)
            if f
        )
        for (_, tfs), size in zip(chunks, sizes, strict=True)
    ]


def _substrings(conn: Conn, store: str, query: str, limit: int, only: Only) -> list[tuple[Any, ...]]:
    where, params = only
    plan = plan_query(query)
    terms = [*plan.fts_terms, *plan.short_terms]
    if not terms:
        return []
    # Each term found counts one; shorter passages first among equals (as on SQLite).
    count = " + ".join([f"({SEARCHED} ILIKE %s)::int"] * len(terms))
    likes = [f"%{escape_like(t)}%" for t in terms]
    any_of = " OR ".join([f"{SEARCHED} ILIKE %s"] * len(terms))
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
