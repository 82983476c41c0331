"""REST recall beside its physical limit over HTTP, interleaved in one run on the same store.

``bench/rest.py`` serves coffer-api and loads it; this script serves, in alternate rounds on the
same machine and load, coffer-api and a **limit server**: the uvicorn configuration coffer-api
uses (``--workers N`` processes sharing one listening socket with ``TCP_NODELAY`` and sharing
connections out as coffer-api's workers do, ``coffer_memory_fastapi.balance``, where the coffer
served has it; httptools, no access log, 127.0.0.1, warning log level; ``--pinned``: each worker
on one CPU as with ``--pin-workers``; coffer's unpinned rows run ``--no-pin-workers`` where it has
it, since ``--workers N`` on N CPUs pins by default) serving a raw ASGI app whose one route runs the keyword limit of
``bench/limit.py`` (``limit_keyword``: one bm25 MATCH on a plain FTS5 word table, then the
matched texts) over the same 10,000 facts, on a SQLite file built by ``bench/limit.py``'s
``limit_rebuild`` from this home's fact files with coffer's own schema (WAL, one connection per
worker process), and answers JSON hits with the fields and about the size of coffer's
(``id, text, score, source, time, store, title, path``). The query runs on the event loop;
``--threaded-limit`` adds a limit that runs it in a thread pool (one connection per thread), as
coffer's ``AsyncMemoryService`` does, which prices the thread hop by itself.

The load is ``bench/rest.py``'s (the same queries, warm-up and clients: ``--client raw`` by
default, prebuilt requests over keep-alive sockets), 1 client then ``--concurrency`` clients.
Printed: every round's p50, p95, req/s and server CPU per request (all the server's processes,
and of it the event loop threads) with the 1-minute load average, then per round the ratios
coffer / limit at ``--concurrency`` clients. Targets (issue #15): >= 500 req/s, p50 <= 5 ms.

**Open loop** (``--rate 500`` or ``--rates 300,500,700``; ``bench/rest_open.py``): the targets
read as "under a load of 500 req/s from 4 clients, the median latency is <= 5 ms". A closed loop
(each client sends when its last answer came) cannot measure that: with 4 clients and no think
time Little's law makes mean latency = 4 / throughput, so p50 <= 5 ms there needs ~800 req/s, the
limit's own throughput. In the open loop each of ``--concurrency`` clients sends on its own
schedule of intended start times (``--arrivals uniform``: evenly spaced from a random phase, the
default, as wrk2; ``poisson``: exponential gaps), the rate split evenly between them; a client
whose answer is late sends the next request at once when it comes, and latency counts from the
intended start (no coordinated omission). Printed besides: the achieved rate, p99, the time from
send to answer, how far behind schedule the sends fell, and the client's own timer lateness on
sends that found it free. Only the open loops run unless ``--closed`` is given; servers
alternate per round as before, and each load's row carries the 1-minute load average.

``--fixed`` also serves both with the recall taken out, which prices the serving path alone:
``coffer fixed`` is coffer's app served as coffer-api serves it (the same protocol, workers,
pinning, guard, shortcut, thread hop and encoding of the answer), whose service answers every
recall with one result computed at start-up; ``raw fixed`` is the limit's raw ASGI app answering
the bytes of that result. Their difference is what coffer's serving costs beyond uvicorn's own.

    .venv/bin/python bench/rest_limit.py [--home DIR] [--facts 10000] [--requests 2000]
        [--concurrency 4] [--rounds 2] [--workers 2] [--pinned] [--threaded-limit]
        [--fixed] [--before DIR] [--client raw|httpx] [--json out.json]
        [--rate R | --rates R,R,...] [--arrivals uniform|poisson] [--closed]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import apsw
from _common import environment, print_environment, table, write_json
from _limit_side import index_schema, limit_keyword, limit_rebuild, segments
from rest import TARGET_P50_MS, TARGET_RPS, build_home, free_port, measure, queries, serve_and_load
from rest_open import ARRIVALS

SPEC_ENV = "COFFER_BENCH_LIMIT_SERVER"  # what the limit server hands its worker processes (JSON)
RECALL_PATH = "/api/v1/memory_stores/recall"


# -- the limit server ------------------------------------------------------------------------------
class LimitApp:
    """The limit's ASGI app: ``GET /api/v1/memory_stores/recall?query=...`` runs ``limit_keyword``;
    any other request is answered ``[]`` (the readiness probe)."""

    def __init__(self, db: str, threaded: bool) -> None:
        self.db = db
        self.local = threading.local()
        self.pool = ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) + 4)) if threaded else None
        conn = self.connection()
        # What coffer's hits carry besides the text, read once: the limit pays for the match and
        # the texts, not for reading metadata a server could keep.
        self.meta = {
            int(doc): {"path": path, "title": Path(path).stem.rsplit("-", 1)[0].replace("-", " ")}
            for doc, path in conn.execute("SELECT id, path FROM documents")
        }

    def connection(self) -> apsw.Connection:
        """This thread's read connection (the event loop's is the worker's one connection)."""
        conn: apsw.Connection | None = getattr(self.local, "conn", None)
        if conn is None:
            conn = apsw.Connection(self.db, flags=apsw.SQLITE_OPEN_READONLY)
            self.local.conn = conn
        return conn

    def answer(self, query: str) -> bytes:
        """The limit's recall as JSON (coffer's field names, compact as pydantic-core writes)."""
        hits = [
            {
                "id": f"{rowid:026d}",
                "text": text,
                "score": -float(rank),
                "source": "keyword",
                "time": "2026-01-01T00:00:00Z",
                "store": "global",
                **self.meta[rowid],
            }
            for rank, (rowid, text) in enumerate(limit_keyword(self.connection(), query))
        ]
        out = {"hits": hits, "mode": "keyword", "fallback": False, "stores": ["global"]}
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode()

    @staticmethod
    async def lifespan(receive: Any, send: Any) -> None:
        """Answer uvicorn's start-up and shutdown."""
        while True:
            message = await receive()
            kind = message["type"].rsplit(".", 1)[1]
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        body = b"[]"
        if scope["path"] == RECALL_PATH:
            query = dict(parse_qsl(scope["query_string"].decode("latin-1")))["query"]
            if self.pool is None:
                body = self.answer(query)
            else:
                body = await asyncio.get_running_loop().run_in_executor(self.pool, self.answer, query)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class FixedApp:
    """A raw ASGI app answering every request with the same JSON bytes (``raw fixed``)."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await LimitApp.lifespan(receive, send)
            return
        await send({"type": "http.response.start", "status": 200, "headers": self.headers})
        await send({"type": "http.response.body", "body": self.body})


def fixed_result(home: str) -> tuple[Any, Any]:
    """A service over ``home`` and its result for the bench's first query."""
    from coffer_memory import MemoryService

    svc = MemoryService(home)
    return svc, svc.recall(queries(1)[0], stores=["global"], limit=10)


