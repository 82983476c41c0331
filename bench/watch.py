"""Outside edits of a large store in a warm service: the periodic full stat scan against the inotify feed.

One home with ``--size`` facts (plain Markdown files written straight into the global store's
inbox, as an editor or ``git pull`` would, then indexed once). Two services over it, run in turn
in this process (``--rounds`` times, interleaved), differ in one setting:

- ``scan``: ``reconcile_watch = false``, i.e. before the feed: a larger store's in-place edits are
  found by the full stat scan, run on a background thread every ``reconcile_full_scan_seconds``;
- ``feed``: ``reconcile_watch = true`` (the default): reads drain the inotify queue; the full scan
  is a safety net every ``reconcile_watch_full_scan_seconds``.

Each service serves ``--rate`` keyword recalls a second for ``--seconds`` (a server under light
load: reads are what schedule the scans). Measured:

- the CPU time of a full scan (``Reconciler._reconcile_full`` wrapped with ``time.thread_time``;
  the median of the scan mode's background scans, which price the feed's safety net too), the
  scan CPU a minute at each mode's interval ("steady"), and what the served window measured:
  scans and their CPU a minute, the whole process's CPU a minute (recalls included);
- the reconcile check of one read (``IndexHandle.refresh``: the feed's drain against folder stats),
  the minimum and median over ``--checks`` calls;
- outside in-place edits keeping size and mtime (``os.utime`` puts it back): the time from the edit
  to the first recall that finds its new word, recalls issued back to back, ``--edits`` times.

    .venv/bin/python bench/watch.py [--size 10000] [--seconds 60] [--rate 20] [--edits 8] [--rounds 1]
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
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, print_environment, table, write_json
from core import fact_text

from coffer_memory import MemoryService, Settings

STORE = "global"


def build(home: Path, size: int) -> list[Path]:
    """``size`` fact files in the global store's inbox, each with its own marker word, indexed once."""
    inbox = home / "memory" / "global" / "knowledge" / "inbox"
    inbox.mkdir(parents=True)
    r = random.Random(7)
    paths = []
    for i in range(size):
        path = inbox / f"fact-{i:05d}.md"
        path.write_text(f"# Fact {i}\n\n{fact_text(r)} Marker was{i:05d}x.\n", encoding="utf-8")
        paths.append(path)
    with MemoryService(settings=Settings.load(home, reconcile_watch=False)) as svc:
        svc.reindex(STORE)
    return paths


class ScanClock:
    """CPU and wall time of the reconciler's full stat scans (wraps, never changes them)."""

    def __init__(self, svc: MemoryService) -> None:
        self.each: list[float] = []  # CPU seconds of every scan
        rec = svc.index.reconciler
        impl = rec._reconcile_full

        def timed(*a: Any, **k: Any) -> Any:
            start = time.thread_time()
            try:
                return impl(*a, **k)
            finally:
                self.each.append(time.thread_time() - start)

        rec._reconcile_full = timed  # type: ignore[method-assign]


def recall(svc: MemoryService, query: str) -> int:
    return len(svc.recall(query, stores=[STORE], mode="keyword", limit=5).hits)


def serve(
    svc: MemoryService, clock: ScanClock, seconds: float, rate: float, queries: list[str]
) -> dict[str, float]:
    """Recalls at ``rate`` a second for ``seconds``; scan and process CPU per minute."""
    first = len(clock.each)
    wall0, cpu0 = time.monotonic(), time.process_time()
    n = 0
    while (now := time.monotonic()) < wall0 + seconds:
        recall(svc, queries[n % len(queries)])
        n += 1
        time.sleep(max(0.0, wall0 + n / rate - time.monotonic()))
    wall = now - wall0
    per_minute = 60.0 / wall
    settle(svc)  # a scan that started in the window counts whole
    return {
        "scans_per_min": (len(clock.each) - first) * per_minute,
        "scan_cpu_ms_per_min": sum(clock.each[first:]) * 1000 * per_minute,
        "process_cpu_ms_per_min": (time.process_time() - cpu0) * 1000 * per_minute,
        "recalls": n,
    }


def settle(svc: MemoryService) -> None:
    while svc.index.reconciler.scanning():
        time.sleep(0.01)


def checks(svc: MemoryService, n: int) -> dict[str, float]:
    """The reconcile check of one read, as a read makes it (``refresh`` minus the lock's try: a
    read skips its check while a background scan holds the lock, which would time nothing)."""
    settle(svc)
    times = []
    with svc.index.lock:  # a scan falling due meanwhile waits for the end of the loop
        for _ in range(n):
            start = time.perf_counter()
            svc.index.reconciler.reconcile(STORE)
            times.append(time.perf_counter() - start)
    settle(svc)
    return {"check_min_us": min(times) * 1e6, "check_median_us": statistics.median(times) * 1e6}


