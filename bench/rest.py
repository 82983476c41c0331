"""REST recall benchmark: uvicorn serving coffer-api on loopback, load from a second process.

A fresh temporary COFFER_HOME gets ``--facts`` facts in the global store (written through
``MemoryService.remember``); ``coffer-api`` then serves it from a subprocess on 127.0.0.1 and this
process sends ``--requests`` recall requests (``GET /api/v1/memory_stores/recall?store=global``)
twice: one at a time on one keep-alive connection (latency), then from ``--concurrency`` threads
(throughput). Targets (goals, not assertions, issue #15): >= 500 requests/s with 4 clients and
p50 <= 5 ms.

``--before DIR`` also serves the same home with the code in ``DIR`` (e.g. ``git archive main``
unpacked there, put first on ``PYTHONPATH``), alternating with this checkout for ``--rounds``
rounds, so before and after are measured in one run on the same store and the same load.
``--variant NAME=PATH`` adds more (repeatable); ``DIR`` and ``PATH`` may list several directories
separated by ``os.pathsep`` (e.g. one holding a stub that hides an optional package).
``--server-variant NAME=ARGS`` serves this checkout with more ``coffer-api`` arguments (e.g.
``workers2="--workers 2"``); the server CPU column then sums every process of the server.
``--server-args ARGS`` gives every code served these arguments (e.g. ``"--workers 2"`` for before
and after alike). Each row carries the 1-minute load average at its start.

``--client raw`` sends the same requests over plain keep-alive sockets (prebuilt request bytes,
the answer read by its Content-Length) instead of httpx: the load generator shares the two cores
with the server, and httpx costs about 1 ms of CPU per request, a fifth of the machine's work.

Those two loads are closed loops: each client sends when its last answer came, so with 4 clients
throughput and latency are tied (Little's law: mean latency = 4 / throughput; p50 <= 5 ms needs
~800 req/s). ``--rates 300,500,700`` runs open loops instead (``bench/rest_open.py``, the raw
client's requests on a fixed schedule from ``--concurrency`` clients, ``--arrivals uniform`` or
``poisson``), with latency from each request's intended start: "p50 at 500 req/s" as issue #15
states it. ``--closed`` keeps the closed loops beside them.

    .venv/bin/python bench/rest.py [--facts 10000] [--requests 2000] [--concurrency 4]
                                   [--before DIR] [--variant NAME=PATH ...] [--server-variant NAME=ARGS ...]
                                   [--server-args ARGS] [--client httpx|raw] [--rounds 2] [--json out.json]
                                   [--rates R,R,...] [--arrivals uniform|poisson] [--closed]
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import random
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import httpx
from _common import environment, ms, print_environment, summary, table, write_json
from rest_open import ARRIVALS, open_loop
from rest_open import figures as open_figures

from coffer_memory import MemoryService

SEED = 20240611
WORDS = [
    "deploy",
    "release",
    "branch",
    "pipeline",
    "docker",
    "image",
    "cache",
    "redis",
    "postgres",
    "migration",
    "schema",
    "index",
    "query",
    "latency",
    "budget",
    "retry",
    "timeout",
    "backoff",
    "queue",
    "worker",
    "cron",
    "schedule",
    "token",
    "secret",
    "vault",
    "config",
    "env",
    "parser",
    "lexer",
    "grammar",
    "compiler",
    "linter",
    "formatter",
    "test",
    "fixture",
    "mock",
    "coverage",
    "benchmark",
    "profile",
    "frontend",
    "backend",
    "api",
    "gateway",
    "route",
    "handler",
    "middleware",
    "auth",
    "session",
    "cookie",
    "header",
    "cors",
    "proxy",
    "logging",
    "metrics",
    "tracing",
    "alert",
    "dashboard",
    "oncall",
    "incident",
    "rollback",
    "canary",
    "feature",
    "flag",
    "toggle",
    "python",
    "rust",
    "typescript",
    "golang",
    "kotlin",
    "swift",
    "bash",
    "makefile",
    "ruff",
    "mypy",
    "pytest",
    "vitest",
    "webpack",
    "vite",
    "kubernetes",
    "helm",
    "terraform",
    "ansible",
    "nginx",
    "caddy",
    "systemd",
    "sqlite",
    "duckdb",
    "kafka",
    "rabbitmq",
    "s3",
    "bucket",
    "upload",
    "download",
    "stream",
    "chunk",
    "batch",
    "shard",
    "replica",
    "leader",
    "follower",
    "consensus",
    "lock",
    "mutex",
    "thread",
]
TARGET_P50_MS = 5.0
TARGET_RPS = 500.0
CONTENT_LENGTH = re.compile(rb"(?im)^content-length:\s*(\d+)")


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


def recall_params(q: str) -> dict[str, str | int]:
    """The query string of one recall request."""
    return {"query": q, "store": "global", "limit": 10}


def httpx_part(base: str, part: list[str]) -> tuple[list[float], int]:
    """Send ``part`` one after another on one httpx keep-alive connection."""
    mine = []
    bad = 0
    with httpx.Client(base_url=base, timeout=30) as http:
        for q in part:
            t0 = time.perf_counter()
            r = http.get("/api/v1/memory_stores/recall", params=recall_params(q))
            mine.append(time.perf_counter() - t0)
            bad += r.status_code != 200
    return mine, bad


def raw_part(base: str, part: list[str]) -> tuple[list[float], int]:
    """Send ``part`` one after another on one plain keep-alive socket (requests built beforehand)."""
    host, _, port = base.removeprefix("http://").partition(":")
    requests = [
        f"GET /api/v1/memory_stores/recall?{urlencode(recall_params(q))} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
        for q in part
    ]
    mine = []
    bad = 0
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        for request in requests:
            t0 = time.perf_counter()
            sock.sendall(request)
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            found = CONTENT_LENGTH.search(head)
            length = int(found.group(1)) if found else 0
            while len(body) < length:
                body += sock.recv(65536)
            mine.append(time.perf_counter() - t0)
            bad += head[9:12] != b"200"
    return mine, bad


def run_load(
    base: str, qs: list[str], concurrency: int, client: str = "httpx"
) -> tuple[list[float], float, int]:
    """Send every query, ``concurrency`` at a time; latencies (s), wall time (s) and non-200 count."""
    latencies: list[float] = []
    failures = [0]
    lock = threading.Lock()
    parts = [qs[i::concurrency] for i in range(concurrency)]
    send = raw_part if client == "raw" else httpx_part

    def worker(part: list[str]) -> None:
        mine, bad = send(base, part)
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


def closed_figures(base: str, qs: list[str], concurrency: int, client: str) -> dict[str, Any]:
    """One closed-loop load's figures (ms; ``rps`` what it achieved)."""
    lat, wall, bad = run_load(base, qs, concurrency, client)
    return {**summary([ms(x) for x in lat]), "rps": len(lat) / wall, "non_200": bad, "wall_s": wall}


