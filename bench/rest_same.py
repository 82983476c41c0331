"""Two codes serve the same store: are their recall answers byte for byte the same?

Serves the home with ``coffer-api`` from ``--before DIR`` (a source tree first on ``PYTHONPATH``,
e.g. ``git archive main`` unpacked) and from this checkout, one after the other, sends both the
same ``--requests`` recall requests of ``bench/rest.py`` (plus a few with other parameters) and
compares status, Content-Type and body bytes. Exits 1 on the first difference.

    .venv/bin/python bench/rest_same.py --home DIR --before DIR [--requests 300] [--server-args ARGS]
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import httpx
from rest import free_port, queries, recall_params, wait_ready

PATH = "/api/v1/memory_stores/recall"


def requests(n: int) -> list[str]:
    """The bench's recall requests, then some with other parameters and refusals."""
    odd = [
        {"query": "deploy", "store": "global", "limit": 1},
        {"query": "docker cache", "store": "global", "mode": "grep"},
        {"query": "zz", "store": "global"},
        {"query": "deploy", "store": "global", "limit": 0},
        {"query": "deploy", "store": "nope"},
        {"query": "", "store": "global"},
    ]
    return [f"{PATH}?{urlencode(p)}" for p in [*map(recall_params, queries(n)), *odd]]


def answers(home: Path, pythonpath: str | None, server_args: list[str], urls: list[str]) -> list[bytes]:
    """Serve ``home`` with the code on ``pythonpath`` and fetch every URL: status, type, body."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "coffer_memory_fastapi.cli", "--port", str(port), "--log-level", "warning"]
    env = {**os.environ, "COFFER_HOME": str(home)}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.Popen([*cmd, *server_args], env=env, cwd=home)
    try:
        wait_ready(base, proc)
        with httpx.Client(base_url=base, timeout=30) as http:
            out = []
            for url in urls:
                r = http.get(url)
                out.append(f"{r.status_code} {r.headers.get('content-type')}\n".encode() + r.content)
            return out
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    """Fetch from both codes and compare."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--home", required=True, help="a coffer home (bench/rest.py --home)")
    parser.add_argument("--before", required=True, help="the other code's source tree")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--server-args", default="", help="more coffer-api arguments for both")
    args = parser.parse_args(argv)
    urls = requests(args.requests)
    extra = shlex.split(args.server_args)
    home = Path(args.home)
    before = answers(home, os.path.abspath(args.before), extra, urls)
    after = answers(home, None, extra, urls)
    for url, a, b in zip(urls, before, after, strict=True):
        if a != b:
            print(f"DIFFERENT: {url}\n  before: {a[:300]!r}\n  after:  {b[:300]!r}")
            return 1
    total = sum(len(b) for b in after)
    print(f"{len(urls)} recall requests: status, Content-Type and body bytes the same ({total} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
