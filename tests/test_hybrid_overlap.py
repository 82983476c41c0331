"""Hybrid recall embeds its query on the retrieval's worker thread while the calling thread runs
the keyword half, and the worker scans the stores' vectors once the query vector is there
(issue #15 item 6): the same answers as the calling thread's own scan, the thread's end with
the service, and an embedder failing on the worker."""

from __future__ import annotations

import _thread
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from conftest import example_embedder

from coffer_memory import MemoryService, Settings
from coffer_memory import _query_vectors as query_vectors
from coffer_memory._index import vec
from coffer_memory._index.vec import Matrix
from coffer_memory._retrieval import KnowledgeRetrieval
from coffer_memory.plugins import get_plugin_manager, hookimpl
from coffer_memory.plugins.hookspecs import Vector

WORDS = ["deploy", "rollback", "cache", "queue", "billing", "auth", "token", "retry", "backup", "shard"]


class _Hash(example_embedder()):  # type: ignore[misc]
    """The docs' example embedder (hashed words, 48-d), failing while ``broken`` is set."""

    def __init__(self) -> None:
        super().__init__(48)
        self.broken = False

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        if self.broken:
            raise RuntimeError("engine gone")
        return list(super().embed_batch(texts))


class _Plugin:
    def __init__(self) -> None:
        self.embedder = _Hash()

    @hookimpl
    def register_embedders(self, register: Callable[[str, object], None]) -> None:
        register("overlap-hash", lambda _settings: self.embedder)


@pytest.fixture
def plugin() -> Iterator[_Plugin]:
    registered = _Plugin()
    get_plugin_manager().register(registered, name="overlap-hash-test")
    try:
        yield registered
    finally:
        get_plugin_manager().unregister(name="overlap-hash-test")


def _settings(tmp_path: Path) -> Settings:
    return Settings.load(
        tmp_path / "home",
        embedding={"provider": "overlap-hash"},
        memory={"retrieval_modes": ["keyword", "vector", "hybrid"]},
    )


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("coffer-recall")]


def test_the_worker_scan_answers_as_the_calling_threads_scan(
    plugin: _Plugin, tmp_path: Path, repo: Path
) -> None:
    """The first recall of a query embeds and scans on the worker; the second finds its vector
    kept and scans on the calling thread: the same hits with the same scores, in two stores."""
    r = random.Random(3)
    with MemoryService(settings=_settings(tmp_path)) as svc:
        for i in range(150):
            text = " ".join(r.choices(WORDS, k=r.randint(2, 8))) + f" note {i}"
            svc.remember(text, scope="project" if i % 2 else "global", cwd=repo)
        for query in ("deploy cache", "billing retry token", "shard", "replica backup auth queue"):
            for limit in (1, 10, 25):
                svc.retrieval.clear_query_cache()
                first = svc.recall(query, cwd=repo, mode="hybrid", limit=limit)
                again = svc.recall(query, cwd=repo, mode="hybrid", limit=limit)
                assert not first.fallback and len(first.stores) == 2
                assert [(h.store, h.id, h.score) for h in first.hits] == [
                    (h.store, h.id, h.score) for h in again.hits
                ]


