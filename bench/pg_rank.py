"""How far PostgreSQL's keyword order (``ts_rank`` past a small store) is from SQLite's bm25.

For each size in ``--sizes`` a fresh home gets that many of the bench's facts (``limit.fact_files``:
1-3 sentences, one in ten a longer note) in the global store, written as files. The same
``--queries`` natural-language questions (``core.make_queries``) are asked in keyword mode, limit
10, of a SQLite service and of a PostgreSQL service of that home, and their hits compared by file:

- overlap@10: the share of SQLite's hits that PostgreSQL returns too (mean over queries with hits);
- same top 1 / same order: queries whose first hit, or whose whole list, is the same;
- p50 of each backend's recall (in-process, after a warm-up pass).

PostgreSQL comes from ``COFFER_PG_URL`` (a database the bench may fill), else a throwaway server
is started as the tests do (``tests/pg_server.py``).

    .venv/bin/python bench/pg_rank.py [--sizes 2000,5000] [--queries 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, ms, print_environment, summary, write_json
from _limit_corpus import fact_files
from core import make_queries
from pg import database

from coffer_memory import MemoryService, Settings


def write_store(home: Path, n: int) -> None:
    """``n`` bench facts as files in the global store's inbox."""
    inbox = home / "memory" / "global" / "knowledge" / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    for name, content in fact_files(n):
        (inbox / name).write_bytes(content)


def answers(home: Path, backend: str, qs: list[str]) -> tuple[list[list[str]], list[float]]:
    """Each query's hit file names in order, and each recall's seconds (after a warm-up pass)."""
    settings = Settings.load(home, index={"backend": backend}, reconcile_full_scan_seconds=3600.0)
    with MemoryService(settings=settings) as svc:
        svc.reindex("global")
        svc.index.refresh("global")  # PostgreSQL: push every document before the clock starts
        for q in qs:
            svc.recall(q, stores=["global"], mode="keyword", limit=10)
        hits, took = [], []
        for q in qs:
            t0 = time.perf_counter()
            result = svc.recall(q, stores=["global"], mode="keyword", limit=10)
            took.append(time.perf_counter() - t0)
            hits.append([h.path.name if h.path is not None else h.id for h in result.hits])
    return hits, took


def compare(lite: list[list[str]], pg: list[list[str]]) -> dict[str, Any]:
    """overlap@10, same first hit and same list, over the queries SQLite found something for."""
    asked = [(a, b) for a, b in zip(lite, pg, strict=True) if a]
    overlap = [len(set(a) & set(b)) / len(a) for a, b in asked]
    return {
        "queries_with_hits": len(asked),
        "overlap_at_10": sum(overlap) / len(overlap) if overlap else None,
        "overlap_min": min(overlap) if overlap else None,
        "same_top1": sum(1 for a, b in asked if b and a[0] == b[0]) / len(asked) if asked else None,
        "same_order": sum(1 for a, b in asked if a == b) / len(asked) if asked else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="2000,5000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    print_environment(environment())
    qs = make_queries(args.queries)
    results: dict[str, Any] = {}
    for n in (int(s) for s in args.sizes.split(",")):
        root = Path(tempfile.mkdtemp(prefix="coffer-bench-pg-rank-"))
        url, server = database(n)
        os.environ["COFFER_PG_URL"] = url
        try:
            home = root / "home"
            write_store(home, n)
            lite, lite_s = answers(home, "sqlite", qs)
            pg, pg_s = answers(home, "postgresql", qs)
        finally:
            if server is not None:
                server.stop()
            shutil.rmtree(root, ignore_errors=True)
        row = {
            **compare(lite, pg),
            "sqlite_ms": summary([ms(x) for x in lite_s]),
            "postgresql_ms": summary([ms(x) for x in pg_s]),
        }
        results[str(n)] = row
        print(
            f"{n:,} facts, {row['queries_with_hits']} queries with hits: overlap@10 "
            f"{row['overlap_at_10']:.3f} (min {row['overlap_min']:.2f}), same top 1 {row['same_top1']:.3f}, "
            f"same order {row['same_order']:.3f}; recall p50 SQLite {row['sqlite_ms']['p50']:.2f} ms, "
            f"PostgreSQL {row['postgresql_ms']['p50']:.2f} ms",
            flush=True,
        )
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
