"""Reads run beside each other and beside writes: reader connections per thread, no lock on reads."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import coffer_memory._indexing
from coffer_memory import AsyncMemoryService, MemoryService, RecallResult, Settings
from coffer_memory.plugins import GrepBackend, GrepMatch, get_grep_backend, hookimpl
from coffer_memory.plugins.manager import get_plugin_manager

# Bounds a wait that only runs out when the code under test is broken (a deadlock, a lost signal).
STUCK = 30.0


class GatedGrep:
    """The built-in Python grep, held at its start until the test releases it."""

    name = "gated"
    priority = -1

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.done = threading.Event()

    def available(self) -> bool:
        return True

    def search(self, folders: Sequence[Path], patterns: Sequence[str], *, max_lines: int) -> list[GrepMatch]:
        self.started.set()
        self.release.wait(STUCK)
        try:
            return get_grep_backend("python").search(folders, patterns, max_lines=max_lines)
        finally:
            self.done.set()


class _GatePlugin:
    def __init__(self, backend: GrepBackend) -> None:
        self.backend = backend

    @hookimpl
    def register_grep_backends(self, register: Any) -> None:
        register(self.backend)


@pytest.fixture
def gated() -> Iterator[GatedGrep]:
    """A grep backend plugin registered in this process (and removed again after the test)."""
    backend = GatedGrep()
    pm = get_plugin_manager()
    pm.register(_GatePlugin(backend), name="gated-grep")
    yield backend
    backend.release.set()
    pm.unregister(name="gated-grep")


def test_a_write_completes_while_a_grep_recall_is_scanning(tmp_home: Path, gated: GatedGrep) -> None:
    with MemoryService(settings=Settings.load(tmp_home, grep_backend="gated")) as svc:
        svc.remember("the alpha deploy runs on fridays", store="global")
        found: list[RecallResult] = []
        reader = threading.Thread(
            target=lambda: found.append(svc.recall("alpha", stores=["global"], mode="grep"))
        )
        reader.start()
        assert gated.started.wait(STUCK)
        # Held a lock while scanning, the grep would keep this write waiting until its gate timed out.
        during = svc.remember("alpha is written while the grep scans", store="global")
        assert not gated.done.is_set(), "the write waited for the grep to finish"
        gated.release.set()
        reader.join(STUCK)
        assert not reader.is_alive() and len(found) == 1 and found[0].hits
        assert svc.get_fact(during.fact.id, store="global").fact.body.startswith("alpha is written")


def test_threads_recall_and_remember_at_once(svc: MemoryService) -> None:
    svc.remember("seed fact about parsers", store="global")
    threads, rounds = 4, 12
    start = threading.Barrier(threads)
    written: list[str] = []
    errors: list[BaseException] = []
    guard = threading.Lock()

    def work(n: int) -> None:
        try:
            start.wait(STUCK)
            for i in range(rounds):
                r = svc.remember(f"worker {n} note {i} about parsers", store="global")
                with guard:
                    written.append(r.fact.id)
                for mode in ("keyword", "grep"):
                    assert svc.recall("parsers", stores=["global"], mode=mode, limit=5).hits
                assert svc.get_fact(r.fact.id, store="global").fact.id == r.fact.id
                svc.list_facts(store="global", limit=10)
                svc.stores()
        except BaseException as exc:  # collected: a failure in a worker must fail the test
            traceback.print_exc()  # the worker's stack, or the failure says only its type
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(STUCK * 4)
    assert not errors, errors
    assert len(written) == threads * rounds
    listed: set[str] = set()
    cursor = None
    while True:
        page = svc.list_facts(store="global", limit=50, cursor=cursor)
        listed |= {f.fact.id for f in page.items}
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert set(written) <= listed
    assert svc.store_info("global").fact_count == threads * rounds + 1
    hits = svc.recall("worker 3 note 11", stores=["global"], mode="grep", limit=50).hits
    assert any("worker 3 note 11" in h.text for h in hits)


def test_reads_on_other_threads_use_their_own_connections(svc: MemoryService) -> None:
    svc.remember("one fact", store="global")
    here = svc.index.retrieval
    there: list[Any] = []
    t = threading.Thread(target=lambda: there.append(svc.index.retrieval))
    t.start()
    t.join(STUCK)
    assert svc.index.retrieval is here
    assert there[0] is not here and there[0].db.conn is not here.db.conn
    assert here.db.conn is not svc.index.db.conn  # the writer's connection is never a reader's


@contextlib.contextmanager
def a_scan_waiting_for_the_lock(tmp_home: Path) -> Iterator[MemoryService]:
    """A service over 3 facts whose lock another thread holds while the due background full
    scan waits for it (``scanning()`` is true) until the block ends. The scan falls due at once
    whether the inotify feed vouches for the store (its safety net) or not."""
    settings = Settings.load(
        tmp_home,
        reconcile_full_scan_max_files=1,
        reconcile_full_scan_seconds=0.0,
        reconcile_watch_full_scan_seconds=0.0,
    )
    with MemoryService(settings=settings) as svc:
        for i in range(3):
            svc.remember(f"scan fact {i}", store="global")
        assert svc.recall("scan", stores=["global"]).hits
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            # Holds the lock, then starts the due background scan, which queues behind it.
            with svc.index.lock:
                svc.index.reconcile("global")
                holding.set()
                release.wait(STUCK)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert holding.wait(STUCK) and svc.index.reconciler.scanning()
            yield svc
            assert release.is_set() is False
        finally:
            release.set()
            holder.join(STUCK)


def test_reads_do_not_wait_for_a_background_scan(tmp_home: Path) -> None:
    with a_scan_waiting_for_the_lock(tmp_home) as svc:
        # Each of these would wait for the lock (held until release) if reads took it.
        assert len(svc.recall("scan", stores=["global"]).hits) == 3
        assert len(svc.list_facts(store="global").items) == 3
        assert svc.store_info("global").fact_count == 3


def test_a_read_during_a_background_scan_skips_the_poll_wait(
    tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that meets a running scan answers at once; it used to wait one poll interval
    first (20 ms on every read while a scan ran). The interval is made longer than the test."""
    monkeypatch.setattr(coffer_memory._indexing, "SCAN_POLL_SECONDS", 10 * STUCK)
    with a_scan_waiting_for_the_lock(tmp_home) as svc:
        answers: list[RecallResult] = []
        reader = threading.Thread(target=lambda: answers.append(svc.recall("scan", stores=["global"])))
        reader.start()
        reader.join(STUCK)
        assert not reader.is_alive() and len(answers[0].hits) == 3


