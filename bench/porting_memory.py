"""Memory of one coffer import: max RSS and peak anonymous RSS of a fresh process importing an
export of ``--files`` files of ``--size`` bytes of text into a fresh home.

``max RSS`` counts the index's memory-mapped pages (``PRAGMA mmap_size``), which grow with what
is indexed; the anonymous RSS (``RssAnon`` of ``/proc/self/status``, sampled every 20 ms while
the import runs; Linux only) is what the import itself holds.

    .venv/bin/python bench/porting_memory.py [--files 64] [--size 1048576] [--format zip]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, print_environment

from coffer_memory import MemoryService

WORDS = ["deploy", "cache", "table", "index", "query", "staging", "token", "backup", "vpn", "api"]


def text(size: int, seed: int) -> bytes:
    """``size`` bytes of a fact file of words and numbers (not a secret; packs some 4 times)."""
    rng = random.Random(seed)
    out = bytearray(b"---\ntitle: big\n---\n\n")
    while len(out) < size:
        out += " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(12)).encode() + b"\n"
    return bytes(out[:size]) + b"\n"


def anonymous_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--format", choices=("zip", "jsonl"), default="zip")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coffer-bench-porting-memory-") as tmp:
        print_environment(environment(tmp))
        root = Path(tmp)
        archive = root / f"e.{args.format}"
        with MemoryService(root / "source") as source:
            folder = source.paths("global").root / "knowledge" / "big"
            folder.mkdir(parents=True)
            for i in range(args.files):
                (folder / f"f{i}.md").write_bytes(text(args.size, i))
            source.export_memory(archive, format=args.format)
        with MemoryService(root / "fresh") as fresh:
            fresh.remember("warm up", store="global")  # the index opened, the modules loaded
            idle_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            idle_anon = peak = anonymous_kib()
            done = threading.Event()

            def sample() -> None:
                nonlocal peak
                while not done.is_set():
                    peak = max(peak, anonymous_kib())
                    time.sleep(0.02)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            start = time.perf_counter()
            report = fresh.import_memory(archive)
            seconds = time.perf_counter() - start
            done.set()
            sampler.join()
            max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(
            f"{args.files} files of {args.size} bytes, {archive.stat().st_size / 2**20:.1f} MiB {args.format}: "
            f"max RSS {idle_rss / 1024:.0f} -> {max_rss / 1024:.0f} MiB, anonymous RSS "
            f"{idle_anon / 1024:.0f} -> {peak / 1024:.0f} MiB, {seconds:.1f} s, {report.counts}"
        )


if __name__ == "__main__":
    main()
