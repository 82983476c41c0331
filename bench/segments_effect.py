"""Keyword recall on one home whose word index single writes left in many FTS5 segments, beside a
copy of it settled into one (``_index/segments.settle``, what a reindex or a server's background
scan now does): the same code, the same queries, interleaved call by call.

    .venv/bin/python bench/segments_effect.py [--facts 10000] [--queries 400] [--rounds 3] [--keep DIR]

The home is built as ``bench/rest.py`` builds its own (``remember`` calls into the global store),
without its closing reindex, which would settle it. Printed: each home's segment count, median
and p95 CPU time per recall (this thread's) and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rest import SEED, fact_text, queries

from coffer_memory import MemoryService, Settings
from coffer_memory._index import segments


def build(home: Path, n: int) -> None:
    """``n`` facts written one ``remember`` at a time, as an agent writes them."""
    r = random.Random(SEED)
    with MemoryService(home) as svc:
        for i in range(n):
            svc.remember(fact_text(r), title=f"fact {i}", store="global")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", default=None, help="build the two homes here (reused when they exist)")
    args = parser.parse_args()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="coffer-segments-"))
    raw, settled = base / "raw", base / "settled"
    if not raw.exists():
        start = time.perf_counter()
        build(raw, args.facts)
        print(f"built {args.facts:,} facts in {time.perf_counter() - start:.1f} s")
    if not settled.exists():
        shutil.copytree(raw, settled)
        with MemoryService(settled) as svc:
            svc.reindex()  # nothing changed on disk: only the settle writes
    # No inotify feed and no due full scan: nothing may settle the raw home while it is measured.
    quiet = {"reconcile_watch": False, "reconcile_full_scan_seconds": 10.0**9}
    homes = {"many segments": raw, "one segment": settled}
    svcs = {k: MemoryService(settings=Settings.load(h, **quiet)) for k, h in homes.items()}
    qs = queries(args.queries)
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    try:
        for svc in svcs.values():
            for q in qs[:50]:  # warm: page cache, kept rows
                svc.recall(q, stores=["global"], mode="keyword", limit=10)
        cpu: dict[str, list[float]] = {k: [] for k in svcs}
        for _ in range(args.rounds):
            for q in qs:
                for k, svc in svcs.items():
                    t = time.thread_time_ns()
                    svc.recall(q, stores=["global"], mode="keyword", limit=10)
                    cpu[k].append((time.thread_time_ns() - t) / 1e6)
        for k, svc in svcs.items():
            v = sorted(cpu[k])
            count = segments.segment_count(svc.index.db)
            p50, p95 = statistics.median(v), v[int(len(v) * 0.95)]
            print(f"{k:>14}: {count:3d} segments, CPU p50 {p50:.3f} ms, p95 {p95:.3f} ms")
        ratio = statistics.median(cpu["many segments"]) / statistics.median(cpu["one segment"])
        print(f"many / one at p50: {ratio:.3f}")
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        for svc in svcs.values():
            svc.close()


if __name__ == "__main__":
    main()
