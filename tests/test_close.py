"""``MemoryService.close()`` and ``AsyncMemoryService.close()`` while other threads are inside calls.

Before: close() closed the index connections under running calls, which failed with a raw
``apsw.ConnectionClosedError``, and a call made after close() silently opened the index again.
Now running calls finish (close waits for them, a bounded time) or fail typed; later calls fail
with ``ServiceClosed`` (code INDEX_UNAVAILABLE); closing twice does nothing. Real threads, a real
home; nothing mocked.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import subprocess
import threading
from pathlib import Path

import pytest

from coffer_memory import AsyncMemoryService, CofferError, MemoryService, ServiceClosed


def _outcome(call: object) -> str:
    try:
        call()  # type: ignore[operator]
    except ServiceClosed as exc:
        assert exc.code == "INDEX_UNAVAILABLE"
        return "closed"
    except CofferError as exc:
        return f"typed {exc.code}"
    except Exception as exc:
        return f"raw {type(exc).__name__}: {exc}"
    return "ok"


def _busy(
    svc: MemoryService,
    i: int,
    repo: Path,
    started: threading.Barrier,
    guard: threading.Lock,
    seen: collections.Counter[str],
    written: list[str],
) -> None:
    """Calls of four kinds in turn until the service is found closed."""
    fid: list[str] = []

    def call(kind: int, j: int) -> None:
        if kind == 0:
            fid.append(svc.remember(f"Note {i} {j}: otter{i}x{j}.", title=f"n{i}{j}", scope="global").fact.id)
        elif kind == 1:
            svc.recall("kiln", stores=["global"], mode="keyword")
        elif kind == 2:
            svc.journal_append(f"journal {i} {j}", cwd=repo)
        else:
            svc.list_facts(store="global", limit=5)

    started.wait()
    for j in range(300):
        result = _outcome(functools.partial(call, (i + j) % 4, j))
        with guard:
            seen[result] += 1
            written.extend(fid)
        fid.clear()
        if result == "closed":
            return


def test_close_under_busy_threads_fails_no_call_with_a_raw_error(tmp_home: Path, tmp_path: Path) -> None:
    """Four threads remember, recall, journal and list in a loop while the main thread closes:
    each call is answered or refused with ServiceClosed, never a raw apsw error; every fact a
    call reported as written is on disk and found by a new service."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    seen: collections.Counter[str] = collections.Counter()
    written: list[str] = []
    guard = threading.Lock()
    for round_ in range(4):
        svc = MemoryService(tmp_home)
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        started = threading.Barrier(5)
        threads = [
            threading.Thread(target=_busy, args=(svc, i, repo, started, guard, seen, written))
            for i in range(4)
        ]
        for t in threads:
            t.start()
        started.wait()
        while sum(seen.values()) < 20 * (round_ + 1):  # the threads are well under way
            threading.Event().wait(0.005)
        svc.close()
        for t in threads:
            t.join(120)
            assert not t.is_alive()
    assert set(seen) <= {"ok", "closed"}, seen
    assert seen["closed"] >= 4  # each thread of each round met the closed service
    with MemoryService(tmp_home) as svc:
        for fid in written:
            assert svc.get_fact(fid, store="global").fact.id == fid
        assert not svc.doctor().index_mismatches


def test_calls_after_close_are_refused_typed_and_close_twice_is_harmless(tmp_home: Path) -> None:
    svc = MemoryService(tmp_home)
    fid = svc.remember("The kiln runs hot.", title="kiln", scope="global").fact.id
    svc.close()
    svc.close()
    for call in (
        lambda: svc.recall("kiln", stores=["global"]),
        lambda: svc.get_fact(fid, store="global"),
        lambda: svc.remember("More.", title="more", scope="global"),
        lambda: svc.db,
        lambda: svc.lanes,
        lambda: svc.facts.get_fact(fid, store="global"),  # a component kept from before: the index stays shut
    ):
        with pytest.raises(ServiceClosed, match="closed"):
            call()
    with svc:  # __exit__ closes again: harmless
        pass
    assert not svc.index.is_open  # nothing opened the index again


def test_close_waits_for_a_running_call_then_refuses(tmp_home: Path) -> None:
    """A reindex in another thread is held inside its progress callback while close() runs:
    close waits for it, the reindex finishes with the index open, and close returns after it."""
    svc = MemoryService(tmp_home)
    for i in range(3):
        svc.remember(f"Fact {i}: the heron{i}q wades.", title=f"h{i}", scope="global")
    inside, release = threading.Event(), threading.Event()
    result: list[str] = []

    def progress(store: str, done: int, total: int) -> None:
        inside.set()
        release.wait(60)

    def reindex() -> None:
        result.append(_outcome(lambda: svc.reindex("global", progress=progress)))

    worker = threading.Thread(target=reindex)
    worker.start()
    assert inside.wait(60)
    closer = threading.Thread(target=svc.close)
    closer.start()
    while not svc._gate.shut_down:  # close() has begun: new calls are refused now
        threading.Event().wait(0.005)
    assert _outcome(lambda: svc.recall("heron1q", stores=["global"])) == "closed"
    release.set()
    worker.join(60)
    closer.join(60)
    assert not closer.is_alive()
    assert result == ["ok"]


def test_close_gives_up_waiting_after_its_timeout(tmp_home: Path) -> None:
    """A call that does not end (held in its callback) cannot make close() wait for ever: after
    its timeout close closes under it; the call, once released, ends ok or with ServiceClosed."""
    svc = MemoryService(tmp_home)
    svc.remember("The heron wades.", title="h", scope="global")
    inside, release = threading.Event(), threading.Event()
    result: list[str] = []

    def progress(store: str, done: int, total: int) -> None:
        inside.set()
        release.wait(120)

    worker = threading.Thread(
        target=lambda: result.append(_outcome(lambda: svc.reindex("global", progress=progress)))
    )
    worker.start()
    assert inside.wait(60)
    svc.close(timeout=0.2)  # returns although the call is still held
    assert worker.is_alive()
    release.set()
    worker.join(60)
    assert result[0] in ("ok", "closed"), result
    with MemoryService(tmp_home) as again:
        assert again.recall("heron", stores=["global"], mode="keyword").hits


def test_async_close_under_running_calls(tmp_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The async facade that opened its service: calls in flight at close() are answered or
    refused with ServiceClosed, later calls are refused with ServiceClosed, a second close is
    harmless."""

    async def main() -> collections.Counter[str]:
        asvc = AsyncMemoryService(max_threads=4)  # it opens (and so closes) the service itself
        await asvc.remember("The kiln runs hot.", title="kiln", scope="global")
        seen: collections.Counter[str] = collections.Counter()

        async def one(i: int) -> None:
            try:
                if i % 2:
                    await asvc.recall("kiln", stores=["global"], mode="keyword")
                else:
                    await asvc.remember(f"Note {i}.", title=f"n{i}", scope="global")
                seen["ok"] += 1
            except ServiceClosed:
                seen["closed"] += 1
            except Exception as exc:
                seen[f"raw {type(exc).__name__}"] += 1

        calls = [asyncio.ensure_future(one(i)) for i in range(60)]
        await asyncio.sleep(0)
        await asvc.close()
        await asyncio.gather(*calls)
        with pytest.raises(ServiceClosed):
            await asvc.recall("kiln", stores=["global"])
        await asvc.close()
        return seen

    monkeypatch.setenv("COFFER_HOME", str(tmp_home))
    seen = asyncio.run(main())
    assert set(seen) <= {"ok", "closed"}, seen
