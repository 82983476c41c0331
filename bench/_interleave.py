"""Timing two sides of a comparison call by call, alternating which goes first, with wall and CPU
time: a shared machine's load then hits both sides alike.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Sequence
from typing import Any


def timed(fn: Callable[[], Any], cpu: list[float] | None = None) -> float:
    """Seconds one call of ``fn`` took; its CPU seconds (this process's) go to ``cpu``."""
    start, cpu_start = time.perf_counter(), time.process_time()
    fn()
    if cpu is not None:
        cpu.append(time.process_time() - cpu_start)
    return time.perf_counter() - start


def cpu_seconds() -> float:
    """CPU seconds of this thread plus every waited-for child (rg): unlike wall time, barely
    moved by other jobs on a shared machine (a 10k-file rg scan took 60 to 300 ms of wall time
    by the load, and about 120 ms of CPU time either way)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.thread_time() + children.ru_utime + children.ru_stime


def interleave_cpu(
    queries: Sequence[str], a: Callable[[str], Any], b: Callable[[str], Any]
) -> tuple[tuple[list[float], list[float]], tuple[list[float], list[float]]]:
    """``interleave_queries`` recording wall and CPU seconds: ((wall a, wall b), (cpu a, cpu b))."""
    wall: tuple[list[float], list[float]] = ([], [])
    cpu: tuple[list[float], list[float]] = ([], [])
    for i, query in enumerate(queries):
        for side in (1, 0) if i % 2 else (0, 1):
            c0, w0 = cpu_seconds(), time.perf_counter()
            (a, b)[side](query)
            wall[side].append(time.perf_counter() - w0)
            cpu[side].append(cpu_seconds() - c0)
    return wall, cpu


# CPU seconds of the calls ``interleave`` timed last: (a's, b's). A shared machine's load
# stretches wall time (a 2 ms call is preempted, a 0.3 ms one mostly is not); CPU time far less.
last_cpu: tuple[list[float], list[float]] = ([], [])


def interleave(pairs: int, a: Callable[[], Any], b: Callable[[], Any]) -> tuple[list[float], list[float]]:
    """``pairs`` timings of ``a`` and of ``b``, alternating which goes first (CPU in ``last_cpu``)."""
    ta: list[float] = []
    tb: list[float] = []
    ca, cb = last_cpu[0], last_cpu[1]
    ca.clear()
    cb.clear()
    for i in range(pairs):
        if i % 2:
            tb.append(timed(b, cb))
            ta.append(timed(a, ca))
        else:
            ta.append(timed(a, ca))
            tb.append(timed(b, cb))
    return ta, tb


def interleave_queries(
    queries: Sequence[str], a: Callable[[str], Any], b: Callable[[str], Any]
) -> tuple[list[float], list[float]]:
    """``interleave`` over ``queries``: each side gets every query once, in the same order."""
    qa, qb = iter(queries), iter(queries)
    return interleave(len(queries), lambda: a(next(qa)), lambda: b(next(qb)))


def with_cpu(out: dict[str, Any], key: str, walls: tuple[list[float], list[float]]) -> None:
    """``out[key]`` = the wall times, ``out[key + "_cpu"]`` = the CPU times ``interleave`` kept."""
    out[key] = walls
    out[f"{key}_cpu"] = (list(last_cpu[0]), list(last_cpu[1]))
