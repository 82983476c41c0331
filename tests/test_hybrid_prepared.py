"""A hybrid recall prepares its query on the calling thread (the embedder's optional
``prepare_query``: the Python part of ``embed_query``) and hands only the rest to its worker,
which otherwise waited for the GIL the calling thread's checks held (issue #15 item 6)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import embedder_plugin, example_embedder

from coffer_memory import MemoryService, Settings
from coffer_memory.plugins.hookspecs import Vector

WORDS = ["deploy", "rollback", "cache", "queue", "billing", "auth", "token", "retry", "backup", "shard"]


class _Prepared(example_embedder()):  # type: ignore[misc]
    """The docs' example embedder (hashed words, 48-d) with ``embed_query`` and a
    ``prepare_query`` that behaves as ``mode`` says, noting the thread of each step."""

    def __init__(self) -> None:
        super().__init__(48)
        self.mode = "prepare"  # or "decline" (None), "raise", "not callable"
        self.steps: list[tuple[str, str, str]] = []  # (step, query, thread name)

    def _note(self, step: str, query: str) -> None:
        self.steps.append((step, query, threading.current_thread().name))

    def embed_query(self, text: str) -> Vector:
        self._note("embed_query", text)
        return list(self.embed_batch([text])[0])

    def prepare_query(self, text: str) -> object:
        self._note("prepare", text)
        if self.mode == "raise":
            raise RuntimeError("tokenizer gone")
        if self.mode == "decline":
            return None
        if self.mode == "not callable":
            return "a vector, not a call"
        row = list(self.embed_batch([text])[0])

        def finish() -> Vector:
            self._note("finish", text)
            return row

        return finish


@pytest.fixture
def embedder() -> Iterator[_Prepared]:
    made = _Prepared()
    with embedder_plugin("prepared-hash", made):
        yield made


def _service(tmp_path: Path, repo: Path) -> MemoryService:
    svc = MemoryService(
        settings=Settings.load(
            tmp_path / "home",
            embedding={"provider": "prepared-hash"},
            memory={"retrieval_modes": ["keyword", "vector", "hybrid"]},
        )
    )
    for i in range(30):
        svc.remember(
            f"{WORDS[i % 10]} {WORDS[(i * 3) % 10]} note {i}",
            scope="project" if i % 2 else "global",
            cwd=repo,
        )
    return svc


def _answer(svc: MemoryService, repo: Path, query: str) -> list[tuple[str, str, float]]:
    svc.retrieval.clear_query_cache()
    result = svc.recall(query, cwd=repo, mode="hybrid")
    assert not result.fallback and len(result.stores) == 2
    return [(h.store, h.id, h.score) for h in result.hits]


def test_the_calling_thread_prepares_and_the_worker_finishes(
    embedder: _Prepared, tmp_path: Path, repo: Path
) -> None:
    """The query is prepared on the recalling thread and finished on the worker, without an
    ``embed_query``; the answer is the one ``embed_query``'s vector gives."""
    with _service(tmp_path, repo) as svc:
        embedder.mode = "decline"
        expected = _answer(svc, repo, "deploy cache retry")
        embedder.mode = "prepare"
        embedder.steps.clear()
        got = _answer(svc, repo, "deploy cache retry")
    caller = threading.current_thread().name
    steps = [
        (step, thread == caller) for step, query, thread in embedder.steps if query == "deploy cache retry"
    ]
    assert steps == [("prepare", True), ("finish", False)]
    assert all(thread.startswith("coffer-recall") for step, _, thread in embedder.steps if step == "finish")
    assert got == expected


@pytest.mark.parametrize("mode", ["decline", "raise", "not callable"])
def test_a_query_not_prepared_is_embedded_on_the_worker(
    embedder: _Prepared, tmp_path: Path, repo: Path, mode: str
) -> None:
    """``prepare_query`` giving None, raising, or giving something that is not a call: the worker
    calls ``embed_query`` as it did before, and the recall answers from the vectors."""
    with _service(tmp_path, repo) as svc:
        embedder.mode = mode
        embedder.steps.clear()
        _answer(svc, repo, "billing token")
    ran = [
        (step, thread.startswith("coffer-recall"))
        for step, query, thread in embedder.steps
        if query == "billing token"
    ]
    assert ran == [("prepare", False), ("embed_query", True)]


def test_an_embedder_without_prepare_query_is_asked_for_embed_query(tmp_path: Path, repo: Path) -> None:
    """The protocol's plain embedder (``embed_batch`` only) still answers hybrid recalls."""
    with embedder_plugin("prepared-hash", example_embedder()(48)), _service(tmp_path, repo) as svc:
        assert _answer(svc, repo, "shard backup")