def test_the_async_facade_has_every_method_of_the_service(svc: MemoryService) -> None:
    skip = {"writing", "close"}
    public = {
        name
        for name, member in inspect.getmembers(MemoryService)
        if not name.startswith("_") and inspect.isfunction(member) and name not in skip
    }
    missing = {name for name in public if not hasattr(AsyncMemoryService, name)}
    assert not missing
    facade = AsyncMemoryService(svc)
    assert all(inspect.iscoroutinefunction(getattr(facade, name)) for name in public)


def test_the_async_facade_runs_calls_side_by_side(svc: MemoryService) -> None:
    async def main() -> None:
        async with AsyncMemoryService(svc, max_threads=4) as asvc:
            written = await asyncio.gather(
                *(asvc.remember(f"async fact {i}", store="global") for i in range(8))
            )
            found = await asyncio.gather(*(asvc.recall("async fact", stores=["global"]) for _ in range(8)))
            assert all(len(r.hits) == 8 for r in found)
            one = await asvc.get_fact(written[0].fact.id, store="global")
            assert one.fact.id == written[0].fact.id
        # The facade leaves a service it was given open; its threads start again on the next call.
        assert svc.get_fact(written[1].fact.id, store="global").fact.id == written[1].fact.id
        assert (await asvc.store_info("global")).fact_count == 8
        await asvc.close()

    asyncio.run(main())
