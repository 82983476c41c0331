"""MCP recall round-trip over stdio: ``coffer-mcp`` as a subprocess, the SDK's stdio client, N calls.

A fresh temporary COFFER_HOME gets ``--facts`` facts (half in a real temporary git repository's
project store, half global, from the vocabulary of ``bench/core.py``), written in-process. Then
``coffer-mcp`` is spawned over stdio with that repository as its working directory and
``coffer__recall`` is called ``--calls`` times after a warm-up; every figure is the wall-clock time
of one ``call_tool`` on the client side (JSON-RPC framing, pipes, argument validation, the recall,
the structured result, its text rendering and the client's output-schema check). Each query is
also timed in-process through ``MemoryService.recall``, interleaved call by call with the MCP
variants, so machine load affects all alike and the protocol's share is visible.

Two client variants: ``cwd`` passes the project directory as an argument; ``roots`` offers the
repository as an MCP root instead, which costs the server one extra request to the client per call.

    .venv/bin/python bench/mcp_roundtrip.py [--facts 1000] [--calls 300] [--json out.json]

The target (p50 <= 20 ms for the ``cwd`` variant) is printed next to the figures, never asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, ms, print_environment, summary, table, write_json
from core import SEED, fact_text, fact_title, make_queries
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp_types import ListRootsResult, Root

from coffer_memory import MemoryService

TARGET_P50_MS = 20.0
WARMUP = 20
VARIANTS = ("in-process MemoryService.recall", "stdio coffer__recall (cwd)", "stdio coffer__recall (roots)")


def seed_home(home: Path, repo: Path, n: int) -> None:
    """``n`` facts, alternating between the repository's project store and the global store."""
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    r = random.Random(SEED)
    with MemoryService(home) as svc:
        for i in range(n):
            text = fact_text(r)
            scope = "project" if i % 2 == 0 else "global"
            svc.remember(text, title=fact_title(text), scope=scope, cwd=repo)


def _server(home: Path, repo: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "coffer_memory_mcp.cli"],
        env={**os.environ, "COFFER_HOME": str(home)},
        cwd=str(repo.parent),  # not the repo: the project must come from the argument or the root
    )


async def measure(home: Path, repo: Path, queries: list[str]) -> dict[str, list[float]]:
    """Seconds per recall for each variant, interleaved query by query so load hits all alike."""

    async def list_roots(context: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=repo.as_uri(), name=repo.name)])  # type: ignore[arg-type]

    out: dict[str, list[float]] = {VARIANTS[0]: [], VARIANTS[1]: [], VARIANTS[2]: []}
    with MemoryService(home) as svc:
        async with (
            Client(_server(home, repo)) as by_cwd,
            Client(_server(home, repo), list_roots_callback=list_roots) as by_roots,
        ):
            calls = [
                (VARIANTS[0], None, {}),
                (VARIANTS[1], by_cwd, {"cwd": str(repo)}),
                (VARIANTS[2], by_roots, {}),
            ]
            for n, q in enumerate(queries[:WARMUP] + queries):
                for name, client, extra in calls:
                    start = time.perf_counter()
                    if client is None:
                        svc.recall(q, cwd=repo)
                        result = None
                    else:
                        result = await client.call_tool("coffer__recall", {"query": q, **extra})
                    elapsed = time.perf_counter() - start
                    if result is not None and (
                        result.is_error
                        or result.structured_content is None
                        or result.structured_content["cwd"] != str(repo)
                    ):
                        raise SystemExit(f"{name}: recall failed or resolved the wrong project: {result}")
                    if n >= WARMUP:
                        out[name].append(elapsed)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--facts", type=int, default=1000, help="facts in the temporary home (default 1000)")
    parser.add_argument("--calls", type=int, default=300, help="timed recall calls per variant (default 300)")
    parser.add_argument("--json", metavar="PATH", help="also write the raw figures as JSON to PATH")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="coffer-mcp-bench-"))
    try:
        env = environment(str(work))
        print_environment(env)
        home, repo = work / "home", work / "repo"
        seed_home(home, repo, args.facts)
        queries = make_queries(args.calls)
        raw = anyio.run(measure, home, repo, queries)
        figures = {name: summary([ms(s) for s in values]) for name, values in raw.items()}
        overhead = summary([ms(b - a) for a, b in zip(raw[VARIANTS[0]], raw[VARIANTS[1]], strict=True)])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    rows = [[name, f["n"], f["p50"], f["p95"], f["p99"], f["max"]] for name, f in figures.items()]
    print(
        table(
            ["recall round-trip (ms)", "n", "p50", "p95", "p99", "max"],
            rows,
            title=f"{args.facts} facts, keyword mode, {args.calls} calls after {WARMUP} warm-up calls",
        )
    )
    print(
        f"\nprotocol overhead per call (stdio cwd minus in-process, same query): "
        f"p50 {overhead['p50']:.2f} ms, p95 {overhead['p95']:.2f} ms"
    )
    p50 = figures[VARIANTS[1]]["p50"]
    met = "met" if p50 <= TARGET_P50_MS else "MISSED"
    print(f"\ntarget: stdio p50 <= {TARGET_P50_MS:.0f} ms -> {p50:.2f} ms, {met}")
    write_json(
        args.json,
        {
            "environment": env,
            "facts": args.facts,
            "calls": args.calls,
            "figures": figures,
            "overhead_ms": overhead,
            "target_p50_ms": TARGET_P50_MS,
            "target_met": p50 <= TARGET_P50_MS,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
