"""Keyword search over the FTS5 word and trigram tables, with user text quoted term by term."""

from __future__ import annotations

import bisect
import functools
import itertools
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Any, cast

import apsw
import attrs

from . import forms, near
from .chunk_rows import ChunkRows, kept_rows, read_content, read_missing
from .coverage import COVERAGE_WEIGHT, scored_lists
from .db import IndexDB
from .filing import file_rows, file_tied, into_stores, take_tied
from .idf_floor import MOST_PER_FLOORED_TRIGRAM, MOST_PER_FLOORED_WORD, floor_scale
from .keys import SHOWN, document_id_of_chunk, store_scope

# The query's terms (``terms.py``), named here as before.
from .terms import MIXED_WORD_WEIGHT as MIXED_WORD_WEIGHT
from .terms import STOPWORDS as STOPWORDS
from .terms import TRIGRAM as TRIGRAM
from .terms import QueryPlan as QueryPlan
from .terms import keyword_terms as keyword_terms
from .terms import plan_query as plan_query
from .ties import SCORE, in_fact_order, taken, tie_end

# The weight of a word index row's ``context`` column (a session fact's predecessor's last line,
# ``reindex.KEYWORD_CONTEXT_LINES``) beside its own text's 1: words that lead to a reply count,
# its own words count most. Rows without context rank as without the column (nothing in it).
CONTEXT_WEIGHT = 0.3


def _bm25() -> str:
    """The word index's bm25 call: the text, not the store scope, and the context a little."""
    return f"bm25(documents_words, 1.0, 0.0, {float(CONTEXT_WEIGHT)!r})"


@attrs.frozen
class ChunkHit:
    """A chunk found by keyword search, with a higher-is-better score."""

    chunk_id: str
    text: str
    score: float


