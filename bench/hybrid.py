"""Where a hybrid recall's time goes, at 10k facts: the query embedding, the keyword half, the
vector half, and the whole recall, interleaved query by query in one process.

The corpus is ``bench/limit.py``'s (facts alternating between a project store and the global
store, recalled from the project's repository, so two stores of ``--facts / 2``), with
deterministic random unit vectors for the documents and the real model for every query
(``--embedder``, default the multilingual-e5 default): the vector scan costs the same whatever
the values, and the query embedding is real. For each query, in turn:

- ``embed``: the embedder's ``embed_query`` alone (wall and CPU of the calling thread);
- ``keyword``: ``svc.recall(mode="keyword", limit=20)`` (hybrid's keyword half asks for 2x the limit);
- ``vector``: ``svc.recall(mode="vector")`` with the query's vector already cached: the vector half
  (matrix product, texts) without the embedding;
- ``hybrid``: ``svc.recall(mode="hybrid")`` after clearing the query cache, so it embeds.

``serial`` is embed + keyword + vector of the same query: what hybrid would cost without
overlapping the embedding with the keyword search; ``hybrid - embed`` is what hybrid adds to its
embedding. Targets (issue #15): hybrid p50 <= 12 ms at 10k.

    .venv/bin/python bench/hybrid.py [--facts 10000] [--queries 100] [--embedder multilingual-e5]
                                     [--home DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
for _i, _arg in enumerate(sys.argv):  # before anything imports coffer_memory
    if _arg == "--coffer-src" and _i + 1 < len(sys.argv):
        import _common  # noqa: F401  (it puts this checkout first; the source goes before it)

        sys.path.insert(0, os.path.abspath(sys.argv[_i + 1]))

from _common import environment, percentile, print_environment, table, write_json  # noqa: E402
from _limit_corpus import LIMIT, write_corpus  # noqa: E402
from _limit_vectors import _BenchEmbedders, query_vector, real_embedder  # noqa: E402
from core import make_queries  # noqa: E402

from coffer_memory import MemoryService, RecallResult, Settings  # noqa: E402
from coffer_memory.plugins import get_plugin_manager  # noqa: E402

TARGET_P50_MS = 12.0


def settings_for(home: Path, provider: str) -> Settings:
    """The home's settings with the bench embedder and every retrieval mode on."""
    return Settings.load(
        home,
        embedding={"provider": f"bench-{provider}"},
        memory={"retrieval_modes": ["grep", "keyword", "vector", "hybrid"]},
    )


def build(base: Path, n: int, provider: str) -> tuple[Path, Path]:
    """A home and a repository with ``n`` facts and their (random) vectors; reused when present."""
    home, repo = base / "home", base / "repo"
    if (home / "index.db").exists():
        return home, repo
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    start = time.perf_counter()
    with MemoryService(settings=settings_for(home, provider)) as svc:
        write_corpus(svc, repo, n)
        svc.reindex()
    print(f"{n} facts written, indexed and given vectors in {time.perf_counter() - start:.1f} s", flush=True)
    return home, repo


def clocked(fn: Callable[[], Any]) -> tuple[float, float, float]:
    """Wall, calling-thread CPU and process CPU (every thread's) seconds of one call."""
    wall, cpu, process = time.perf_counter(), time.thread_time(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.thread_time() - cpu, time.process_time() - process


def answered(result: RecallResult) -> None:
    """Stop the run when a vector-backed recall fell back to keyword (an embedder that failed, or
    the home's embedding back-off left set by a crashed process): timing it would report keyword
    figures as hybrid ones."""
    if result.fallback:
        raise SystemExit(f"a vector-backed recall fell back to {result.mode}; stopping rather than time it")


def run(
    home: Path, repo: Path, provider: str, queries: list[str]
) -> dict[str, list[tuple[float, float, float]]]:
    """Every part of every query, interleaved query by query."""
    embedder = real_embedder(provider)
    out: dict[str, list[tuple[float, float, float]]] = {
        k: [] for k in ("embed", "keyword", "vector", "hybrid")
    }
    with MemoryService(settings=settings_for(home, provider)) as svc:
        answered(svc.recall(queries[0], cwd=repo, mode="hybrid", limit=LIMIT))  # warm: matrices, model
        for q in queries:

            def hybrid(q: str = q) -> None:
                svc.retrieval.clear_query_cache()
                answered(svc.recall(q, cwd=repo, mode="hybrid", limit=LIMIT))

            out["embed"].append(clocked(lambda q=q: query_vector(embedder, q)))
            out["keyword"].append(
                clocked(lambda q=q: svc.recall(q, cwd=repo, mode="keyword", limit=2 * LIMIT))
            )
            out["hybrid"].append(clocked(hybrid))  # leaves the query's vector cached for the next
            out["vector"].append(
                clocked(lambda q=q: answered(svc.recall(q, cwd=repo, mode="vector", limit=LIMIT)))
            )
    return out


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the corpus, time every part, print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--embedder", default="multilingual-e5")
    parser.add_argument("--home", default=None, help="keep the corpus in this folder (reused when present)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--coffer-src", default=None, help="take coffer_memory from this source tree")
    args = parser.parse_args(argv)
    base = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="coffer-bench-hybrid-"))
    env = environment(str(base))
    print_environment(env)
    get_plugin_manager().register(_BenchEmbedders([args.embedder], False))
    home, repo = build(base, args.facts, args.embedder)
    queries = make_queries(args.queries)
    parts = run(home, repo, args.embedder, queries)
    parts["serial"] = [
        (e[0] + k[0] + v[0], e[1] + k[1] + v[1], e[2] + k[2] + v[2])
        for e, k, v in zip(parts["embed"], parts["keyword"], parts["vector"], strict=True)
    ]
    parts["hybrid - embed"] = [
        (h[0] - e[0], h[1] - e[1], h[2] - e[2]) for h, e in zip(parts["hybrid"], parts["embed"], strict=True)
    ]
    rows = []
    for name, figures in parts.items():
        wall, cpu, process = ([f[i] * 1000 for f in figures] for i in range(3))
        rows.append(
            [name, percentile(wall, 50), percentile(wall, 95), percentile(cpu, 50), percentile(process, 50)]
        )
    print(
        table(
            ["part", "wall p50 ms", "wall p95 ms", "thread CPU p50 ms", "process CPU p50 ms"],
            rows,
            title=f"hybrid recall at {args.facts} facts, {args.embedder}, {len(queries)} queries",
        )
    )
    p50 = percentile([f[0] * 1000 for f in parts["hybrid"]], 50)
    print(
        f"hybrid p50 {p50:.2f} ms (target <= {TARGET_P50_MS:.0f}: {'met' if p50 <= TARGET_P50_MS else 'NOT met'})"
    )
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    write_json(
        args.json, {"environment": env, "facts": args.facts, "embedder": args.embedder, "parts": parts}
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