def edits(svc: MemoryService, paths: list[Path], n: int, r: random.Random) -> list[float]:
    """Seconds from an outside in-place edit to the first recall that sees it."""
    out = []
    for _ in range(n):
        path = paths[r.randrange(len(paths))]
        st = path.stat()
        data = path.read_bytes()
        i = int(path.stem.split("-")[1])
        old, new = f"was{i:05d}x", f"now{i:05d}x"
        if old.encode() not in data:  # edited in an earlier round
            old, new = new, old
        time.sleep(r.random() * 0.5)  # at any point of the scan schedule
        start = time.perf_counter()
        path.write_bytes(data.replace(old.encode(), new.encode()))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        while not recall(svc, new):
            if time.perf_counter() - start > 120:
                raise SystemExit(f"an edit of {path} was not seen in 120 s")
        out.append(time.perf_counter() - start)
    return out


def warm(svc: MemoryService, watch: bool) -> None:
    recall(svc, "deploy")
    if watch:  # a full scan sets the watches (in a server: the first one that falls due)
        svc.reindex(STORE)
        feed = svc.index.reconciler.feed
        assert feed is not None and feed.status(STORE) == "verified", "the feed does not vouch"


def run(home: Path, paths: list[Path], watch: bool, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    settings = Settings.load(home, reconcile_watch=watch)
    queries = [f"was{i:05d}x" for i in random.Random(seed).sample(range(len(paths)), 50)]
    with MemoryService(settings=settings) as svc:
        clock = ScanClock(svc)
        warm(svc, watch)
        out: dict[str, Any] = {"mode": "feed" if watch else "scan"}
        out.update(serve(svc, clock, args.seconds, args.rate, queries))
        out.update(checks(svc, args.checks))
        seen = edits(svc, paths, args.edits, random.Random(seed))
        out["edit_seen_ms_median"] = statistics.median(seen) * 1000
        out["edit_seen_ms_max"] = max(seen) * 1000
        out["every_s"] = (
            settings.reconcile_watch_full_scan_seconds if watch else settings.reconcile_full_scan_seconds
        )
        out["scan_cpu_ms"] = statistics.median(clock.each) * 1000
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0, help="served time per service")
    parser.add_argument("--rate", type=float, default=20.0, help="recalls a second while served")
    parser.add_argument("--checks", type=int, default=2000)
    parser.add_argument("--edits", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="coffer-bench-watch-"))
    env = environment(str(work))
    print_environment(env)
    try:
        start = time.monotonic()
        paths = build(work / "home", args.size)
        print(f"built {args.size} facts in {time.monotonic() - start:.0f} s", file=sys.stderr)
        results = []
        for round_ in range(args.rounds):
            for watch in (False, True):
                results.append(run(work / "home", paths, watch, args, seed=round_ * 2 + watch))
                print(f"  round {round_ + 1}: {results[-1]['mode']} done", file=sys.stderr, flush=True)
            # A full scan costs the same in both modes: the background scans of the scan mode's
            # window price the feed's safety net too (its window rarely holds one).
            scan, feed = results[-2:]
            for r in (scan, feed):
                r["steady_scan_cpu_ms_per_min"] = scan["scan_cpu_ms"] * 60 / r["every_s"]
        rows: list[list[object]] = [
            [
                r["mode"],
                r["every_s"],
                results[i - i % 2]["scan_cpu_ms"],
                r["steady_scan_cpu_ms_per_min"],
                r["scans_per_min"],
                r["scan_cpu_ms_per_min"],
                r["process_cpu_ms_per_min"],
                r["check_min_us"],
                r["check_median_us"],
                r["edit_seen_ms_median"],
                r["edit_seen_ms_max"],
            ]
            for i, r in enumerate(results)
        ]
        print(
            table(
                [
                    "mode",
                    "full scan every s",
                    "CPU ms a scan",
                    "scan CPU ms/min, steady",
                    "scans/min in window",
                    "scan CPU ms/min in window",
                    "process CPU ms/min",
                    "read check min µs",
                    "median µs",
                    "edit seen median ms",
                    "max ms",
                ],
                rows,
                digits=1,
                title=f"{args.size} facts, {args.rate:g} recalls/s for {args.seconds:g} s per service",
            )
        )
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        write_json(args.json, {"environment": env, "results": results})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
