"""A PostgreSQL index meeting its server down: how long requests take to be told, and how soon
after the server is back the first request is served.

A real server (started as the tests start one, ``tests/pg_server.py``) is stopped under a running
service whose pooled connections were found broken and dropped (``pool.check()``): the wall time
of the first keyword recall that meets it and of the next ones, then, after ``pg_ctl start``
returns, the time until a recall loop (one every 10 ms) is first served. Then a service starts
against a port that takes connections and never answers (``connect_timeout=2`` in the URL):
the first and the next requests. The limit: a direct connection to the stopped server (refused),
measured in the same run.

The code measured is the ``coffer_memory`` Python imports: put an older tree first on
``PYTHONPATH`` to measure it.

    .venv/bin/python bench/pg_outage.py [--requests 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))  # pg_server

import coffer_memory
from coffer_memory import IndexUnavailable, MemoryService, Settings


def _ms(call: Any) -> tuple[float, str]:
    start = time.perf_counter()
    try:
        call()
        said = "served"
    except IndexUnavailable as exc:
        said = "down since" if "down since" in str(exc) else "told"
    return round((time.perf_counter() - start) * 1000, 1), said


def _pg_ctl(server: Any, *args: str) -> None:
    options = f"-k {server.root} -h 127.0.0.1 -p {server.port} -c fsync=off -c full_page_writes=off"
    subprocess.run(
        [*server.prefix, server.pg_ctl, "-D", str(server.data), "-l", str(server.root / "log"), "-w",
         "-o", options, *args],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip


def running(requests: int) -> dict[str, Any]:
    """A running service whose server stops, then starts again."""
    import psycopg
    from pg_server import PgServer  # type: ignore[import-not-found]

    server = PgServer()
    try:
        with tempfile.TemporaryDirectory() as home:
            os.environ["COFFER_PG_URL"] = server.url()
            settings = Settings.load(Path(home), index={"backend": "postgresql"})
            with MemoryService(settings=settings) as svc:
                svc.remember("the sluice gate sticks", store="global")

                def recall() -> None:
                    svc.recall("sluice", stores=["global"], mode="keyword")

                recall()
                _pg_ctl(server, "-m", "fast", "stop")
                limit = []
                for _ in range(20):
                    start = time.perf_counter()
                    with contextlib.suppress(psycopg.Error):
                        psycopg.connect(server.url(), connect_timeout=2).close()
                    limit.append((time.perf_counter() - start) * 1000)
                svc.index._shared.backend.pool.check()  # type: ignore[union-attr]
                first = _ms(recall)
                later = [_ms(recall) for _ in range(requests)]
                _pg_ctl(server, "start")
                back = time.perf_counter()
                tries = 0
                while _ms(recall)[1] != "served":
                    tries += 1
                    time.sleep(0.01)
                lag = round((time.perf_counter() - back) * 1000, 1)
    finally:
        server.stop()
    return {
        "first_ms": first,
        "later_ms": later,
        "served_after_start_ms": lag,
        "refused_tries_after_start": tries,
        "limit_direct_refused_ms_p50": round(statistics.median(limit), 2),
    }


def blackhole(requests: int) -> dict[str, Any]:
    """A service starting against a port that takes connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    held: list[socket.socket] = []

    def take() -> None:
        while True:
            try:
                held.append(sock.accept()[0])
            except OSError:
                return

    threading.Thread(target=take, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as home:
            os.environ["COFFER_PG_URL"] = (
                f"postgresql://x@127.0.0.1:{sock.getsockname()[1]}/x?connect_timeout=2"
            )
            settings = Settings.load(Path(home), index={"backend": "postgresql"})
            with MemoryService(settings=settings) as svc:

                def recall() -> None:
                    svc.recall("anything", stores=["global"], mode="keyword")

                first = _ms(recall)
                later = [_ms(recall) for _ in range(requests)]
    finally:
        sock.close()
        for conn in held:
            conn.close()
    return {"first_ms": first, "later_ms": later, "connections_taken": len(held)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5, help="requests after the first")
    args = parser.parse_args()
    print(
        json.dumps(
            {
                "code": str(Path(coffer_memory.__file__).parent),
                "server_stops": running(args.requests),
                "start_against_blackhole": blackhole(args.requests),
            }
        )
    )


if __name__ == "__main__":
    main()
