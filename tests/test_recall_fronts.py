"""A keyword recall of several stores reads documents rows only for the documents its fusion can
take (``_recall_rows.fused_fronts``): the front of each store's list that ``rrf_disjoint``
reaches, every candidate only when one of those has no row. The shared ranking gives each store its
own MATCH's first rows. And ``Reindexer.holding`` as a class."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest
from conftest import make_repo

from coffer_memory import MemoryService
from coffer_memory._index import fts, snapshot
from coffer_memory._index import reindex as reindex_module
from coffer_memory._index.fts import best_documents
from coffer_memory._index.holding import Holding
from coffer_memory._index.terms import keyword_terms
from coffer_memory._index.values import OutOfStep
from coffer_memory._recall_rows import KEPT_DOCS
from coffer_memory._store.paths import GLOBAL_STORE

QUERY = "deploy redis cache"


def _service(tmp_home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> MemoryService:
    """Eight matching facts in the checkout's project store and eight in the global store."""
    monkeypatch.setattr(reindex_module, "RACY_NS", 0)
    svc = MemoryService(tmp_home)
    for i in range(8):
        svc.remember(f"deploy redis note {i} cache", title=f"project {i}", cwd=repo, scope="project")
        svc.remember(f"deploy cache entry {i} redis", title=f"global {i}", scope="global")
    return svc


def test_a_recall_of_two_stores_reads_rows_only_for_the_documents_it_can_take(
    tmp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four hits of two stores take two documents of each, made of the documents rows read with
    their chunk rows (``chunk_rows.read_missing``): no documents query of their own (one for
    the four fronts before schema 12, one for every candidate before that); a recall over rows
    kept reads no row at all."""
    repo = make_repo(tmp_path / "repo")
    with _service(tmp_home, repo, monkeypatch) as svc:
        db = svc.index.retrieval.db
        statements: list[str] = []

        def trace(_cursor: object, sql: str, _bindings: object) -> bool:
            statements.append(sql)
            return True

        db.conn.exec_trace = trace
        result = svc.recall(QUERY, cwd=repo, mode="keyword", limit=4)
        assert [h.store for h in result.hits].count(GLOBAL_STORE) == 2 and len(result.hits) == 4
        assert not [sql for sql in statements if "FROM documents c" in sql]
        assert [sql for sql in statements if "FROM documents_fts_content f" in sql]
        with snapshot.reading(db) as kept:
            read = set(kept[KEPT_DOCS])
            found = best_documents(db, list(result.stores), QUERY, 4, kept)
        assert sum(map(len, found.values())) == 8  # four candidates in each store
        assert {(s, i) for s in found for i in found[s]} <= read  # each with its chunk row
        statements.clear()
        assert svc.recall(QUERY, cwd=repo, mode="keyword", limit=4).hits == result.hits
        assert not [sql for sql in statements if "FROM documents c" in sql or "documents_fts_content" in sql]
        db.conn.exec_trace = None
        with MemoryService(tmp_home) as fresh:  # a fresh process, no kept rows: the same hits
            assert fresh.recall(QUERY, cwd=repo, mode="keyword", limit=4).hits == result.hits


def test_a_front_document_without_its_row_is_the_index_out_of_step(
    tmp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When a document the fusion would take has no documents row, the read of its chunk rows
    says so (``OutOfStep``, one of ``DECODE_ERRORS``): the recall's caller then rebuilds the
    index from the files (test_chunk_orphans.py); it answered without the fact before."""
    repo = make_repo(tmp_path / "repo")
    with _service(tmp_home, repo, monkeypatch) as svc:
        first = svc.recall(QUERY, cwd=repo, mode="keyword", limit=4)
        gone = first.hits[0]
        retrieval = svc.index.retrieval
        db = retrieval.db
        paths = [svc.targets.paths(store) for store in first.stores]
        db.conn.execute("BEGIN")  # the row gone for this transaction only (no reconcile puts it back)
        try:
            db.conn.execute("DELETE FROM documents WHERE resource_name = ? AND id = ?", (gone.store, gone.id))
            with pytest.raises(OutOfStep, match="names no document"):
                retrieval.keyword_fused(paths, QUERY, 4)
        finally:
            db.conn.execute("ROLLBACK")


def test_holding_sets_the_flag_for_its_block_and_puts_back_what_was_there() -> None:
    held = threading.local()
    with Holding(held):
        assert held.on is True
        with Holding(held):
            assert held.on is True
        assert held.on is True  # the inner block put back the outer one's
    assert held.on is False
    with pytest.raises(KeyError), Holding(held):
        raise KeyError("x")
    assert held.on is False  # put back when the block fails too


@pytest.mark.parametrize("limit", [1, 3, 10, 40])
def test_the_shared_ranking_gives_each_store_its_own_first_rows(tmp_path: Path, limit: int) -> None:
    """Each store's list from the shared MATCH (``fts._ranked_per_store``) is exactly that store's
    own MATCH's first ``limit`` rows: no more (a batch files a store's rows past its limit, and they
    are cut), no fewer. The stores are unbalanced: the project store outranks global on most words."""
    words = ["deploy", "port", "postgres", "kafka", "retry", "owner", "config", "secrets", "timeout"]
    project = "project-01KB0000000000000000000000"
    r = random.Random(4)
    with MemoryService(home=tmp_path / "home") as svc:
        for i in range(120):
            store = project if i % 4 else GLOBAL_STORE
            text = " ".join(r.choice(words) for _ in range(r.randint(2, 9 if store == project else 3)))
            svc.remember(f"note {i}: {text}", title=f"note {i}", store=store)
        db = svc.index.db
        for query in [*words, "deploy postgres", "retry timeout kafka"]:
            terms = keyword_terms(query)
            shared = fts._ranked_per_store(db, [project, GLOBAL_STORE], terms, limit, fts.ChunkRows(), None)
            for store in (project, GLOBAL_STORE):
                alone = fts._ranked_words(db, fts._words_match(terms, store), limit)
                assert shared[store] == alone, (query, store)
