"""What a hybrid recall reads after its query embedding (issue #15 item 6): that part is on the
path the caller waits for, so the stores' vector hits are read in one read transaction, together,
and rows an unchanged index gave earlier recalls are taken from ``snapshot.reading``'s dict.
Every test compares a warm, long-lived service with what a fresh one answers."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Literal

import pytest
from conftest import example_embedder

from coffer_memory import MemoryService, RecallResult, Settings
from coffer_memory import _vector_rows as vector_rows
from coffer_memory._index import reindex as reindex_module
from coffer_memory._index.db import IndexDB
from coffer_memory._index.keys import store_scope
from coffer_memory._index.snapshot import reading
from coffer_memory.plugins import get_plugin_manager, hookimpl

WORDS = ["deploy", "rollback", "cache", "queue", "billing", "auth", "token", "retry", "backup", "shard"]
# Statements that read a hit's rows: documents (rows, session neighbours) and chunk texts.
ROW_READS = ("FROM documents c WHERE", "FROM documents d WHERE", "JOIN documents_fts f ON")


class _Plugin:
    def __init__(self) -> None:
        self.embedder = example_embedder()(48)

    @hookimpl
    def register_embedders(self, register: Callable[[str, object], None]) -> None:
        register("rows-hash", lambda _settings: self.embedder)


@pytest.fixture
def home(tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home whose 120 facts are split between a project and the global store, a third of the
    global ones in one agent session (so hits lend to their neighbours)."""
    monkeypatch.setattr(reindex_module, "RACY_NS", 0)
    registered = _Plugin()
    get_plugin_manager().register(registered, name="rows-hash-test")
    try:
        r = random.Random(5)
        with MemoryService(settings=_settings(tmp_path / "home")) as svc:
            for i in range(120):
                text = " ".join(r.choices(WORDS, k=r.randint(2, 8))) + f" note {i}"
                scope: Literal["global", "project"] = "global" if i % 2 else "project"
                session = "s1" if scope == "global" and i % 3 == 0 else None
                svc.remember(text, scope=scope, cwd=repo, origin_session_id=session)
        yield tmp_path / "home"
    finally:
        get_plugin_manager().unregister(name="rows-hash-test")


def _settings(home: Path) -> Settings:
    return Settings.load(
        home, embedding={"provider": "rows-hash"}, memory={"retrieval_modes": ["keyword", "vector", "hybrid"]}
    )


def _hits(result: RecallResult) -> list[tuple[object, ...]]:
    return [(h.id, h.text, h.score, h.source, h.time, h.store, h.path, h.title) for h in result.hits]


def _row_reads(svc: MemoryService, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[object]]]:
    """The row-reading statements ``svc``'s connections run from now on, with their values."""
    seen: list[tuple[str, list[object]]] = []
    rows = IndexDB.rows

    def counted(self: IndexDB, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        if any(part in sql for part in ROW_READS):
            seen.append((sql, list(params)))
        return rows(self, sql, params)

    monkeypatch.setattr(IndexDB, "rows", counted)
    return seen


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
def test_a_repeated_recall_reads_no_hit_rows_again(
    home: Path, repo: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second recall of a question on an unchanged index takes its hits' rows, texts and
    session neighbours from what the first read, and answers the same as a fresh service."""
    queries = ("deploy cache", "billing retry token", "shard backup")
    with MemoryService(settings=_settings(home)) as svc:
        first = [_hits(svc.recall(q, cwd=repo, mode=mode, limit=8)) for q in queries]
        reads = _row_reads(svc, monkeypatch)
        again = [_hits(svc.recall(q, cwd=repo, mode=mode, limit=8)) for q in queries]
        assert [sql for sql, _ in reads] == []
    assert again == first
    with MemoryService(settings=_settings(home)) as fresh:
        assert [_hits(fresh.recall(q, cwd=repo, mode=mode, limit=8)) for q in queries] == first


def test_a_hybrid_recall_reads_its_stores_vector_rows_together(
    home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hybrid recall over two stores reads both stores' vector hits' texts in one statement."""
    with MemoryService(settings=_settings(home)) as svc:
        svc.recall("auth", cwd=repo, mode="hybrid", limit=8)  # the reconcile, the matrices
        reads = _row_reads(svc, monkeypatch)
        result = svc.recall("queue rollback", cwd=repo, mode="hybrid", limit=8)
        stores = {h.store for h in result.hits}
    assert len(stores) == 2 and not result.fallback
    scopes = {store_scope(store) for store in stores}
    texts = [
        {str(v).split(":")[0] for v in values} for sql, values in reads if "JOIN documents_fts f ON" in sql
    ]
    assert texts and texts[0] == scopes


def test_a_hand_edit_reaches_the_next_hybrid_recall(home: Path, repo: Path) -> None:
    """A kept text is never served after its fact's file changed: the edited fact's new text
    comes back at once, as a fresh service answers."""
    with MemoryService(settings=_settings(home)) as svc:
        before = svc.recall("billing token", cwd=repo, mode="hybrid", limit=5)
        path = before.hits[0].path
        assert path is not None
        path.write_text(path.read_text().replace("billing", "billing invoice"))
        after = svc.recall("billing token", cwd=repo, mode="hybrid", limit=5)
        assert any("billing invoice" in h.text for h in after.hits)
    with MemoryService(settings=_settings(home)) as fresh:
        assert _hits(fresh.recall("billing token", cwd=repo, mode="hybrid", limit=5)) == _hits(after)


def test_kept_texts_are_bounded_and_still_answer(
    home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``TEXTS_KEPT`` the kept texts are emptied first, and every text asked is given."""
    monkeypatch.setattr(vector_rows, "TEXTS_KEPT", 3)
    with MemoryService(settings=_settings(home)) as svc:
        svc.recall("auth", cwd=repo, mode="hybrid")
        db = svc.index.retrieval.db
        ids = [str(r[0]) for r in db.rows("SELECT id FROM chunks ORDER BY id LIMIT 5")]
        with reading(db) as kept:
            assert set(vector_rows.chunk_texts(db, ids[:2], kept)) == set(ids[:2])
            got = vector_rows.chunk_texts(db, [*ids[2:], "missing:0"], kept)
            assert set(got) == set(ids[2:]) and len(kept[vector_rows.KEPT_TEXTS]) <= 4
            assert set(vector_rows.chunk_texts(db, ids, kept)) == set(ids)