def test_the_calling_thread_scans_a_store_beside_the_worker(
    plugin: _Plugin, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the vector is there the worker scans the first store and the calling thread, its
    keyword half done, the last: the worker's scan here waits (at most 5 s) until the calling
    thread has scanned one, and the answer is the calling thread's own scan's."""
    scanned: list[tuple[str, str]] = []
    caller_scanned = threading.Event()
    scan = vec.nearest

    def nearest(matrix: Matrix, vector: Vector, k: int) -> list[tuple[str, float]]:
        name = threading.current_thread().name
        if name.startswith("coffer-recall"):
            caller_scanned.wait(5)
        else:
            caller_scanned.set()
        scanned.append((name, matrix.ids[0]))
        return scan(matrix, vector, k)

    with MemoryService(settings=_settings(tmp_path)) as svc:
        for i in range(40):
            svc.remember(
                f"{WORDS[i % 10]} {WORDS[(i * 3) % 10]} note {i}",
                scope="project" if i % 2 else "global",
                cwd=repo,
            )
        svc.recall("warm", cwd=repo, mode="hybrid")
        monkeypatch.setattr(query_vectors, "nearest", nearest)
        svc.retrieval.clear_query_cache()
        first = svc.recall("deploy cache retry", cwd=repo, mode="hybrid")
        monkeypatch.setattr(query_vectors, "nearest", scan)
        again = svc.recall("deploy cache retry", cwd=repo, mode="hybrid")  # kept vector: one thread
    assert sorted(name.startswith("coffer-recall") for name, _ in scanned) == [False, True]
    assert len({first_id for _, first_id in scanned}) == 2  # two stores, one each
    assert [(h.store, h.id, h.score) for h in first.hits] == [(h.store, h.id, h.score) for h in again.hits]


def test_the_worker_thread_ends_with_the_service(plugin: _Plugin, tmp_path: Path) -> None:
    """Recalls from two threads start a worker each; closing the service joins them all."""
    svc = MemoryService(settings=_settings(tmp_path))
    svc.remember("the cache is warmed before each deploy", scope="global")
    before = set(_workers())
    svc.recall("cache deploy", stores=["global"], mode="hybrid")
    other = threading.Thread(target=lambda: svc.recall("warm deploy", stores=["global"], mode="hybrid"))
    other.start()
    other.join()
    assert len(set(_workers()) - before) == 2
    svc.close()
    assert set(_workers()) <= before


def test_an_embedder_failing_on_the_worker_falls_back_then_recovers(plugin: _Plugin, tmp_path: Path) -> None:
    """The worker's exception reaches the recall (keyword answers, fallback=True, the back-off
    starts) and the worker takes the next query when the embedder works again."""
    with MemoryService(settings=_settings(tmp_path)) as svc:
        fact = svc.remember("the cache is warmed before each deploy", scope="global").fact
        plugin.embedder.broken = True
        res = svc.recall("warmed cache", stores=["global"], mode="hybrid")
        assert [h.id for h in res.hits] == [fact.id] and res.fallback
        vectors = svc.retrieval.vectors
        assert vectors is not None and vectors.paused()
        plugin.embedder.broken = False
        vectors.resume()
        res = svc.recall("warmed cache", stores=["global"], mode="hybrid")
        assert [h.id for h in res.hits] == [fact.id] and not res.fallback


def test_a_new_thread_takes_over_the_reader_of_a_finished_one(plugin: _Plugin, tmp_path: Path) -> None:
    """A recall on a thread that starts after another ended uses that thread's reader: its
    connection, its kept query vectors and its worker (an MCP server's tool calls run on threads
    that anyio retires when idle)."""
    before = set(_workers())
    done = threading.Event()
    seen: dict[str, object] = {}

    def first() -> None:
        svc.recall("cache deploy", stores=["global"], mode="hybrid")
        seen["first"] = svc.retrieval
        done.wait()

    def second() -> None:
        started.set()
        finished.wait()
        res = svc.recall("cache deploy", stores=["global"], mode="hybrid")
        seen["second"], seen["fallback"] = svc.retrieval, res.fallback

    with MemoryService(settings=_settings(tmp_path)) as svc:
        svc.remember("the cache is warmed before each deploy", scope="global")
        started, finished = threading.Event(), threading.Event()
        one = threading.Thread(target=first)
        one.start()
        two = threading.Thread(target=second)  # started while the first is alive: another ident
        two.start()
        started.wait()
        done.set()
        one.join()
        finished.set()
        two.join()
        assert seen["second"] is seen["first"] and seen["fallback"] is False
        assert len(set(_workers()) - before) == 1


def test_a_live_thread_that_threading_does_not_know_keeps_its_reader(tmp_path: Path) -> None:
    """A thread started by ``_thread`` (or by C code calling in) is missing from
    ``threading.enumerate()``: its reader was taken for a dead thread's, so another thread shared its
    connection, and a third closed it, while it still ran recalls."""
    seen: dict[str, object] = {}
    ready = {name: threading.Event() for name in ("a", "b")}
    ended = {name: threading.Event() for name in ("a", "b")}
    go = threading.Event()

    def foreign(name: str) -> None:
        try:
            svc.recall("cache deploy", stores=["global"])
            seen[name] = svc.retrieval
            ready[name].set()
            go.wait()
            seen[f"{name} later"] = svc.retrieval
            seen[f"{name} hits"] = len(svc.recall("cache deploy", stores=["global"]).hits)
        finally:
            ended[name].set()

    def other() -> None:
        svc.recall("cache deploy", stores=["global"])
        seen["other"] = svc.retrieval

    with MemoryService(settings=Settings.load(tmp_path / "home")) as svc:
        svc.remember("the cache is warmed before each deploy", scope="global")
        for name in ("a", "b"):
            _thread.start_new_thread(foreign, (name,))
            ready[name].wait()
        one = threading.Thread(target=other)
        one.start()
        one.join()
        go.set()
        assert seen["other"] is not seen["a"] and seen["other"] is not seen["b"]
        for name in ("a", "b"):
            ended[name].wait()
            assert seen[f"{name} later"] is seen[name] and seen[f"{name} hits"] == 1


def test_close_while_another_thread_is_inside_a_recall(tmp_path: Path) -> None:
    """``close`` met a reader connection busy in another thread's statement: apsw refused to close
    it (ThreadingViolationError), and ``close`` raised before releasing the rest (the writer, the
    inotify fds). Now that reader stays with its thread, the recall ends normally, and the next
    ``close`` closes it. (``close`` first waits for running calls: here it is told not to wait.)"""
    inside, release = threading.Event(), threading.Event()
    found: list[int] = []

    def recall() -> None:
        reader = svc.retrieval

        def pause() -> int:  # a statement in flight, held still (SQLite calls this as it steps)
            inside.set()
            release.wait()
            return 0

        reader.db.conn.set_progress_handler(pause, 1)
        found.append(len(svc.recall("cache deploy", stores=["global"]).hits))
        reader.db.conn.set_progress_handler(None)
        seen["reader"] = reader

    seen: dict[str, object] = {}
    svc = MemoryService(settings=Settings.load(tmp_path / "home"))
    svc.remember("the cache is warmed before each deploy", scope="global")
    one = threading.Thread(target=recall)
    one.start()
    inside.wait()
    try:
        svc.close(timeout=0)
        assert not svc.index.is_open
    finally:
        release.set()
        one.join()
    assert found == [1]
    svc.close()
    reader = seen["reader"]
    assert isinstance(reader, KnowledgeRetrieval) and reader.db.closed