def _escape_like(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# ``within``: a subquery of allowed chunk rowids and its parameters (a tags or time filter,
# ``index/filters.py``), applied inside the query so the limit counts matching chunks only.
Within = tuple[str, list[object]] | None


def _within(within: Within) -> tuple[str, list[object]]:
    # "+rowid": a plain expression, not a constraint FTS5 is offered; else it runs the MATCH once
    # per allowed rowid (18 times slower at 5k facts). The subquery is computed once.
    return (f" AND +rowid IN ({within[0]})", within[1]) if within else ("", [])


def search_words(db: IndexDB, store: str, query: str, limit: int, within: Within = None) -> list[ChunkHit]:
    """Word-level bm25 over ``documents_words`` (porter stemming); texts come from documents_fts."""
    terms = forms.with_forms(db, query, keyword_terms(query), STOPWORDS)
    if not terms:
        return []
    ranked = _ranked_words(db, _words_match(terms, store), limit, within)
    found = ChunkRows()
    read_content(db, found, [r for r, _ in ranked])
    scored = in_fact_order(
        _floor_scaled(db, terms, scored_lists(db.conn, terms, [ranked], found, stored=found.tokens))[0], found
    )
    return [ChunkHit(found[r][0], found[r][1], -score) for score, r in scored if r in found]


def _floor_scaled(
    db: IndexDB, terms: Sequence[str], lists: list[list[tuple[float, int]]]
) -> list[list[tuple[float, int]]]:
    """``lists`` of (bm25, rowid), each in score order, with ``idf_floor.floor_scale``'s factor
    applied (one for all). The factor hangs on the scores' extremes only: each list's first and
    last score stand for all of it (a list of every score was ~50 k instructions a recall)."""
    scores = [score for ranked in lists if ranked for score in (ranked[0][0], ranked[-1][0])]
    scale = floor_scale(db, "documents_words", terms, scores, MOST_PER_FLOORED_WORD)
    if scale == 1.0:
        return lists
    return [[(score * scale, rowid) for score, rowid in ranked] for ranked in lists]


def _any_of(terms: Sequence[str]) -> str:
    """The MATCH expression of rows holding any of ``terms``."""
    # unicode61 splits "make-release" into a phrase itself; quotes keep user syntax inert.
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def _words_match(terms: Sequence[str], store: str) -> str:
    """The MATCH expression of ``terms`` in one store's rows of the word index."""
    return f'store : "{store_scope(store)}" AND ({_any_of(terms)})'


def _ranked_words(db: IndexDB, match: str, limit: int, within: Within = None) -> list[tuple[int, float]]:
    """The first ``limit`` (rowid, bm25) of ``match``, and every row after them of the last one's
    score (``ties.tie_end``): which rows of one score a cut keeps must not hang on their rowids."""
    only, only_params = _within(within)
    sql = f"SELECT rowid, {_bm25()} AS s FROM documents_words WHERE documents_words MATCH ?{only}"
    # One row past the limit tells whether rows of the last score go on (the limit is written into
    # the statement: see _ranked_per_store). Rows as apsw gives them: (int, float) already (a
    # conversion per row was a tenth of the ranking).
    asked = int(limit) + 1
    rows = cast(
        "list[tuple[int, float]]", db.rows(f"{sql} ORDER BY s, rowid LIMIT {asked}", (match, *only_params))
    )
    end = tie_end(rows, limit)
    if end < len(rows) or len(rows) < asked:
        return rows[:end]
    # Every row fetched from the cut on is of the cut's score: the rest of that score's rows come
    # after the last one fetched, by rowid (bm25 gives a row the same score in both statements;
    # the rowid bound spares ranking the rows before it again).
    last = rows[-1]
    more = db.rows(f"{sql} AND rowid > ? AND s = ? ORDER BY rowid", (match, *only_params, last[0], last[1]))
    return rows + cast("list[tuple[int, float]]", more)


_STORE_COUNTS = "fts.store_counts"  # ``reading``'s key of the stores' file counts
_COVERAGE = "fts.coverage"  # and of each row's tokens as coverage compares them


def search_words_many(
    db: IndexDB,
    stores: Sequence[str],
    query: str,
    limit: int,
    docs: int | None = None,
    kept: dict[Any, Any] | None = None,
) -> dict[str, list[ChunkHit]]:
    """``search_words`` of several stores, each list cut at ``docs`` documents (all that a caller
    keeping one hit per document reads): the query's terms worked out once, each store's rows
    ranked as its own MATCH ranks them (``_ranked_per_store``), one query for every store's texts.

    ``kept`` is ``snapshot.reading``'s dict: chunk rows and store counts read by earlier recalls
    of an unchanged index are taken from it, and what this one reads goes into it.
    """
    terms = forms.query_terms(db, query, kept)
    out: dict[str, list[ChunkHit]] = {s: [] for s in stores}
    if not terms:
        return out
    content, _, scored = _scored_per_store(db, list(out), terms, limit, kept)
    for store, rows in scored.items():
        ids: set[str] = set()
        for score, rowid in in_fact_order(rows, content):
            if docs is not None and len(ids) >= docs:
                break
            found = content.get(rowid)
            if found is not None:
                out[store].append(ChunkHit(found[0], found[1], -score))
                ids.add(document_id_of_chunk(found[0]))
    return out


def best_documents(
    db: IndexDB,
    stores: Sequence[str],
    query: str,
    limit: int,
    kept: dict[Any, Any] | None = None,
    fronts: Sequence[int] | None = None,
) -> dict[str, dict[str, tuple[str, float]]]:
    """Each store's first ``limit`` documents, each with its best chunk's text and score: what
    ``best_per_document`` makes of ``search_chunks_many(db, stores, query, rows, docs=limit)``
    (``rows`` 4 x ``limit``, more while one file's chunks fill them), no ``ChunkHit`` per row.

    ``fronts`` (one count per store, each at most ``limit``): the caller takes only that many of
    each store's first documents when every store has that many (the stores' fusion by turns,
    ``_fusion.even_turns``). Each store's list is then cut there, and only its rows that can
    place among those documents are re-scored (``_scored_within``); a store with fewer has every
    store's first ``limit`` documents made as without ``fronts``."""
    terms = forms.query_terms(db, query, kept)
    out: dict[str, dict[str, tuple[str, float]]] = {s: {} for s in stores}
    if terms:
        names = list(out)
        caps = None if fronts is None else dict(zip(names, fronts, strict=True))
        rows = 4 * limit
        while True:
            content, ranked, scored = _scored_per_store(db, names, terms, rows, kept, caps)
            _best_into(out, content, scored, wanted := caps or dict.fromkeys(names, limit))
            if caps is not None and any(len(out[store]) < cap for store, cap in caps.items()):
                # a store ran short: the others may place more than their turns (every row re-scored)
                out, wanted = {s: {} for s in names}, dict.fromkeys(names, limit)
                _best_into(out, content, _scored(db, terms, ranked, content, kept), wanted)
            # a long file's chunks can take every row ranked: a store short of documents, its rows cut, asks more
            if all(len(out[s]) >= wanted[s] or len(ranked[s]) < rows for s in names):
                break
            rows, out = rows * 4, {s: {} for s in names}
    for store, best in out.items():
        if not best:
            out[store] = documents_of(functools.partial(_fallback, db, store, query), limit)
    return out


def documents_of(fetch: Callable[[int], list[ChunkHit]], limit: int) -> dict[str, tuple[str, float]]:
    """``best_per_document`` of ``fetch(rows)``'s chunks, ``rows`` four times more while it fills with too few."""
    rows = 4 * limit
    while True:
        chunks = fetch(rows)
        best = best_per_document(((c.chunk_id, c.text, c.score) for c in chunks), limit)
        if len(best) >= limit or len(chunks) < rows:
            return best
        rows *= 4


def _best_into(
    out: dict[str, dict[str, tuple[str, float]]],
    content: ChunkRows,
    scored: dict[str, list[tuple[float, int]]],
    caps: dict[str, int],
) -> None:
    """``best_per_document`` of each store's ``scored`` rows into ``out``, ``caps[store]``
    documents at most, each row's document id kept beside it in ``content``; rows of one score
    taken in their chunk ids' order (``_in_fact_order``)."""
    get = content.get
    for store, rows in scored.items():
        best = out[store]
        cap = caps[store]
        if not cap:
            continue
        end = taken(best, rows, get, cap)
        if len(set(map(SCORE, itertools.islice(rows, end)))) < end:
            # Two rows of one score among those that could place: which of them place, and in
            # what order, is the chunk ids' (only these rows: sorting every row cost ~4% of a recall).
            best.clear()
            taken(best, in_fact_order(rows[:end], content), get, cap)


def best_per_document(chunks: Iterable[tuple[str, str, float]], limit: int) -> dict[str, tuple[str, float]]:
    """The first (best) chunk's text and score of each document, for the first ``limit``
    documents, from (chunk id, text, score) best first."""
    best: dict[str, tuple[str, float]] = {}
    for chunk, text, score in chunks:
        doc_id = document_id_of_chunk(chunk)
        if doc_id not in best:
            best[doc_id] = (text, score)
            if len(best) == limit:
                break
    return best


def _scored_per_store(
    db: IndexDB,
    stores: list[str],
    terms: Sequence[str],
    limit: int,
    kept: dict[Any, Any] | None,
    caps: dict[str, int] | None = None,
) -> tuple[ChunkRows, dict[str, list[tuple[int, float]]], dict[str, list[tuple[float, int]]]]:
    """The chunk rows read, each store's first ``limit`` rows as its own MATCH ranks them
    (``_ranked_per_store``, as (rowid, bm25)), and those rows re-scored by coverage, best first,
    as (score, rowid); with ``caps``, each store's re-scored rows only as far as its first
    ``caps[store]`` documents need (``_scored_within``)."""
    content = kept_rows(kept if kept is not None else {})
    ranked = _ranked_per_store(db, stores, terms, limit, content, kept)  # their chunk rows read
    if caps is None:
        return content, ranked, _scored(db, terms, ranked, content, kept)
    by_row = kept.setdefault(_COVERAGE, {}) if kept is not None else None
    scored = _scored_within(
        db.conn, terms, [(rows, caps[store]) for store, rows in ranked.items()], content, by_row
    )
    return content, ranked, dict(zip(ranked, _floor_scaled(db, terms, scored), strict=True))


def _scored(
    db: IndexDB,
    terms: Sequence[str],
    ranked: dict[str, list[tuple[int, float]]],
    content: ChunkRows,
    kept: dict[Any, Any] | None,
) -> dict[str, list[tuple[float, int]]]:
    """Every row of each store's ``ranked`` list re-scored by coverage, best first (score, rowid)."""
    by_row = kept.setdefault(_COVERAGE, {}) if kept is not None else None
    scored = scored_lists(
        db.conn, terms, list(ranked.values()), content, by_row=by_row, stored=content.tokens
    )
    return dict(zip(ranked, _floor_scaled(db, terms, scored), strict=True))


# The most coverage multiplies a bm25 score by (every term held): ``1 + COVERAGE_WEIGHT``, exactly
# the factor ``scored_lists`` works out for a full share.
_MOST_FACTOR = 1.0 + COVERAGE_WEIGHT


def _at_most(row: tuple[int, float]) -> float:
    """The best (lowest) score coverage can give a ranked (rowid, bm25) row."""
    return row[1] * _MOST_FACTOR


def _scored_within(
    conn: apsw.Connection,
    terms: Sequence[str],
    lists: Sequence[tuple[list[tuple[int, float]], int]],
    content: ChunkRows,
    by_row: dict[Any, Any] | None,
) -> list[list[tuple[float, int]]]:
    """``scored_lists`` of each (ranked rows, documents) pair's rows, cut where no later row can
    place among the first ``documents`` documents: the list's first documents are those of
    ``scored_lists`` of all its rows, in the same order, with the same scores.

    A ranked list is in bm25 order (lowest first, every score at most 0), and coverage multiplies
    a score by 1 to ``_MOST_FACTOR``: a row's re-scored value is never below ``_at_most(row)``
    (rounding is monotone), and no lower for a later row. So once the rows re-scored so far hold
    ``documents`` documents, the last of them at score ``bound``, a row whose ``_at_most`` is above
    ``bound`` sorts after it, as does every row after it: those rows are not re-scored (nor, for a
    first sight, tokenized). The first ``2 x documents`` rows are re-scored to find the bound, then
    the rows up to the cut, each step one ``scored_lists`` call for every list."""
    heads = [ranked[: 2 * docs] for ranked, docs in lists]
    scored = scored_lists(conn, terms, heads, content, by_row=by_row, stored=content.tokens)
    tails = []
    for (ranked, docs), head, mine in zip(lists, heads, scored, strict=True):
        bound = _bound(mine, content, docs)
        end = len(ranked) if bound is None else bisect.bisect_right(ranked, bound, len(head), key=_at_most)
        tails.append(ranked[len(head) : end])
    if any(tails):
        for mine, more in zip(
            scored,
            scored_lists(conn, terms, tails, content, by_row=by_row, stored=content.tokens),
            strict=True,
        ):
            if more:
                mine += more
                mine.sort()  # two sorted runs: one merge
    return scored


def _bound(scored: list[tuple[float, int]], content: ChunkRows, docs: int) -> float | None:
    """The score of the row that brings the ``docs``-th document among ``scored`` (score, rowid)
    rows in order (a row without its chunk row is no document, as in ``_best_into``); None when
    they hold fewer documents."""
    if docs <= 0:
        return None
    get = content.get
    seen: set[str] = set()
    for score, rowid in scored:
        found = get(rowid)
        if found is not None and found[3] not in seen:
            seen.add(found[3])
            if len(seen) == docs:
                return score
    return None


def _ranked_per_store(
    db: IndexDB,
    stores: list[str],
    terms: Sequence[str],
    limit: int,
    content: ChunkRows,
    kept: dict[Any, Any] | None,
) -> dict[str, list[tuple[int, float]]]:
    """Each store's first ``limit`` (rowid, bm25), as ``_ranked_words`` of its own MATCH gives them;
    the rows' (chunk_id, text, store) go to ``content`` when the shared ranking read them.

    The store filter is what a MATCH pays beyond the limit's (bm25 is the same with or without
    it: the store column weighs 0): at 10k two filtered MATCHes took 2.6 ms, one unfiltered 1.9.
    So when the stores searched hold most of the index, one MATCH without the filter ranks every
    row, and a store's rows in that shared list are its own first rows; only a store the list
    cut short (other stores' rows took the places) is asked again with the filter. A store
    among many (a home with several projects) is asked with the filter at once. One store alone
    (a REST or MCP recall of the global store) takes the shared MATCH too when it holds most of
    the index: at 10k facts in one store, 2.4 ms against 3.3 ms filtered.
    """
    if not _most_of_the_index(db, stores, kept):
        return {store: _ranked_read(db, terms, store, limit, content) for store in stores}
    # Twice the rows the stores take, four times a store's limit at least: a store alone takes
    # only its own rows, and the rows past its limit serve the run of its cut's score
    # (``_rest_of_run``). At 10k facts of ``bench/rest.py`` (a run of ~120 rows of one score at
    # every cut) 2 x limit left a third of the rows to rank again, 13.9 M instructions a recall
    # against 18.1 M; two stores' 1k recalls (4 x limit already) cost the same.
    wanted = limit * max(len(stores) * 2, 4)
    rows: dict[str, list[tuple[int, float]]] = {store: [] for store in stores}
    store_of = content.stores.get
    # Each searched store's list's ``append``, by store (``filing.file_rows``; other stores join as met)
    file_row: dict[str | None, Callable[[tuple[int, float]], object]] = {
        s: mine.append for s, mine in rows.items()
    }
    seen = 0
    # The ranking as ``_ranked_words`` gives it, taken a batch at a time and no further than every
    # store needs (each row taken is a Python tuple); each row's store comes from its chunk row.
    # The limit written into the statement: bound as a parameter, it made SQLite prepare the
    # statement again on every run (~30 k instructions), as a value that may change its plan.
    with db.cursor(
        f"SELECT rowid, {_bm25()} AS s FROM documents_words WHERE documents_words MATCH ? "
        f"ORDER BY s, rowid LIMIT {int(wanted)}",
        (_any_of(terms),),
    ) as cursor:
        lacking = limit * len(rows)
        tail: tuple[int, float] | None = None  # the last row fetched
        stopped: tuple[int, float] | None = None  # the first row fetched and not taken, if any
        while lacking:
            # As many rows as the stores still lack and an eighth more, ten more at the least (a store's
            # last rows come among rows of stores that have theirs; a quarter more was ~10 rows a 1k
            # recall past its need, ~3.6 k instructions each); a row without its chunk row kept is read.
            batch: list[tuple[int, float]] = list(itertools.islice(cursor, lacking + max(lacking // 8, 10)))
            if not batch:
                break
            seen += len(batch)
            tail = batch[-1]
            # Every row of a store searched goes to its list, a store's rows past its ``limit`` too
            # (cut below): a count and a test per row cost more than the rows a batch adds. A row
            # whose chunk row is not kept (no store) is read with the rest of the batch,
            # unless every store is full before it (the rest of the batch is then unused).
            at = file_rows(batch, file_row, store_of)
            if at < len(batch):
                if all(len(mine) >= limit for mine in rows.values()):
                    stopped = batch[at]
                else:
                    ids = [r[0] for r in batch]
                    read_missing(db, content, [r for r in ids if r not in content])
                    # a row still without one has no chunk row (the index changed under a
                    # caller's transaction): left out
                    into_stores(rows, batch[at:], list(map(store_of, ids[at:], repeat(""))))
            lacking = 0
            for mine in rows.values():
                if len(mine) >= limit:
                    # a store's first ``limit`` rows are its own MATCH's, with their last score's rows
                    del mine[tie_end(mine, limit) :]
                else:
                    lacking += limit - len(mine)
        # A full store's rows of its cut's score may go on past the rows taken: they are taken too
        # (``filing.take_tied``), and past the statement's limit from one more statement.
        if tail is not None and not lacking:
            rest = batch[batch.index(stopped) :] if stopped is not None else []
            fetched, tail = take_tied(db, content, rows, rest, cursor, tail)
            seen += fetched
    if tail is not None and seen >= wanted:
        _rest_of_run(db, content, terms, {s: m for s, m in rows.items() if len(m) >= limit}, tail)
    ran_out = seen < wanted  # every matching row of every store is in the list
    return {
        store: mine if len(mine) >= limit or ran_out else _ranked_read(db, terms, store, limit, content)
        for store, mine in rows.items()
    }


def _rest_of_run(
    db: IndexDB,
    content: ChunkRows,
    terms: Sequence[str],
    full: dict[str, list[tuple[int, float]]],
    tail: tuple[int, float],
) -> None:
    """The rows after ``tail`` (the last row the shared statement gave: its limit stopped there) of
    its score, appended to each list of ``full`` (stores with their ``limit`` rows) that ends on
    that score: rows of a cut's score go on past it (``ties.tie_end``).

    One statement for the rows of that score with a rowid past ``tail``'s (the order the shared
    statement gave them in), for every store: a store's own filtered MATCH (``_ranked_read``) took
    two statements, each ranking every row of the store, ~18 M instructions of a 10k REST recall
    of ``bench/rest.py``'s facts (one length, one vocabulary: a hundred rows of one score)."""
    if not any(mine[-1][1] == tail[1] for mine in full.values()):
        return  # every cut's rows of its score are in hand
    more = cast(
        "list[tuple[int, float]]",
        db.rows(
            f"SELECT rowid, {_bm25()} AS s FROM documents_words WHERE documents_words MATCH ? "
            "AND rowid > ? AND s = ? ORDER BY rowid",
            (_any_of(terms), tail[0], tail[1]),
        ),
    )
    file_tied(db, content, full, more)


def _ranked_read(
    db: IndexDB, terms: Sequence[str], store: str, limit: int, content: ChunkRows
) -> list[tuple[int, float]]:
    """One store's ``_ranked_words`` of its own MATCH, with the chunk rows it lacks read into ``content``."""
    ranked = _ranked_words(db, _words_match(terms, store), limit)
    read_content(db, content, [r for r, _ in ranked])
    return ranked


def _most_of_the_index(db: IndexDB, stores: Sequence[str], kept: dict[Any, Any] | None = None) -> bool:
    """True when ``stores`` hold at least half of the files the index knows; one store alone, at
    least three quarters (its share of the 2 x limit rows ranked must reach its limit)."""
    counts: dict[str, int] | None = kept.get(_STORE_COUNTS) if kept is not None else None
    if counts is None:
        counts = {str(r[0]): int(r[1]) for r in db.rows("SELECT resource_name, file_count FROM store_state")}
        if kept is not None:
            kept[_STORE_COUNTS] = counts
    mine, total = sum(counts.get(s, 0) for s in stores), sum(counts.values())
    return 4 * mine >= 3 * total if len(stores) == 1 else 2 * mine >= total


def search_chunks_many(
    db: IndexDB,
    stores: Sequence[str],
    query: str,
    limit: int,
    docs: int | None = None,
    kept: dict[Any, Any] | None = None,
) -> dict[str, list[ChunkHit]]:
    """``search_chunks`` of several stores: one word-index MATCH for all, the fallbacks per store.

    Each list is a prefix of that store's ``search_chunks`` (see ``search_words_many``, and there
    ``kept``)."""
    found = search_words_many(db, stores, query, limit, docs, kept)
    for store, hits in found.items():
        if not hits:
            found[store] = _fallback(db, store, query, limit)
    return found


def search_chunks(db: IndexDB, store: str, query: str, limit: int, within: Within = None) -> list[ChunkHit]:
    """Chunks of ``store`` matching ``query``, best first (scores: flipped bm25, higher is better).

    The word index answers first (stemmed words, CJK as bigrams; fast and well ranked). Queries
    it cannot answer (a fragment of a word, say) use the trigram index, where any substring of
    three or more characters matches; shorter terms fall back to an escaped LIKE scan.
    """
    return search_words(db, store, query, limit, within) or _fallback(db, store, query, limit, within)


def _fallback(db: IndexDB, store: str, query: str, limit: int, within: Within = None) -> list[ChunkHit]:
    """Trigram MATCH, then an escaped LIKE scan: for queries the word index cannot answer."""
    hits: list[ChunkHit] = []
    only, only_params = _within(within)
    plan = plan_query(query)
    # The chunk id orders rows of one score (and so which of them a limit keeps): the fact's own,
    # where the scan's order is the rowids', the order the rows were written in.
    if plan.fts_terms:
        rows = db.rows(
            f"SELECT chunk_id, {SHOWN}, bm25(documents_fts) FROM documents_fts "
            f"WHERE documents_fts MATCH ? AND resource_name = ?{only} ORDER BY 3, chunk_id LIMIT ?",
            (plan.match, store, *only_params, limit),
        )
        scale = floor_scale(
            db, "documents_fts", plan.fts_terms, [r[2] for r in rows], MOST_PER_FLOORED_TRIGRAM
        )
        hits = [ChunkHit(chunk_id=r[0], text=r[1], score=-float(r[2]) * scale) for r in rows]
    if not hits:
        hits = _near_words(db, store, plan.fts_terms, limit, within)
    if hits or not plan.short_terms:
        return hits
    clauses = " + ".join("(text LIKE ? ESCAPE '\\')" for _ in plan.short_terms)
    params: list[object] = [f"%{_escape_like(t)}%" for t in plan.short_terms]
    rows = db.rows(
        f"SELECT chunk_id, {SHOWN}, {clauses} AS n FROM documents_fts "
        f"WHERE resource_name = ? AND n > 0{only} ORDER BY n DESC, length(text) ASC, chunk_id LIMIT ?",
        (*params, store, *only_params, limit),
    )
    return [ChunkHit(chunk_id=r[0], text=r[1], score=float(r[2])) for r in rows]


def _near_words(
    db: IndexDB, store: str, terms: Sequence[str], limit: int, within: Within = None
) -> list[ChunkHit]:
    """Chunks holding a near spelling of a query word (``near.py``), the nearest first."""
    asked = near.NearQuery.of(terms, TRIGRAM)
    if asked is None:
        return []
    only, only_params = _within(within)
    rows = db.rows(
        f"SELECT chunk_id, {SHOWN}, bm25(documents_fts) FROM documents_fts "
        f"WHERE documents_fts MATCH ? AND resource_name = ?{only} ORDER BY 3, chunk_id "
        f"LIMIT {min(near.NEAR_ROWS, max(50, 2 * int(limit)))}",
        (asked.match, store, *only_params),
    )
    return [ChunkHit(chunk_id=c, text=t, score=n) for n, c, t in asked.scored(rows, limit)]
