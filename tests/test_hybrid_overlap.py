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
from typing import Any

import apsw
import pytest
from conftest import example_embedder

from coffer_memory import MemoryService, MemoryStoreNotFound, Settings
from coffer_memory import _query_vectors as query_vectors
from coffer_memory import _retrieval as retrieval_module
from coffer_memory._index import vec
from coffer_memory._index.vec import Matrix
from coffer_memory._models import MemoryHit
from coffer_memory._retrieval import KnowledgeRetrieval
from coffer_memory._store.looks import Looks
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


def _two_stores(svc: MemoryService, repo: Path, n: int, step: int) -> None:
    """``n`` facts of two words each, alternating between the project and the global store, and
    a first hybrid recall (the reader, its worker and the matrices made)."""
    for i in range(n):
        svc.remember(
            f"{WORDS[i % 10]} {WORDS[(i * step) % 10]} note {i}",
            scope="project" if i % 2 else "global",
            cwd=repo,
        )
    svc.recall("warm", cwd=repo, mode="hybrid")


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
    thread has scanned one, and the answer is the calling thread's own scan's. (The keyword half
    here waits, at most 5 s, for the worker to take its store: the test's embedder and stores are
    so small that the calling thread could otherwise reach both stores first.)"""
    scanned: list[tuple[str, str]] = []
    caller_scanned, worker_took = threading.Event(), threading.Event()
    scan = vec.nearest
    keyword_lists = KnowledgeRetrieval._keyword_lists

    def nearest(matrix: Matrix, vector: Vector, k: int) -> list[tuple[str, float]]:
        name = threading.current_thread().name
        if name.startswith("coffer-recall"):
            worker_took.set()
            caller_scanned.wait(5)
        else:
            caller_scanned.set()
        scanned.append((name, matrix.ids[0]))
        return scan(matrix, vector, k)

    def keyword_half(self: KnowledgeRetrieval, *args: Any) -> list[list[MemoryHit]]:
        found = keyword_lists(self, *args)
        worker_took.wait(5)
        return found

    with MemoryService(settings=_settings(tmp_path)) as svc:
        _two_stores(svc, repo, 40, 3)
        monkeypatch.setattr(query_vectors, "nearest", nearest)
        monkeypatch.setattr(KnowledgeRetrieval, "_keyword_lists", keyword_half)
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


def test_the_query_embedding_begins_before_the_read_checks(
    plugin: _Plugin, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hybrid recall hands its query to the worker once its arguments pass, before it brings the
    stores' indexes up to date: each store's read check here waits (at most 5 s) for the
    worker's embedding to begin, and finds it begun. The answer is the one of a kept vector."""
    began = threading.Event()
    embed_batch = plugin.embedder.embed_batch

    def embedding(texts: Sequence[str]) -> list[list[float]]:
        if threading.current_thread().name.startswith("coffer-recall"):
            began.set()
        return list(embed_batch(texts))

    with MemoryService(settings=_settings(tmp_path)) as svc:
        _two_stores(svc, repo, 20, 7)
        refresh = svc.index.refresh
        seen: list[bool] = []

        def checked(store: str, looks: Looks | None = None) -> None:
            seen.append(began.wait(5))
            refresh(store, looks)

        monkeypatch.setattr(svc.index, "refresh", checked)
        monkeypatch.setattr(plugin.embedder, "embed_batch", embedding)
        svc.retrieval.clear_query_cache()
        first = svc.recall("deploy cache retry", cwd=repo, mode="hybrid")
        monkeypatch.setattr(svc.index, "refresh", refresh)
        again = svc.recall("deploy cache retry", cwd=repo, mode="hybrid")  # its vector kept
    assert seen == [True, True]
    assert not first.fallback
    assert [(h.store, h.id, h.score) for h in first.hits] == [(h.store, h.id, h.score) for h in again.hits]


