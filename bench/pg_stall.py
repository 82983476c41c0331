"""A PostgreSQL server that stops answering mid-connection (every process of it stopped with
SIGSTOP): how long the first keyword recall on the shared index takes to be told, the next ones,
and how soon after SIGCONT a recall is served; and, on the live server, the wall time of keyword
recalls (what the deadline on each use of a connection costs).

A real server (started as the tests start one, ``tests/pg_server.py``). The first recall is
waited for ``--cap`` seconds at most (an older coffer waits forever). The code measured is the
``coffer_memory`` Python imports: put an older tree first on ``PYTHONPATH`` to measure it.

    .venv/bin/python bench/pg_stall.py [--timeout 2] [--recalls 300] [--cap 60]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))  # pg_server

from _common import ms, summary, table

import coffer_memory
from coffer_memory import IndexUnavailable, MemoryService, Settings
from coffer_memory._config import IndexSettings


def _pids(server: object) -> list[int]:
    data = server.data  # type: ignore[attr-defined]
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    out = [postmaster]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if ppid == postmaster:
                out.append(int(entry))
    return out


def _recall(svc: MemoryService) -> str:
    try:
        svc.recall("keeper", stores=["global"], mode="keyword")
        return "served"
    except IndexUnavailable as exc:
        return "down since" if "down since" in exc.message else "told"


def main() -> None:
    from pg_server import PgServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--recalls", type=int, default=300)
    parser.add_argument("--cap", type=float, default=60.0)
    args = parser.parse_args()
    has_knob = "timeout_seconds" in {f.name for f in dataclasses.fields(IndexSettings)}
    server = PgServer()
    try:
        os.environ["COFFER_PG_URL"] = server.url()
        index = {"backend": "postgresql", **({"timeout_seconds": args.timeout} if has_knob else {})}
        with tempfile.TemporaryDirectory() as tmp:
            svc = MemoryService(settings=Settings.load(Path(tmp) / "home", index=index))
            svc.remember("the lock keeper sleeps at noon", store="global")
            walls = []
            for _ in range(args.recalls):
                start = time.perf_counter()
                _recall(svc)
                walls.append(ms(time.perf_counter() - start))
            pids = _pids(server)
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            rows: list[tuple[object, ...]] = []
            try:
                box: list[str] = []
                start = time.perf_counter()
                thread = threading.Thread(target=lambda: box.append(_recall(svc)), daemon=True)
                thread.start()
                thread.join(args.cap)
                first = ms(time.perf_counter() - start)
                rows.append(("first recall", first, box[0] if box else f"still waiting after {args.cap:g} s"))
                if box:
                    for i in range(3):
                        start = time.perf_counter()
                        said = _recall(svc)
                        rows.append((f"next recall {i + 1}", ms(time.perf_counter() - start), said))
            finally:
                for pid in pids:
                    os.kill(pid, signal.SIGCONT)
            start = time.perf_counter()
            while _recall(svc) != "served" and time.perf_counter() - start < 120:
                time.sleep(0.01)
            rows.append(("served after SIGCONT", ms(time.perf_counter() - start), ""))
            if box:
                svc.close()
    finally:
        server.stop()
    live = summary(walls)
    print(f"coffer_memory from {Path(coffer_memory.__file__).parent}; [index] timeout_seconds "
          f"{args.timeout:g}" + ("" if has_knob else " (no such setting here)"))  # fmt: skip
    print(
        table(
            ("case", "n", "p50 ms", "p95 ms"),
            [("keyword recall, live server", live["n"], live["p50"], live["p95"])],
        )
    )
    print(table(("server stopped (SIGSTOP)", "wall ms", "said"), rows))


if __name__ == "__main__":
    main()
