"""REST recall benchmark: uvicorn serving coffer-api on loopback, load from a second process.

A fresh temporary COFFER_HOME gets ``--facts`` facts in the global store (written through
``MemoryService.remember``); ``coffer-api`` then serves it from a subprocess on 127.0.0.1 and this
process sends ``--requests`` recall requests (``GET /api/v1/memory_stores/recall?store=global``)
twice: one at a time on one keep-alive connection (latency), then from ``--concurrency`` threads
(throughput). Targets (goals, not assertions): p50 <= 10 ms and >= 300 requests/s.

    .venv/bin/python bench/rest.py [--facts 10000] [--requests 2000] [--concurrency 8] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import httpx
from _common import environment, ms, print_environment, summary, table, write_json

from coffer_memory import MemoryService

SEED = 20240611
WORDS = ["deploy", "release", "branch", "pipeline", "docker", "image", "cache", "redis", "postgres", "migration", "schema", "index", "query", "latency", "budget", "retry", "timeout", "backoff", "queue", "worker", "cron", "schedule", "token", "secret", "vault", "config", "env", "parser", "lexer", "grammar", "compiler", "linter", "formatter", "test", "fixture", "mock", "coverage", "benchmark", "profile", "frontend", "backend", "api", "gateway", "route", "handler", "middleware", "auth", "session", "cookie", "header", "cors", "proxy", "logging", "metrics", "tracing", "alert", "dashboard", "oncall", "incident", "rollback", "canary", "feature", "flag", "toggle", "python", "rust", "typescript", "golang", "kotlin", "swift", "bash", "makefile", "ruff", "mypy", "pytest", "vitest", "webpack", "vite", "kubernetes", "helm", "terraform", "ansible", "nginx", "caddy", "systemd", "sqlite", "duckdb", "kafka", "rabbitmq", "s3", "bucket", "upload", "download", "stream", "chunk", "batch", "shard", "replica", "leader", "follower", "consensus", "lock", "mutex", "thread"]
TARGET_P50_MS = 10.0
TARGET_RPS = 300.0


def fact_text(r: random.Random) -> str:
    """A sentence-like fact from the vocabulary."""
    words = r.sample(WORDS, 12)
    return f"The {words[0]} {words[1]} uses {words[2]} with {words[3]}; " + " ".join(words[4:]) + "."


def build_home(home: Path, n: int) -> float:
    """Write ``n`` facts to the global store; return the seconds it took."""
    r = random.Random(SEED)
    start = time.perf_counter()
    with MemoryService(home) as svc:
        for i in range(n):
            svc.remember(fact_text(r), title=f"fact {i}", store="global")
        svc.reindex("global")
    return time.perf_counter() - start


def free_port() -> int:
    """An unused TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_ready(base: str, proc: subprocess.Popen[bytes]) -> None:
    """Poll until the server answers (or fail if it exits)."""
    for _ in range(300):
        if proc.poll() is not None:
            raise SystemExit(f"coffer-api exited with {proc.returncode}")
        try:
            httpx.get(base + "/api/v1/memory_stores", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("coffer-api did not start")


def queries(n: int) -> list[str]:
    """``n`` two-word queries drawn from the vocabulary."""
    r = random.Random(SEED + 1)
    return [" ".join(r.sample(WORDS, 2)) for _ in range(n)]


def run_load(base: str, qs: list[str], concurrency: int) -> tuple[list[float], float, int]:
    """Send every query, ``concurrency`` at a time; latencies (s), wall time (s) and non-200 count."""
    latencies: list[float] = []
    failures = [0]
    lock = threading.Lock()
    parts = [qs[i::concurrency] for i in range(concurrency)]

    def worker(part: list[str]) -> None:
        mine = []
        bad = 0
        with httpx.Client(base_url=base, timeout=30) as http:
            for q in part:
                t0 = time.perf_counter()
                r = http.get("/api/v1/memory_stores/recall", params={"query": q, "store": "global", "limit": 10})
                mine.append(time.perf_counter() - t0)
                bad += r.status_code != 200
        with lock:
            latencies.extend(mine)
            failures[0] += bad

    threads = [threading.Thread(target=worker, args=(p,)) for p in parts]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, time.perf_counter() - start, failures[0]


def verdict(ok: bool) -> str:
    """'met' or 'NOT met'."""
    return "met" if ok else "NOT met"


def main(argv: list[str] | None = None) -> int:
    """Build the store, serve it, load it, print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--json", default=None, help="write the raw figures here")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="coffer-bench-rest-"))
    env_info = environment(str(tmp))
    print_environment(env_info)
    home = tmp / "home"
    print(f"writing {args.facts} facts ...", flush=True)
    build_seconds = build_home(home, args.facts)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "coffer_memory_fastapi.cli", "--port", str(port), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, env={**os.environ, "COFFER_HOME": str(home)})
    results: dict[str, Any] = {}
    try:
        wait_ready(base, proc)
        run_load(base, queries(100), 1)  # warm-up: index pages, plan cache, connections
        qs = queries(args.requests)
        for label, conc in (("sequential (1 client)", 1), (f"concurrent ({args.concurrency} clients)", args.concurrency)):
            lat, wall, bad = run_load(base, qs, conc)
            fig = summary([ms(x) for x in lat])
            results[label] = {**fig, "rps": len(lat) / wall, "non_200": bad, "wall_s": wall}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)

    rows = [
        [label, r["n"], r["p50"], r["p95"], r["p99"], r["rps"], r["non_200"]] for label, r in results.items()
    ]
    print()
    print(f"{args.facts} facts written and indexed in {build_seconds:.1f} s")
    print(table(["load", "requests", "p50 ms", "p95 ms", "p99 ms", "req/s", "non-200"], rows,
                title="REST recall (keyword, store=global, limit=10) over loopback"))
    seq = results["sequential (1 client)"]
    best_rps = max(r["rps"] for r in results.values())
    print()
    print(f"target p50 <= {TARGET_P50_MS:.0f} ms (sequential): {seq['p50']:.2f} ms -> "
          f"{verdict(seq['p50'] <= TARGET_P50_MS)}")
    print(f"target >= {TARGET_RPS:.0f} req/s (best of the two loads): {best_rps:.0f} req/s -> "
          f"{verdict(best_rps >= TARGET_RPS)}")
    write_json(args.json, {"environment": env_info, "facts": args.facts, "build_seconds": build_seconds,
                           "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
