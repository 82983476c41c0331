"""A keyword recall whose stores fuse by taking turns re-scores only the rows that can place
(``fts._scored_within``): each store's first documents as when every row is re-scored."""

from __future__ import annotations

import random
from pathlib import Path

import apsw
import pytest
from conftest import make_repo

from coffer_memory import MemoryService
from coffer_memory._fusion import disjoint_taken, even_turns, rrf_disjoint
from coffer_memory._index import fts, snapshot
from coffer_memory._index import reindex as reindex_module
from coffer_memory._index.coverage import COVERAGE_WEIGHT, scored_lists
from coffer_memory._index.fts import ChunkRows, best_documents
from coffer_memory._recall_rows import doc_rows
from coffer_memory._store.paths import GLOBAL_STORE

WORDS = ["deploy", "redis", "cache", "queue", "worker", "night", "backup", "token", "retry", "shard"]


def _first_documents(
    scored: list[tuple[float, int]], content: ChunkRows, docs: int
) -> list[tuple[str, str, float]]:
    """The first ``docs`` documents of re-scored (score, rowid) rows: id, best chunk text, score."""
    out: dict[str, tuple[str, str, float]] = {}
    for score, rowid in scored:
        found = content.get(rowid)
        if found is not None and found[3] not in out:
            out[found[3]] = (found[3], found[1], score)
            if len(out) == docs:
                break
    return list(out.values())


def test_rows_cut_where_none_can_place_give_the_same_first_documents() -> None:
    """Random ranked lists (ties in bm25, documents of several chunks, rows without a chunk row)
    and random terms: the cut lists' first documents are those of every row re-scored, and rows
    are left out (it fails when the cut is taken at a coverage factor below the largest)."""
    rng = random.Random(18)
    conn = apsw.Connection(":memory:")
    left_out = 0
    for trial in range(400):
        content = ChunkRows()
        rows = rng.randint(1, 60)
        for rowid in range(1, rows + 1):
            text = " ".join(rng.choices(WORDS, k=rng.randint(1, 8)))
            doc = f"d{rng.randint(1, max(1, rows // rng.choice([1, 2, 3])))}"
            if rng.random() > 0.05:  # a few rows without their chunk row
                content[rowid] = (f"global:{doc}:0", text, "global", doc)
        scores = [-round(rng.uniform(0.0, 8.0), rng.choice([0, 1, 3])) for _ in range(rows)]
        ranked = sorted(zip(range(1, rows + 1), scores, strict=True), key=lambda r: (r[1], r[0]))
        terms = rng.sample(WORDS, rng.randint(1, 5))
        docs = rng.randint(1, 8)
        full = scored_lists(conn, terms, [ranked], content)[0]
        (cut,) = fts._scored_within(conn, terms, [(ranked, docs)], content, {} if trial % 2 else None)
        assert _first_documents(cut, content, docs) == _first_documents(full, content, docs), (trial, terms)
        assert set(cut) <= set(full)
        left_out += len(full) - len(cut)
    assert left_out > 0


def test_the_cut_takes_the_largest_coverage_factor() -> None:
    """``_MOST_FACTOR`` is the factor ``scored_lists`` gives a row holding every term."""
    conn = apsw.Connection(":memory:")
    content = ChunkRows({1: ("global:a:0", "deploy redis cache", "global", "a")})
    ((score, _),) = scored_lists(conn, ["deploy", "redis", "cache"], [[(1, -1.0)]], content)[0:1][0]
    assert score == -1.0 * fts._MOST_FACTOR == -(1.0 + COVERAGE_WEIGHT)


def _home(tmp_home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch, project: int) -> MemoryService:
    """``project`` matching facts in the checkout's project store and twelve in the global store:
    three holding every term of ``QUERY``, nine one of them in a long text; and twenty that match
    nothing (so that no term is in half the rows, where bm25 floors its weight)."""
    monkeypatch.setattr(reindex_module, "RACY_NS", 0)
    svc = MemoryService(tmp_home)
    filler = " ".join(f"word{j}" for j in range(40))
    for i in range(3):
        svc.remember(f"deploy redis cache on the night shard {i}", title=f"all of it {i}", scope="global")
    for i in range(9):
        svc.remember(f"deploy step {i} of the release, {filler}", title=f"global {i}", scope="global")
    for i in range(20):
        svc.remember(f"lunch menu {i}", title=f"other {i}", scope="global")
    for i in range(project):
        svc.remember(f"deploy redis, project note {i}", title=f"project {i}", cwd=repo, scope="project")
    return svc


QUERY = "deploy redis cache"


@pytest.mark.parametrize("project", [0, 2, 6])
@pytest.mark.parametrize("limit", [1, 4, 10])
def test_a_recall_by_turns_equals_the_fusion_of_every_row(
    tmp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, project: int, limit: int
) -> None:
    """The hits are the stores' fusion of every candidate's first documents, with a project store
    holding none, fewer than its turns (then the global store places more than its turns: it
    fails when the short store is not noticed) and more."""
    repo = make_repo(tmp_path / "repo")
    with _home(tmp_home, repo, monkeypatch, project) as svc:
        result = svc.recall(QUERY, cwd=repo, mode="keyword", limit=limit)
        db = svc.index.retrieval.db
        stores = list(result.stores)
        found = best_documents(db, stores, QUERY, limit, {})
        docs = doc_rows(db, found, {})
        lists = [[(s, i) for i in found[s] if (s, i) in docs] for s in stores]
        assert [(h.store, h.id) for h in result.hits] == rrf_disjoint(lists, limit)
        assert [h.score for h in result.hits] == [found[h.store][h.id][1] for h in result.hits]
        turns = even_turns(len(stores), limit)
        if min(turns):
            cut = best_documents(db, stores, QUERY, limit, {}, turns)
            short = any(len(found[s]) < n for s, n in zip(stores, turns, strict=True))
            for store, n in zip(stores, turns, strict=True):
                expected = list(found[store].items())[: limit if short else n]
                assert list(cut[store].items()) == expected
            assert disjoint_taken([len(cut[s]) for s in stores], limit) == disjoint_taken(
                [len(found[s]) for s in stores], limit
            )


def test_rows_that_cannot_place_are_not_tokenized(
    tmp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three hits of the global store, of its twelve candidates: the fact holding every term first,
    found without tokenizing every candidate (all twelve were tokenized before). The chunks' stored
    tokens are taken away (an index that lacks them, as another program may leave it): with them
    no text is tokenized at all."""
    repo = make_repo(tmp_path / "repo")
    with _home(tmp_home, repo, monkeypatch, 0) as svc:
        svc.index.db.conn.execute("UPDATE chunks SET tokens = NULL")
        hits = svc.recall(QUERY, stores=[GLOBAL_STORE], mode="keyword", limit=3).hits
        assert sorted(h.title for h in hits) == ["all of it 0", "all of it 1", "all of it 2"]
        with snapshot.reading(svc.index.retrieval.db) as kept:
            tokenized = kept[fts._COVERAGE]
        assert 3 <= len(tokenized) < 12