def verdict(ok: bool) -> str:
    """'met' or 'NOT met'."""
    return "met" if ok else "NOT met"


def cpu_seconds(pid: int, *, loop_only: bool = False) -> float:
    """User + system CPU seconds of a process and its children so far (Linux ``/proc``; 0 elsewhere).

    The children are uvicorn's worker processes (``--workers N``); read before they exit.
    ``loop_only``: only each process's main thread, the one running the event loop (HTTP, routing,
    the response), without the thread pool's recalls and the background scans.
    """
    stat = f"/proc/{pid}/task/{pid}/stat" if loop_only else f"/proc/{pid}/stat"
    try:
        fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0.0
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own + sum(cpu_seconds(int(child), loop_only=loop_only) for child in children)


def serve_and_load(
    home: Path,
    qs: list[str],
    concurrency: int,
    pythonpath: str | None,
    server_args: list[str],
    client: str,
    **loads: Any,
) -> dict[str, Any]:
    """Start coffer-api on ``home`` (with ``pythonpath`` first on the path and ``server_args``), run
    the loads with ``client`` (``loads``: ``measure``'s rates, arrivals, closed), stop it."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable,
        "-m",
        "coffer_memory_fastapi.cli",
        "--port",
        str(port),
        "--log-level",
        "warning",
        *server_args,
    ]
    env = {**os.environ, "COFFER_HOME": str(home)}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.Popen(cmd, env=env, cwd=home)  # not this checkout: PYTHONPATH must come first
    return measure(proc, base, qs, concurrency, client, **loads)


def worker_split(port: int) -> str:
    """How the server's established connections on ``port`` are spread over its processes (e.g.
    ``3:1``: one process serves three, another one), from ``ss``; "" where ``ss`` is missing."""
    try:
        out = subprocess.run(
            ["ss", "-tnpH", "state", "established", f"( sport = :{port} )"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""
    per_pid = collections.Counter(
        line.split("pid=")[1].split(",")[0] for line in out.splitlines() if "pid=" in line
    )
    return ":".join(str(n) for n in sorted(per_pid.values(), reverse=True))


def open_label(rate: float, concurrency: int) -> str:
    """The result label of an open-loop load."""
    return f"open {rate:g}/s ({concurrency} clients)"


def measure(
    proc: subprocess.Popen[bytes],
    base: str,
    qs: list[str],
    concurrency: int,
    client: str,
    rates: tuple[float, ...] = (),
    arrivals: str = "uniform",
    closed: bool = True,
) -> dict[str, Any]:
    """Once the server ``proc`` answers at ``base``, warm it, run the loads, stop it; the figures.

    ``closed``: 1 client, then ``concurrency`` clients, each sending when its last answer came;
    ``rates``: then an open-loop load at each rate (``rest_open.open_loop``, ``arrivals``)."""
    results: dict[str, Any] = {}
    loads: list[tuple[str, Callable[[], dict[str, Any]]]] = []
    if closed:
        for label, conc in (
            ("sequential (1 client)", 1),
            (f"concurrent ({concurrency} clients)", concurrency),
        ):
            loads.append((label, functools.partial(closed_figures, base, qs, conc, client)))
    params = [recall_params(q) for q in qs]
    split = functools.partial(worker_split, int(base.rsplit(":", 1)[1]))
    for i, rate in enumerate(rates):
        run = functools.partial(
            open_loop, base, params, rate, concurrency, arrivals, SEED + i, connected=split
        )
        loads.append((open_label(rate, concurrency), lambda run=run, rate=rate: open_figures(run(), rate)))
    try:
        wait_ready(base, proc)
        run_load(base, queries(100), 1, client)  # warm-up: index pages, plan cache, connections
        run_load(base, queries(200), concurrency * 2, client)  # every worker's threads and connections
        for label, load in loads:
            loadavg = os.getloadavg()[0]
            cpu0, own0, loop0 = (
                cpu_seconds(proc.pid),
                time.process_time(),
                cpu_seconds(proc.pid, loop_only=True),
            )
            fig = load()
            cpu1, own1, loop1 = (
                cpu_seconds(proc.pid),
                time.process_time(),
                cpu_seconds(proc.pid, loop_only=True),
            )
            results[label] = {
                **fig,
                "loadavg": loadavg,
                # Where the time goes: CPU per request in the server and in this load generator.
                "server_cpu_ms": ms((cpu1 - cpu0) / fig["n"]),
                "loop_cpu_ms": ms((loop1 - loop0) / fig["n"]),
                "client_cpu_ms": ms((own1 - own0) / fig["n"]),
            }
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return results


def in_process(home: Path, qs: list[str], concurrency: int) -> None:
    """``svc.recall`` from 1 and ``concurrency`` threads on one MemoryService: the service alone,
    without HTTP (run it under each code's PYTHONPATH to compare)."""
    with MemoryService(home) as svc:
        for q in qs[:200]:
            svc.recall(q, stores=["global"], limit=10)
        for n in (1, concurrency):
            latencies: list[float] = []

            def worker(part: list[str], out: list[float]) -> None:
                mine = []
                for q in part:
                    t0 = time.perf_counter()
                    svc.recall(q, stores=["global"], limit=10)
                    mine.append(time.perf_counter() - t0)
                out.extend(mine)

            threads = [threading.Thread(target=worker, args=(qs[i::n], latencies)) for i in range(n)]
            start = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            fig = summary([ms(x) for x in latencies])
            wall = time.perf_counter() - start
            print(
                f"{n} threads: {len(latencies) / wall:.0f} recalls/s, p50 {fig['p50']:.2f} ms, p95 {fig['p95']:.2f} ms"
            )


def main(argv: list[str] | None = None) -> int:
    """Build the store, serve it (before and after), load it, print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--before", default=None, help="a source tree of the old code to serve too")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="another code to serve, PATH first on PYTHONPATH (repeatable)",
    )
    parser.add_argument(
        "--server-variant",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help="serve this checkout with these coffer-api arguments too (repeatable)",
    )
    parser.add_argument(
        "--server-args",
        default="",
        metavar="ARGS",
        help="more coffer-api arguments for every code served (e.g. '--workers 2')",
    )
    parser.add_argument(
        "--client",
        choices=["httpx", "raw"],
        default="httpx",
        help="the load generator's HTTP client (raw: plain sockets, little CPU)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="alternations of before and after")
    parser.add_argument("--rates", default=None, metavar="R,R,...", help="open loop at these total rates")
    parser.add_argument("--arrivals", choices=list(ARRIVALS), default="uniform", help="open-loop schedule")
    parser.add_argument("--closed", action="store_true", help="with --rates: the closed loops too")
    parser.add_argument("--home", default=None, help="keep the built home here (reused when it exists)")
    parser.add_argument("--json", default=None, help="write the raw figures here")
    parser.add_argument("--in-process", action="store_true", help="time svc.recall from threads, no HTTP")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="coffer-bench-rest-"))
    env_info = environment(str(tmp))
    print_environment(env_info)
    home = Path(args.home) if args.home else tmp / "home"
    build_seconds = 0.0
    if not home.exists():
        print(f"writing {args.facts} facts ...", flush=True)
        build_seconds = build_home(home, args.facts)
    if args.in_process:
        in_process(home, queries(args.requests), args.concurrency)
        return 0

    def pythonpath(value: str) -> str:
        return os.pathsep.join(os.path.abspath(p) for p in value.split(os.pathsep))

    common = shlex.split(args.server_args)
    variants: list[tuple[str, str | None, list[str]]] = [("after", None, common)]
    for spec in args.server_variant:
        name, _, extra = spec.partition("=")
        variants.append((name, None, [*common, *shlex.split(extra)]))
    for spec in reversed(args.variant):
        name, _, path = spec.partition("=")
        variants.insert(0, (name, pythonpath(path), common))
    if args.before:
        variants.insert(0, ("before", pythonpath(args.before), common))
    qs = queries(args.requests)
    rates = tuple(float(r) for r in (args.rates or "").split(",") if r.strip())
    loads = {"rates": rates, "arrivals": args.arrivals, "closed": args.closed or not rates}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in variants}
    try:
        for _ in range(args.rounds):
            for name, path, extra in variants:
                print(f"serving {name} ...", flush=True)
                runs[name].append(
                    serve_and_load(home, qs, args.concurrency, path, extra, args.client, **loads)
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rows = [
        [
            name,
            round_no + 1,
            label,
            r["loadavg"],
            r["n"],
            r["p50"],
            r["p95"],
            r["p99"],
            r["rps"],
            r["non_200"],
            r["server_cpu_ms"],
            r["loop_cpu_ms"],
            r["client_cpu_ms"],
        ]
        for name, rounds in runs.items()
        for round_no, results in enumerate(rounds)
        for label, r in results.items()
    ]
    print()
    print(f"{args.facts} facts written and indexed in {build_seconds:.1f} s")
    print(
        table(
            [
                "code",
                "round",
                "clients",
                "load avg",
                "requests",
                "p50 ms",
                "p95 ms",
                "p99 ms",
                "req/s",
                "non-200",
                "server CPU ms/req",
                "of it event loop",
                "client CPU ms/req",
            ],
            rows,
            title=f"REST recall (keyword, store=global, limit=10) over loopback, client {args.client}",
        )
    )
    conc_label = f"concurrent ({args.concurrency} clients)"
    for name, rounds in runs.items():
        if conc_label in rounds[0]:
            best = max(rounds, key=lambda res: res[conc_label]["rps"])[conc_label]
            print(
                f"{name}: {args.concurrency} clients {best['rps']:.0f} req/s (target >= {TARGET_RPS:.0f}: "
                f"{verdict(best['rps'] >= TARGET_RPS)}), p50 {best['p50']:.2f} ms "
                f"(target <= {TARGET_P50_MS:.0f}: {verdict(best['p50'] <= TARGET_P50_MS)})"
            )
        for rate in rates:
            figs = [res[open_label(rate, args.concurrency)] for res in rounds]
            achieved = ", ".join(f"{f['rps']:.0f}" for f in figs)
            p50s = ", ".join(f"{f['p50']:.2f}" for f in figs)
            print(
                f"{name}: {rate:g} req/s offered: achieved {achieved}, "
                f"p50 from the intended start {p50s} ms "
                f"(target <= {TARGET_P50_MS:.0f} at {TARGET_RPS:.0f} req/s)"
            )
    write_json(
        args.json,
        {"environment": env_info, "facts": args.facts, "build_seconds": build_seconds, "runs": runs},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
