"""``coffer-api --workers N --pin-workers``: each worker process kept on one CPU of its own.

A request crosses threads twice in a worker (the event loop hands the recall to a pool thread and
takes the answer back), and the GIL passes between them. Left to the scheduler, those threads wake
each other across CPUs, which on a small virtual machine costs more than the hand-over itself;
kept on one CPU, each worker's threads hand over where their data already is, and the workers do
not compete for one CPU while another idles. On 2 cores, at 10,000 facts, the best round of two
pinned workers served 1.1-1.8x the recalls per second of two unpinned ones, at 0.8-0.9 of their CPU
per request (docs/benchmarks.md, "REST, session 7"). ``coffer-api --workers N`` pins by default
when N is the number of CPUs it may use (``cli.pins_by_default``); a pinned worker cannot move off
a busy CPU, so with fewer workers than CPUs it pins only when asked.

Linux only (elsewhere the workers run unpinned). Workers claim CPUs in turn, first one each: a
claim is an abstract Unix socket name bound for the life of the process, so a worker that dies
frees its CPU for the one uvicorn starts in its place, with no file to clean up.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys

_ROUNDS = 64  # more workers than this many per CPU share the last CPU tried
_claims: list[socket.socket] = []  # held open: a claim lasts as long as this process


def pin_to_one_cpu(run: str) -> int | None:
    """Move this process (all its threads) to the first CPU no other worker of ``run`` holds, or
    the least shared one; the CPU, or None where CPUs cannot be pinned."""
    if not sys.platform.startswith("linux") or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    for turn in range(_ROUNDS):
        for cpu in cpus:
            claim = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                claim.bind(f"\0coffer-api-{run}-cpu{cpu}-{turn}")
            except OSError:  # another worker holds this one
                claim.close()
                continue
            _claims.append(claim)
            for thread in _threads():  # sched_setaffinity(0) moves the calling thread alone
                with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                    os.sched_setaffinity(thread, {cpu})
            return cpu
    return None


def _threads() -> list[int]:
    """This process's threads (``/proc``), or 0 (the calling one) where ``/proc`` is missing."""
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        return [0]