def fixed_apps(kind: str, home: str) -> Any:
    """``coffer fixed`` (coffer's app, each recall answered by one result computed here) or
    ``raw fixed`` (that result's bytes from a raw ASGI app)."""
    from coffer_memory_fastapi import create_app
    from coffer_memory_fastapi.reply import reply
    from coffer_memory_fastapi.schemas import RECALL

    svc, result = fixed_result(home)
    if kind == "raw":
        body = bytes(reply(RECALL, result).body)
        svc.close()
        return FixedApp(body)
    # The one stand-in: the core's recall. Everything between the socket and it is coffer-api's.
    svc.facts.recall = lambda *args, **kwargs: result  # type: ignore[method-assign]
    return create_app(svc)


try:  # the limit's protocol: plain httptools, its connections counted where coffer counts them
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from coffer_memory_fastapi.balance import CountedConnections

    class LimitProtocol(CountedConnections, HttpToolsProtocol):
        """uvicorn's httptools protocol, counted for ``balance`` as coffer-api's protocol is."""

    LIMIT_PROTOCOL = "rest_limit:LimitProtocol"
except ImportError:  # an older coffer (--before) without it
    LIMIT_PROTOCOL = "httptools"


def limit_app() -> Any:
    """The app of one limit worker process (uvicorn's factory; pins the process first if asked)."""
    spec = json.loads(os.environ[SPEC_ENV])
    if spec["pin"]:
        from coffer_memory_fastapi.cpus import pin_to_one_cpu

        pin_to_one_cpu(f"limit-{spec['supervisor']}")
    if spec.get("connections"):  # the workers share connections out as coffer-api's do
        try:
            from coffer_memory_fastapi import balance
        except ImportError:  # an older coffer (--before) without it: asyncio's own accepting
            pass
        else:
            balance.install(asyncio.get_running_loop(), Path(spec["connections"]))
    if spec.get("fixed"):
        return fixed_apps(spec["fixed"], spec["home"])
    return LimitApp(spec["db"], spec["threaded"])


