"""Instructions per keyword recall, coffer beside the limit, counted by cachegrind.

CPU time on a shared 2-core machine swings by a third from run to run; the instructions a recall
executes do not. ``build`` writes a home as ``bench/limit.py`` builds it (the bench's facts, half
in a project store, half in the global store) and the limit's plain FTS5 file beside it. ``count``
runs ``run`` twice under ``valgrind --tool=cachegrind --cache-sim=no`` with ``PYTHONHASHSEED=0``,
once with the recalls and once without, and prints the difference divided by the recalls:

    .venv/bin/python bench/keyword_instructions.py build /tmp/ki --size 1000
    .venv/bin/python bench/keyword_instructions.py count /tmp/ki [--side limit] [--coffer-src DIR]

Each ``run`` opens a ``MemoryService`` on the home, runs ``reindex()`` (so every run starts from
the same full scan, the inotify feed armed), checkpoints the index's WAL (each page read searches
it), and then makes one first pass of the bench's questions. The process's first recall is a
warm-up outside the count, as in ``bench/limit.py``; then every question is asked once.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def _early_source() -> None:
    """Put ``--coffer-src`` first on sys.path before anything imports coffer_memory."""
    for i, arg in enumerate(sys.argv):
        if arg == "--coffer-src" and i + 1 < len(sys.argv):
            sys.path.insert(0, os.path.abspath(sys.argv[i + 1]))


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402, F401  (puts this checkout first on sys.path)
import apsw  # noqa: E402

_early_source()

from core import make_queries  # noqa: E402

from coffer_memory import MemoryService, Settings  # noqa: E402

QUERIES = 200
LIMIT = 10


def build(base: Path, size: int) -> None:
    """The home, the repository and the limit's index of ``size`` bench facts."""
    import time

    from _limit_corpus import write_corpus
    from _limit_side import index_schema, limit_rebuild

    home, repo = base / "home", base / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with MemoryService(settings=Settings.load(home)) as svc:
        files = write_corpus(svc, repo, size)
        time.sleep(2.1)  # past the racy window (see bench/limit.py)
        svc.reindex()
    limit_rebuild(base / "limit.db", files, index_schema(home / "index.db")).close()


def run(base: Path, side: str, recalls: int) -> None:
    """One pass of ``recalls`` of the bench's questions on ``side`` (coffer or limit)."""
    queries = make_queries(QUERIES)
    home, repo = base / "home", base / "repo"
    settings = Settings.load(home, reconcile_watch_full_scan_seconds=1e9)
    with MemoryService(settings=settings) as svc:
        svc.reindex()
        conn = svc.index.db.conn
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if side == "coffer":
            svc.recall(queries[0], cwd=repo, mode="keyword", limit=LIMIT)
            for q in queries[:recalls]:
                svc.recall(q, cwd=repo, mode="keyword", limit=LIMIT)
        else:
            from _limit_side import limit_keyword

            limit = apsw.Connection(str(base / "limit.db"))
            limit_keyword(limit, queries[0])
            for q in queries[:recalls]:
                limit_keyword(limit, q)


def instructions(args: list[str]) -> int:
    """The instructions cachegrind counts for ``python this-script run ...``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
             sys.executable, __file__, "run", *args],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
        assert found, done.stderr[-2000:]
        return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["build", "run", "count"])
    parser.add_argument("base", type=Path)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--side", choices=["coffer", "limit"], default="coffer")
    parser.add_argument("--recalls", type=int, default=QUERIES)
    parser.add_argument("--coffer-src", default=None, help="take coffer_memory from this source tree")
    args = parser.parse_args()
    if args.action == "build":
        build(args.base, args.size)
    elif args.action == "run":
        run(args.base, args.side, args.recalls)
    else:
        src = ["--coffer-src", args.coffer_src] if args.coffer_src else []
        common = [str(args.base), "--side", args.side, *src]
        total = instructions([*common, "--recalls", str(args.recalls)])
        base = instructions([*common, "--recalls", "0"])
        print(f"{args.side}: {(total - base) / args.recalls / 1e6:.3f} M instructions per recall")


if __name__ == "__main__":
    main()
