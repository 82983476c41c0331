"""Grep recall of several coffer source trees over one corpus, interleaved query by query.

Each tree (a checkout, or ``git archive <commit>`` unpacked) runs in its own worker process
with ``PYTHONPATH=<tree>`` and its own home holding the same fact files (the bench's generator,
rendered as this checkout writes them, all in the global store). Each worker opens its service,
answers one grep recall to warm up (the index is built then), and then the workers take the
same queries in turn, alternating which goes first, each timing its own ``recall`` (wall and
the process's CPU time, every thread's, plus its children's, so rg's too: older trees ran
each store's search on a thread of their own). Only the public API is used
(``MemoryService``, ``Settings.load(home, grep_backend=...)``, ``recall(mode="grep")``), so
trees from before the private-module layout run too.

    .venv/bin/python bench/grep_trees.py --trees /tmp/first-round,. --facts 5000 \\
        --backend python --queries 20 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import environment, percentile, print_environment, table, write_json
from _limit_corpus import fact_files
from core import make_queries

WORKER = r"""
import json, resource, sys, time
import coffer_memory
from coffer_memory import MemoryService, Settings
home, repo, backend = sys.argv[1:4]
print(json.dumps(coffer_memory.__file__), flush=True)

def cpu():
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + c.ru_utime + c.ru_stime

with MemoryService(settings=Settings.load(home, grep_backend=backend)) as svc:
    for line in sys.stdin:
        query = json.loads(line)
        c0, w0 = cpu(), time.perf_counter()
        hits = svc.recall(query, cwd=repo, mode="grep", limit=10).hits
        wall, used = time.perf_counter() - w0, cpu() - c0
        print(json.dumps({"wall": wall, "cpu": used, "hits": len(hits)}), flush=True)
"""


def write_facts(inbox: Path, n: int) -> None:
    """``n`` fact files as this checkout renders them (bench/limit.py's corpus)."""
    inbox.mkdir(parents=True)
    for name, content in fact_files(n):
        (inbox / name).write_bytes(content)


def main() -> None:
    """Start a worker per tree, feed them the queries in turn, print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trees", required=True, help="comma-separated source trees (. is this one)")
    parser.add_argument("--facts", type=int, default=5000)
    parser.add_argument("--backend", default="python")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    trees = [os.path.abspath(t) for t in args.trees.split(",")]
    env = environment(args.tmpdir)
    print_environment(env)
    queries = make_queries(args.queries + 1)
    with tempfile.TemporaryDirectory(prefix="coffer-grep-trees-", dir=args.tmpdir) as tmp:
        base = Path(tmp)
        repo = base / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        write_facts(base / "facts", args.facts)
        workers = []
        for i, tree in enumerate(trees):
            inbox = base / f"home{i}" / "memory" / "global" / "knowledge" / "inbox"
            inbox.parent.mkdir(parents=True)
            subprocess.run(["cp", "-r", str(base / "facts"), str(inbox)], check=True)
            worker_env = {**os.environ, "PYTHONPATH": tree, "COFFER_HOME": str(base / f"home{i}")}
            workers.append(
                subprocess.Popen(
                    [sys.executable, "-c", WORKER, str(base / f"home{i}"), str(repo), args.backend],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    env=worker_env,
                    cwd=base,  # not this checkout: ``-c`` puts the working folder before PYTHONPATH
                )
            )

        def ask(worker: subprocess.Popen[str], query: str) -> dict[str, float]:
            assert worker.stdin is not None and worker.stdout is not None
            worker.stdin.write(json.dumps(query) + "\n")
            worker.stdin.flush()
            answer: dict[str, float] = json.loads(worker.stdout.readline())
            return answer

        for tree, w in zip(trees, workers, strict=True):
            assert w.stdout is not None
            imported = json.loads(w.stdout.readline())
            assert imported.startswith(tree + os.sep), f"{tree} imported {imported}"
        first = [ask(w, queries[0]) for w in workers]  # builds each index; not counted
        timings: list[list[dict[str, float]]] = [[] for _ in trees]
        for n, query in enumerate(queries[1:]):
            order = list(range(len(trees)))
            if n % 2:
                order.reverse()
            for i in order:
                timings[i].append(ask(workers[i], query))
        for w in workers:
            assert w.stdin is not None
            w.stdin.close()
            w.wait()
    rows = []
    for tree, runs, warm in zip(trees, timings, first, strict=True):
        wall = [r["wall"] * 1000 for r in runs]
        cpu = [r["cpu"] * 1000 for r in runs]
        rows.append(
            [tree, warm["wall"] * 1000, percentile(wall, 50), percentile(wall, 95), percentile(cpu, 50)]
        )
    ref_wall, ref_cpu = rows[0][2], rows[0][4]
    for row in rows:
        row += [ref_wall / row[2], ref_cpu / row[4]]
    print(
        table(
            ["tree", "first ms", "p50 ms", "p95 ms", "CPU p50 ms", "first tree / this (wall)", "(CPU)"],
            rows,
            title=f"grep recall, {args.backend} backend, {args.facts:,} facts, {args.queries} queries",
        )
    )
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    write_json(args.json, {"environment": env, "trees": trees, "timings": timings, "first": first})


if __name__ == "__main__":
    main()