def serve_limit(
    db: str, port: int, workers: int, pin: bool, threaded: bool, fixed: str | None = None, home: str = ""
) -> None:
    """Serve ``limit_app`` as ``coffer-api`` serves its app (coffer_memory_fastapi/cli.py)."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from coffer_memory_fastapi.cli import HTTP_PROTOCOL, listening_socket

    spec = {
        "db": db,
        "pin": pin,
        "threaded": threaded,
        "supervisor": os.getpid(),
        "fixed": fixed,
        "home": home,
    }
    os.environ[SPEC_ENV] = json.dumps(spec)
    serve: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": port,
        "log_level": "warning",
        "access_log": False,
        "http": HTTP_PROTOCOL if fixed == "coffer" else LIMIT_PROTOCOL,
    }
    if workers == 1:
        uvicorn.run(limit_app(), **serve)
        return
    with tempfile.TemporaryDirectory(prefix="coffer-bench-limit-") as shared:
        os.environ[SPEC_ENV] = json.dumps({**spec, "connections": os.path.join(shared, "connections")})
        config = uvicorn.Config("rest_limit:limit_app", factory=True, workers=workers, **serve)
        Multiprocess(config, sockets=[listening_socket(config)]).run()


# -- the run ---------------------------------------------------------------------------------------
def fact_files(home: Path) -> list[Path]:
    """The global store's fact files (what coffer indexes for the bench's recalls)."""
    knowledge = home / "memory" / "global" / "knowledge"
    return sorted(p for p in knowledge.rglob("*.md") if p.name != "INDEX.md")


def limit_db(home: Path, path: Path) -> Path:
    """Build the limit's SQLite file from ``home``'s fact files with coffer's schema."""
    limit_rebuild(path, fact_files(home), index_schema(home / "index.db")).close()
    return path


def load_limit(
    db: Path,
    qs: list[str],
    concurrency: int,
    client: str,
    workers: int,
    pin: bool,
    threaded: bool,
    fixed: tuple[str, Path] | None = None,
    **loads: Any,
) -> dict[str, Any]:
    """Start the limit server (``fixed``: a fixed-answer server, ``coffer`` or ``raw``, over
    that home), run ``bench/rest.py``'s loads (``loads``: ``measure``'s), stop it."""
    port = free_port()
    cmd = [sys.executable, os.path.abspath(__file__), "--serve-limit", str(db), "--port", str(port)]
    cmd += [
        "--workers",
        str(workers),
        *(["--pinned"] if pin else []),
        *(["--threaded-limit"] if threaded else []),
        *(["--serve-fixed", fixed[0], "--home", str(fixed[1])] if fixed else []),
    ]
    proc = subprocess.Popen(cmd, cwd=db.parent)
    return measure(proc, f"http://127.0.0.1:{port}", qs, concurrency, client, **loads)


def response_sizes(home: Path, db: Path, query: str) -> tuple[int, int]:
    """Bytes of coffer's recall answer and of the limit's for one query (in process)."""
    from coffer_memory import MemoryService
    from coffer_memory_fastapi.reply import reply
    from coffer_memory_fastapi.schemas import RECALL

    with MemoryService(home) as svc:
        coffer = len(reply(RECALL, svc.recall(query, stores=["global"], limit=10)).body)
    return coffer, len(LimitApp(str(db), threaded=False).answer(query))


def ratio_rows(
    runs: dict[str, list[dict[str, Any]]], label: str, pairs: list[tuple[str, str]]
) -> list[list[Any]]:
    """Per round and pair: coffer / limit for req/s, p50, p95, p99, server CPU and event loop CPU."""
    rows = []
    for coffer, limit in pairs:
        for i, (a, b) in enumerate(zip(runs[coffer], runs[limit], strict=True)):
            c, li = a[label], b[label]
            rows.append(
                [f"{coffer} / {limit}", i + 1, c["loadavg"], li["loadavg"]]
                + [
                    c[k] / li[k] if li[k] else float("nan")
                    for k in ("rps", "p50", "p95", "p99", "server_cpu_ms", "loop_cpu_ms")
                ]
            )
    return rows


def unpinned(tree: str | None) -> list[str]:
    """``--no-pin-workers`` where the coffer served from ``tree`` (None: the one installed) has it:
    there ``--workers N`` on N CPUs pins its workers by default (the ``pinned`` rows), and the
    unpinned rows stay unpinned; an older coffer never pins unless asked."""
    import coffer_memory_fastapi

    root = (
        Path(tree.split(os.pathsep)[0]) / "coffer_memory_fastapi"
        if tree
        else Path(coffer_memory_fastapi.__file__).parent
    )
    cli = root / "cli.py"
    return ["--no-pin-workers"] if cli.exists() and "--no-pin-workers" in cli.read_text() else []


