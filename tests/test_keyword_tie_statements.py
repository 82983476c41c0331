"""A keyword recall whose cut falls inside a long run of rows of one score (every matching fact the
same length, holding the query's word once: bm25 gives them all one score) completes that run with
one more unfiltered statement over the rest of the run's rows, not a filtered MATCH of its own
store (two statements, each ranking every row of the store: what made a REST recall of
``bench/rest.py``'s corpus cost four times what it cost before ties were kept whole)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coffer_memory import MemoryService
from coffer_memory._index import fts
from coffer_memory._index import reindex as reindex_module
from coffer_memory._index.chunk_rows import ChunkRows
from coffer_memory._index.terms import keyword_terms
from coffer_memory._index.ties import tie_end
from coffer_memory._store.paths import GLOBAL_STORE

TIED = 100  # more than the shared statement's 4 x 4 x limit rows at limit 3


def _ranking_statements(svc: MemoryService, query: str, limit: int) -> tuple[list[Any], list[str]]:
    """The hits of a keyword recall of the global store and the word-index MATCHes it ran, each
    as its MATCH expression (a filtered one names the store: ``store : "..."``)."""
    db = svc.index.retrieval.db
    matches: list[str] = []

    def trace(_cursor: object, sql: str, bindings: Any) -> bool:
        if "documents_words MATCH" in sql and "bm25(" in sql:
            matches.append(str(bindings[0]))
        return True

    db.conn.exec_trace = trace
    try:
        hits = svc.recall(query, stores=[GLOBAL_STORE], mode="keyword", limit=limit).hits
    finally:
        db.conn.exec_trace = None
    return list(hits), matches


def test_a_cut_inside_a_long_tie_asks_one_more_unfiltered_statement(
    tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reindex_module, "RACY_NS", 0)
    with MemoryService(tmp_home) as svc:
        for n in range(TIED):
            svc.remember(f"the lighthouse keeper logged tide {n:03d}", store=GLOBAL_STORE)
        hits, matches = _ranking_statements(svc, "lighthouse", 3)
        assert len(hits) == 3
        # the shared statement and one for the rest of the tied rows, neither filtered by store
        assert len(matches) == 2, matches
        assert not [m for m in matches if m.startswith("store :")], matches
        # the same list the store's own MATCH gives, cut through its last score's rows
        db = svc.index.db
        terms = keyword_terms("lighthouse")
        shared = fts._ranked_per_store(db, [GLOBAL_STORE], terms, 12, ChunkRows(), None)
        alone = fts._ranked_words(db, fts._words_match(terms, GLOBAL_STORE), 12)
        assert shared[GLOBAL_STORE] == alone
        assert len(alone) == TIED
        every = db.rows(
            f"SELECT rowid, {fts._bm25()} AS s FROM documents_words WHERE documents_words MATCH ? "
            "ORDER BY s, rowid",
            (fts._words_match(terms, GLOBAL_STORE),),
        )
        assert alone == every[: tie_end(every, 12)]


def test_the_rest_of_a_run_goes_to_every_store_it_ties(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two stores whose cuts fall in one run of rows of one score past the shared statement's
    limit: the one more statement's rows go to each store's list, each the same as that store's
    own MATCH gives (its first ``limit`` rows and every row of the last one's score)."""
    monkeypatch.setattr(reindex_module, "RACY_NS", 0)
    project = "project-01KB0000000000000000000000"
    with MemoryService(home=tmp_path / "home") as svc:
        for n in range(70):
            for store in (project, GLOBAL_STORE):
                svc.remember(f"the lighthouse keeper logged tide {n:03d}", store=store)
        db = svc.index.db
        terms = keyword_terms("lighthouse")
        statements: list[str] = []

        def trace(_cursor: object, sql: str, _bindings: Any) -> bool:
            if "documents_words MATCH" in sql and "bm25(" in sql:
                statements.append(sql)
            return True

        db.conn.exec_trace = trace
        try:
            shared = fts._ranked_per_store(db, [project, GLOBAL_STORE], terms, 12, ChunkRows(), None)
        finally:
            db.conn.exec_trace = None
        assert len(statements) == 2, statements  # 48 rows asked of 140 tied: the rest in one more
        for store in (project, GLOBAL_STORE):
            alone = fts._ranked_words(db, fts._words_match(terms, store), 12)
            assert len(alone) == 70
            assert shared[store] == alone, store
