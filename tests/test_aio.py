"""The async facade's own thread hop: answers, errors, context, order, cancellation, close."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading

import pytest

from coffer_memory import AsyncMemoryService, InvalidInput, MemoryNotFound, MemoryService
from coffer_memory._aio import _Threads, usable_cpus

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


def test_errors_reach_the_caller_typed(svc: MemoryService) -> None:
    async def main() -> None:
        async with AsyncMemoryService(svc) as asvc:
            with pytest.raises(MemoryNotFound):
                await asvc.get_fact("01ARZ3NDEKTSV4RRFFQ69G5FAV", store="global")

    asyncio.run(main())


def test_context_variables_go_along_to_the_thread(svc: MemoryService) -> None:
    async def main() -> list[str]:
        async with AsyncMemoryService(svc) as asvc:
            REQUEST_ID.set("r-7")
            return [await asvc.run(REQUEST_ID.get), await asvc.run(lambda: threading.current_thread().name)]

    seen, thread = asyncio.run(main())
    assert seen == "r-7" and thread.startswith("coffer-async")


def test_calls_beyond_the_bound_wait_in_order(svc: MemoryService) -> None:
    gate = threading.Event()
    order: list[int] = []

    def blocked() -> None:
        gate.wait(10)

    async def main() -> None:
        async with AsyncMemoryService(svc, max_threads=1) as asvc:
            first = asyncio.ensure_future(asvc.run(blocked))
            rest = [asyncio.ensure_future(asvc.run(order.append, i)) for i in range(5)]
            await asyncio.sleep(0.05)
            assert order == []  # the one thread is busy: nothing else started
            gate.set()
            await asyncio.gather(first, *rest)
        assert order == [0, 1, 2, 3, 4]

    asyncio.run(main())


def test_a_call_cancelled_while_queued_never_runs(svc: MemoryService) -> None:
    gate = threading.Event()
    ran: list[str] = []

    async def main() -> None:
        async with AsyncMemoryService(svc, max_threads=1) as asvc:
            first = asyncio.ensure_future(asvc.run(gate.wait, 10))
            queued = asyncio.ensure_future(asvc.run(ran.append, "cancelled"))
            await asyncio.sleep(0.05)
            queued.cancel()
            gate.set()
            await first
            await asvc.run(ran.append, "later")
            with pytest.raises(asyncio.CancelledError):
                await queued
        assert ran == ["later"]

    asyncio.run(main())


def _async_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("coffer-async")]


def test_close_lets_queued_calls_finish_and_stops_the_threads(svc: MemoryService) -> None:
    done: list[int] = []
    gate = threading.Event()

    def slow(i: int) -> None:
        gate.wait(10)
        done.append(i)

    others = set(threading.enumerate())  # facades of earlier tests may still hold theirs

    async def main() -> None:
        asvc = AsyncMemoryService(svc, max_threads=2)
        calls = [asyncio.ensure_future(asvc.run(slow, i)) for i in range(4)]
        await asyncio.sleep(0.05)
        gate.set()
        await asvc.close()
        await asyncio.gather(*calls)
        assert sorted(done) == [0, 1, 2, 3]
        assert not [t for t in _async_threads() if t not in others]
        assert (await asvc.store_info("global")).fact_count == 0  # threads start again
        await asvc.close()

    asyncio.run(main())


def test_a_facade_dropped_without_close_stops_its_threads(svc: MemoryService) -> None:
    others = set(threading.enumerate())

    async def main() -> list[threading.Thread]:
        asvc = AsyncMemoryService(svc, max_threads=3)
        gate = threading.Event()
        calls = [asyncio.ensure_future(asvc.run(gate.wait, 10)) for _ in range(3)]
        await asyncio.sleep(0.05)
        gate.set()
        assert await asyncio.gather(*calls) == [True] * 3
        return [t for t in _async_threads() if t not in others]

    threads = asyncio.run(main())  # the facade is gone once main returns
    assert len(threads) == 3
    gc.collect()
    for thread in threads:
        thread.join(10)
    assert not any(t.is_alive() for t in threads)


def test_a_call_racing_close_is_refused_not_left_waiting() -> None:
    async def main() -> None:
        pool = _Threads(1, "coffer-async-test")
        pool.shutdown()  # what close() does while another task is about to call
        with pytest.raises(RuntimeError, match="stopped"):
            pool.submit(lambda: 1)

    asyncio.run(main())


def test_calls_one_at_a_time_stay_on_one_thread(svc: MemoryService) -> None:
    # The thread that went idle last takes the next call: its reader connection is the warm one.
    async def main() -> set[str]:
        async with AsyncMemoryService(svc, max_threads=4) as asvc:
            names = set()
            for _ in range(20):
                names.add(await asvc.run(lambda: threading.current_thread().name))
                await asyncio.sleep(0.001)  # the thread is back waiting before the next call
            return names

    assert len(asyncio.run(main())) == 1


def test_a_thread_starts_only_when_every_started_one_is_busy(svc: MemoryService) -> None:
    others = set(threading.enumerate())
    gate = threading.Event()

    async def main() -> tuple[int, int, set[str]]:
        async with AsyncMemoryService(svc, max_threads=4) as asvc:
            await asvc.run(lambda: None)
            alone = len([t for t in _async_threads() if t not in others])
            busy = [asyncio.ensure_future(asvc.run(gate.wait, 10)) for _ in range(2)]
            await asyncio.sleep(0.05)
            two = len([t for t in _async_threads() if t not in others])
            gate.set()
            await asyncio.gather(*busy)
            names = {await asvc.run(lambda: threading.current_thread().name) for _ in range(5)}
            return alone, two, names

    alone, two, names = asyncio.run(main())
    assert (alone, two) == (1, 2)
    assert len(names) == 1  # one call at a time again: back on one thread


def test_keyword_recalls_beyond_the_bound_wait_on_the_loop(svc: MemoryService) -> None:
    # A keyword recall computes from start to end: a second one at once would only take turns
    # with it. It waits for a slot on the loop, not in a thread; a grep recall does not wait.
    svc.remember("the deploy runbook lives in ops/", store="global")
    others = set(threading.enumerate())

    def started() -> int:
        return len([t for t in _async_threads() if t not in others])

    async def main() -> tuple[int, int, list[int]]:
        async with AsyncMemoryService(svc, max_threads=4, max_recalls=1) as asvc:
            with svc.index.lock:  # the first recall stops in its reconcile-on-read until released
                first = asyncio.ensure_future(asvc.recall("deploy", stores=["global"]))
                second = asyncio.ensure_future(asvc.recall("deploy", stores=["global"], mode="keyword"))
                await asyncio.sleep(0.1)
                waiting = started()
                grep = asyncio.ensure_future(asvc.recall("deploy", stores=["global"], mode="grep"))
                await asyncio.sleep(0.1)
                beside = started()
            found = await asyncio.gather(first, second, grep)
            return waiting, beside, [len(r.hits) for r in found]

    waiting, beside, hits = asyncio.run(main())
    assert (waiting, beside) == (1, 2)
    assert hits == [1, 1, 1]


def test_recalls_at_once_default_to_the_cpus_the_process_may_use(svc: MemoryService) -> None:
    async def main() -> int:
        async with AsyncMemoryService(svc) as asvc:
            await asvc.recall("anything", stores=["global"])
            return asvc._recall_slots()._value

    assert asyncio.run(main()) == usable_cpus()


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("max_threads", 0),
        ("max_threads", -2),
        ("max_threads", 2.0),
        ("max_threads", True),
        ("max_recalls", 0),
    ],
)
def test_a_bound_that_is_no_count_is_refused_typed(svc: MemoryService, argument: str, value: object) -> None:
    """``max_threads=0`` made every call of the facade wait for ever (no thread ever started),
    and ``max_recalls=0`` raised a bare ValueError; both are ``InvalidInput`` naming the argument."""
    with pytest.raises(InvalidInput) as caught:
        AsyncMemoryService(svc, **{argument: value})  # type: ignore[arg-type]
    assert caught.value.details["field"] == argument and argument in str(caught.value)