def servers(
    args: argparse.Namespace, home: Path, db: Path, qs: list[str], loads: dict[str, Any]
) -> tuple[dict[str, Callable[[], dict[str, Any]]], list[tuple[str, str]]]:
    """What to serve in each round (name: serve it, load it, stop it) and the (coffer, limit)
    pairs whose ratios are printed."""
    workers = ["--workers", str(args.workers)] if args.workers > 1 else []
    before = (
        os.pathsep.join(os.path.abspath(p) for p in args.before.split(os.pathsep)) if args.before else None
    )
    coffer = functools.partial(serve_and_load, home, qs, args.concurrency, client=args.client, **loads)
    limit = functools.partial(load_limit, db, qs, args.concurrency, args.client, args.workers, **loads)
    serve: dict[str, Callable[[], dict[str, Any]]] = {}
    if before:
        serve["before"] = functools.partial(coffer, before, [*workers, *unpinned(before)])
    serve["coffer"] = functools.partial(coffer, None, [*workers, *unpinned(None)])
    serve["limit"] = functools.partial(limit, pin=False, threaded=False)
    pairs = [("coffer", "limit")] + ([("before", "limit")] if before else [])
    if args.pinned:
        pinned = [*workers, "--pin-workers"]
        serve["coffer pinned"] = functools.partial(coffer, None, pinned)
        serve["limit pinned"] = functools.partial(limit, pin=True, threaded=False)
        pairs.append(("coffer pinned", "limit pinned"))
        if before:
            serve["before pinned"] = functools.partial(coffer, before, pinned)
            pairs.append(("before pinned", "limit pinned"))
    if args.threaded_limit:
        serve["limit threaded"] = functools.partial(limit, pin=False, threaded=True)
        pairs.append(("coffer", "limit threaded"))
    if args.fixed:
        for kind in ("coffer", "raw"):
            for pin in (False, True) if args.pinned else (False,):
                name = f"{kind} fixed" + (" pinned" if pin else "")
                serve[name] = functools.partial(limit, pin=pin, threaded=False, fixed=(kind, home))
        pairs.append(("coffer fixed", "raw fixed"))
        if args.pinned:
            pairs.append(("coffer fixed pinned", "raw fixed pinned"))
    return serve, pairs


def report(
    runs: dict[str, list[dict[str, Any]]], pairs: list[tuple[str, str]], concurrency: int, setup: str
) -> None:
    """Print every load's figures, the open loads' schedule figures, the ratios coffer / limit and
    each server's verdict on the targets."""
    keys = ["loadavg", "p50", "p95", "p99", "rps", "non_200", "server_cpu_ms", "loop_cpu_ms", "client_cpu_ms"]
    rows = [
        [name, i + 1, label, *(r[k] for k in keys)]
        for name, rounds in runs.items()
        for i, results in enumerate(rounds)
        for label, r in results.items()
    ]
    heads = ["code", "round", "load", "load avg", "p50 ms", "p95 ms", "p99 ms", "req/s", "non-200"]
    heads += ["server CPU ms/req", "of it event loop", "client CPU ms/req"]
    print(
        table(
            heads,
            rows,
            title=f"REST recall beside the limit, {setup} (open: latency from the intended start)",
        )
    )
    opened = [
        [name, i + 1, *(r[k] for k in OPEN_KEYS)]
        for name, rounds in runs.items()
        for i, results in enumerate(rounds)
        for r in results.values()
        if "offered" in r
    ]
    if opened:
        heads = ["code", "round", "offered/s", "achieved/s", "p50 ms", "p99 ms", "sent->answer p50"]
        heads += ["p99", "behind p50 ms", "p99", "max", "sent free", "free: late p99 ms", "conns/process"]
        print(
            table(
                heads, opened, title="open loop: behind = sent - intended start; free = client idle when due"
            )
        )
    labels = list(next(iter(runs.values()))[0])
    for label in labels[1:] if len(labels) > 1 and label_is_closed(labels[0]) else labels:
        heads = ["coffer / limit", "round", "load coffer", "load limit", "req/s", "p50", "p95", "p99"]
        heads += ["server CPU", "event loop CPU"]
        print(table(heads, ratio_rows(runs, label, pairs), title=f"ratios, {label}"))
        for name, rounds in runs.items():
            figs = [res[label] for res in rounds]

            def each(key: str, figs: list[dict[str, Any]] = figs) -> str:
                return ", ".join(f"{f[key]:.2f}" for f in figs)

            print(
                f"{name}, {label}: req/s {each('rps')}; p50 {each('p50')} ms; server CPU "
                f"{each('server_cpu_ms')} ms/req; both targets met in "
                f"{sum(map(targets_met, figs))} of {len(figs)} rounds"
            )


