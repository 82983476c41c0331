"""Tags and time filters: recall and list_facts latency with and without a filter.

A seeded store of hand-written facts (30 random words each from a small developer vocabulary,
one in 50 tagged ``ops``, updated_at spread over 28 days) is indexed, then each call runs
``--repeats`` times; figures are wall-clock milliseconds (p50, p95) in this process. The point is
the ratio: a filter inside the index query should cost no more than the unfiltered call.

    .venv/bin/python bench/filters.py [--facts 5000] [--repeats 40]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, ms, print_environment, summary, table

from coffer_memory import MemoryService

SEED = 20261201
WORDS = [
    "deploy",
    "cache",
    "database",
    "backup",
    "staging",
    "release",
    "vpn",
    "token",
    "migration",
    "index",
    "query",
    "server",
    "client",
    "build",
    "test",
    "lint",
    "docs",
]


def write_store(home: Path, n: int) -> None:
    rng = random.Random(SEED)
    inbox = home / "memory" / "global" / "knowledge" / "inbox"
    inbox.mkdir(parents=True)
    for i in range(n):
        tags = "tags: [ops]\n" if i % 50 == 0 else ""
        body = " ".join(rng.choice(WORDS) for _ in range(30))
        (inbox / f"f{i}.md").write_text(
            f"---\ntitle: fact {i}\nupdated_at: 2026-10-{1 + i % 28:02d}T10:00:00Z\n{tags}---\n\n{body}\n"
        )


def timed(call: Callable[[], object], repeats: int) -> dict[str, float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(ms(time.perf_counter() - start))
    return summary(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print_environment(environment(tmp))
        write_store(Path(tmp), args.facts)
        with MemoryService(tmp) as svc:
            svc.reindex("global")
            q = "deploy cache"
            cases: list[tuple[str, Callable[[], object]]] = [
                ("recall keyword", lambda: svc.recall(q, stores=["global"])),
                ("recall keyword, tag ops (2%)", lambda: svc.recall(q, stores=["global"], tags=["ops"])),
                (
                    "recall keyword, since: 1 day of 28",
                    lambda: svc.recall(q, stores=["global"], since="2026-10-28"),
                ),
                (
                    "recall keyword, since: all 28 days",
                    lambda: svc.recall(q, stores=["global"], since="2026-10-01"),
                ),
                ("list_facts 50", lambda: svc.list_facts(store="global")),
                ("list_facts 50, tag ops", lambda: svc.list_facts(store="global", tags=["ops"])),
            ]
            rows = []
            for name, call in cases:
                s = timed(call, args.repeats)
                rows.append([name, s["n"], s["p50"], s["p95"]])
    print(table(["call", "n", "p50 ms", "p95 ms"], rows, title=f"{args.facts} facts"))


if __name__ == "__main__":
    main()