def test_a_recall_that_fails_its_checks_lets_the_begun_embedding_go(
    plugin: _Plugin, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hybrid recall that begins embedding and then fails (its store's reconcile raises) raises
    as before, leaves the worker free (it scans nothing for it), and the next recalls answer.
    A recall naming an unknown store fails before it begins anything (a fresh home stays
    untouched: ``test_stores.py``)."""
    with MemoryService(settings=_settings(tmp_path)) as svc:
        fact = svc.remember("the cache is warmed before each deploy", scope="global").fact
        svc.recall("warm", stores=["global"], mode="hybrid")
        refresh = svc.index.refresh

        def failing(store: str, looks: Looks | None = None) -> None:
            raise OSError("disk gone")

        monkeypatch.setattr(svc.index, "refresh", failing)
        with pytest.raises(OSError):
            svc.recall("warmed cache", stores=["global"], mode="hybrid")
        monkeypatch.setattr(svc.index, "refresh", refresh)
        with pytest.raises(MemoryStoreNotFound):
            svc.recall("warmed cache", stores=["global", "nosuchstore"], mode="hybrid")
        res = svc.recall("warmed cache", stores=["global"], mode="hybrid")
        assert [h.id for h in res.hits] == [fact.id] and not res.fallback
        other = svc.recall("deploy", stores=["global"], mode="hybrid")
        assert [h.id for h in other.hits] == [fact.id] and not other.fallback


def test_no_read_transaction_is_open_while_a_hybrid_recall_waits_for_its_vector(
    plugin: _Plugin, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the worker embeds (here it blocks until the keyword half is over, as a remote
    embedder's HTTP call would), another connection writes and checkpoints the WAL with TRUNCATE:
    the recall holds no snapshot, so the checkpoint is not busy and the WAL shrinks to nothing.
    (A recall that kept its keyword half's read transaction open across the wait held the WAL.)"""
    keyword_done = threading.Event()
    keyword_lists = KnowledgeRetrieval._keyword_lists
    checkpoints: list[tuple[int, int]] = []

    def keyword_half(self: KnowledgeRetrieval, *args: Any) -> list[list[MemoryHit]]:
        try:
            return keyword_lists(self, *args)
        finally:
            keyword_done.set()

    with MemoryService(settings=_settings(tmp_path)) as svc:
        _two_stores(svc, repo, 20, 7)
        index = svc.settings.home / "index.db"
        embed_batch = plugin.embedder.embed_batch

        def blocking(texts: Sequence[str]) -> list[list[float]]:
            if threading.current_thread().name.startswith("coffer-recall"):
                assert keyword_done.wait(5)
                other = apsw.Connection(str(index))  # no busy timeout: a held snapshot is busy at once
                try:
                    other.execute(
                        "INSERT INTO kv (key, value) VALUES ('elsewhere', '1') "
                        "ON CONFLICT(key) DO UPDATE SET value = excluded.value"
                    )
                    row = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                    assert row is not None
                    checkpoints.append((row[0], Path(f"{index}-wal").stat().st_size))
                finally:
                    other.close()
            return list(embed_batch(texts))

        monkeypatch.setattr(KnowledgeRetrieval, "_keyword_lists", keyword_half)
        monkeypatch.setattr(plugin.embedder, "embed_batch", blocking)
        svc.retrieval.clear_query_cache()
        res = svc.recall("deploy cache retry", cwd=repo, mode="hybrid")
    assert not res.fallback and res.hits
    assert checkpoints == [(0, 0)]


def test_an_embedding_failing_after_a_commit_elsewhere_still_answers(
    plugin: _Plugin, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's embedding fails after another connection committed, while the recall holds
    its read transaction: the back-off (a write) waits for the transaction's end, so the recall
    answers from keyword and the back-off starts (written inside the stale snapshot, it would
    fail with SQLITE_BUSY_SNAPSHOT)."""
    keyword_done = threading.Event()
    keyword_lists = KnowledgeRetrieval._keyword_lists

    def keyword_half(self: KnowledgeRetrieval, *args: Any) -> list[list[MemoryHit]]:
        try:
            return keyword_lists(self, *args)
        finally:
            keyword_done.set()

    with MemoryService(settings=_settings(tmp_path)) as svc:
        fact = svc.remember("the cache is warmed before each deploy", scope="global").fact
        svc.recall("warm", stores=["global"], mode="hybrid")
        index = svc.settings.home / "index.db"

        def failing(texts: Sequence[str]) -> list[list[float]]:
            keyword_done.wait(5)
            other = apsw.Connection(str(index))
            try:
                other.execute(
                    "INSERT INTO kv (key, value) VALUES ('elsewhere', '1') "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value"
                )
            finally:
                other.close()
            raise RuntimeError("engine gone")

        monkeypatch.setattr(KnowledgeRetrieval, "_keyword_lists", keyword_half)
        monkeypatch.setattr(plugin.embedder, "embed_batch", failing)
        res = svc.recall("warmed cache", stores=["global"], mode="hybrid")
        assert [h.id for h in res.hits] == [fact.id] and res.fallback
        vectors = svc.retrieval.vectors
        assert vectors is not None and vectors.paused()


def test_a_hybrid_recall_makes_hits_only_of_the_vector_hits_its_fusion_keeps(
    plugin: _Plugin, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each store's vector half finds ``2 * limit`` documents; without a fact of an agent session
    in the store its fusion keeps ``limit``, and only the vector hits among those are made hits
    (their texts read): at most ``limit`` texts a store, where every vector hit's were read."""
    asked: list[int] = []
    texts = retrieval_module.chunk_texts

    def chunk_texts(db: object, ids: Sequence[str], kept: dict[Any, Any]) -> dict[str, str]:
        asked.append(len(ids))
        return texts(db, ids, kept)  # type: ignore[arg-type]

    with MemoryService(settings=_settings(tmp_path)) as svc:
        _two_stores(svc, repo, 80, 3)
        monkeypatch.setattr(retrieval_module, "chunk_texts", chunk_texts)
        for limit in (3, 5):
            asked.clear()
            svc.retrieval.clear_query_cache()
            res = svc.recall("deploy cache retry", cwd=repo, mode="hybrid", limit=limit)
            assert not res.fallback and len(res.hits) == limit
            assert asked and all(n <= 2 * limit for n in asked), asked


def test_the_scan_takes_the_matrices_the_read_checks_left(
    plugin: _Plugin, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedding begins before the read checks, but the scan takes each store's matrix after
    them: a fact written into the store's folder by hand is indexed by this recall's check and is
    in the matrix it scans, and the recall finds it as a fresh service does."""
    rows: list[int] = []
    scan = vec.nearest

    def nearest(matrix: Matrix, vector: Vector, k: int) -> list[tuple[str, float]]:
        rows.append(len(matrix.ids))
        return scan(matrix, vector, k)

    with MemoryService(settings=_settings(tmp_path)) as svc:
        for i in range(12):
            svc.remember(f"{WORDS[i % 10]} note {i}", scope="global")
        svc.recall("warm", stores=["global"], mode="hybrid")
        inbox = svc.targets.paths("global").inbox
        (inbox / "by-hand.md").write_text("shard backup replica written by hand\n")
        monkeypatch.setattr(query_vectors, "nearest", nearest)
        svc.retrieval.clear_query_cache()
        res = svc.recall("replica written by hand", stores=["global"], mode="hybrid", limit=3)
    assert rows == [13]
    assert not res.fallback and "written by hand" in res.hits[0].text
    with MemoryService(settings=_settings(tmp_path)) as fresh:
        again = fresh.recall("replica written by hand", stores=["global"], mode="hybrid", limit=3)
    assert [(h.id, h.score) for h in again.hits] == [(h.id, h.score) for h in res.hits]