def targets_met(fig: dict[str, Any]) -> bool:
    """Issue #15's pair: p50 <= 5 ms at >= 500 req/s (open loop: offered and kept up with)."""
    if "offered" in fig:
        rate_ok = fig["offered"] >= TARGET_RPS and fig["rps"] >= 0.98 * fig["offered"]
    else:
        rate_ok = fig["rps"] >= TARGET_RPS
    return bool(rate_ok and fig["p50"] <= TARGET_P50_MS)


OPEN_KEYS = ["offered", "rps", "p50", "p99", "service_p50", "service_p99", "behind_p50", "behind_p99"]
OPEN_KEYS += ["behind_max", "free_share", "late_free_p99", "split"]


def label_is_closed(label: str) -> bool:
    """True for the closed loop's one-client label (no ratios printed for it)."""
    return label.startswith("sequential")


def main(argv: list[str] | None = None) -> int:
    """Serve the limit (``--serve-limit``), or build, serve both in turn, load them and print."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--home", default=None, help="keep the built home here (reused when it exists)")
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2, help="alternations of coffer and the limit")
    parser.add_argument(
        "--workers", type=int, default=2, help="server processes of both (coffer-api --workers)"
    )
    parser.add_argument("--pinned", action="store_true", help="also serve both with each worker on one CPU")
    parser.add_argument("--threaded-limit", action="store_true", help="also a limit with coffer's thread hop")
    parser.add_argument(
        "--fixed", action="store_true", help="also both servers with a fixed answer (the serving path alone)"
    )
    parser.add_argument("--before", default=None, help="also serve the coffer code in this source tree")
    parser.add_argument("--client", choices=["httpx", "raw"], default="raw")
    parser.add_argument(
        "--rate", default=None, metavar="R", help="open loop: R requests/s offered in total (no closed loop)"
    )
    parser.add_argument("--rates", default=None, metavar="R,R,...", help="open loop at each of these rates")
    parser.add_argument("--arrivals", choices=list(ARRIVALS), default="uniform", help="open-loop schedule")
    parser.add_argument("--closed", action="store_true", help="with --rate(s): the closed loops too")
    parser.add_argument("--json", default=None, help="write the raw figures here")
    parser.add_argument("--serve-limit", default=None, metavar="DB", help=argparse.SUPPRESS)
    parser.add_argument("--serve-fixed", choices=["coffer", "raw"], default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_limit:
        serve_limit(
            args.serve_limit,
            args.port,
            args.workers,
            args.pinned,
            args.threaded_limit,
            args.serve_fixed,
            args.home or "",
        )
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="coffer-bench-rest-limit-"))
    env_info = environment(str(tmp))
    print_environment(env_info)
    home = Path(args.home) if args.home else tmp / "home"
    if not home.exists():
        print(f"writing {args.facts} facts ...", flush=True)
        build_home(home, args.facts)
    db = limit_db(home, tmp / "limit.db")
    qs = queries(args.requests)
    sizes = response_sizes(home, db, qs[0])
    rates = tuple(float(r) for r in (args.rates or args.rate or "").split(",") if r.strip())
    loads = {"rates": rates, "arrivals": args.arrivals, "closed": args.closed or not rates}
    serve, pairs = servers(args, home, db, qs, loads)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in serve}
    try:
        for _ in range(args.rounds):
            for name, run in serve.items():
                print(f"serving {name} ...", flush=True)
                runs[name].append(run())
        word_segments = (segments(home / "index.db"), segments(db))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print()
    print(
        f"{len(fact_files(home))} facts; response bytes coffer {sizes[0]}, limit {sizes[1]}; "
        f"FTS5 word segments coffer {word_segments[0]}, limit {word_segments[1]}"
    )
    report(runs, pairs, args.concurrency, f"{args.workers} workers, client {args.client}")
    write_json(args.json, {"environment": env_info, "sizes": sizes, "segments": word_segments, "runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
