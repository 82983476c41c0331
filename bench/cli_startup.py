"""``coffer recall`` wall time per call on a 1k-fact store, as a user at a shell pays it.

A temporary COFFER_HOME gets ``--facts`` facts (half in the project store of a real temporary git
repository, half global) and one warm-up recall builds the index. Then each variant runs
``--calls`` times as a fresh subprocess, spawn to exit, the variants interleaved call by call so
machine load falls on all of them alike. Floors: the bare interpreter, and the interpreter plus
apsw running one FTS5 query on the same index (what a keyword recall cannot go below).

``--baseline DIR`` adds the same recall run from another source tree (e.g. ``git archive`` of an
older commit unpacked in DIR, put first on PYTHONPATH), so before and after come from one run.

Every row gives wall p50 and p95 and CPU time (user + system of the child; on a loaded machine
wall time mostly measures the neighbours), each as a ratio to the floor's. Bytecode is cached
in a temporary PYTHONPYCACHEPREFIX, as an installed package has it (``PYTHONDONTWRITEBYTECODE``
would otherwise recompile every coffer module on every call).

    .venv/bin/python bench/cli_startup.py [--facts 1000] [--calls 30] [--baseline DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (
    Variant,
    cached_bytecode,
    environment,
    floor_table,
    interleaved,
    print_environment,
    write_json,
)
from hook import make_repo

from coffer_memory import MemoryService

TARGET_P50_MS = 300.0
TARGET_RATIO = 6.0
TOPICS = ("deploy", "database", "cache", "api", "tests", "release", "editor", "logging")
FLOOR_QUERY = (
    "import apsw, sys; c = apsw.Connection(sys.argv[1], flags=apsw.SQLITE_OPEN_READONLY); "
    "q = 'SELECT chunk_id, bm25(documents_fts) FROM documents_fts WHERE documents_fts MATCH ? "
    'ORDER BY 2 LIMIT 10\'; print(len(list(c.execute(q, (\'"deploy" OR "runbook"\',)))))'
)


def build_store(home: Path, repo: Path, facts: int) -> None:
    with MemoryService(home) as svc:
        for i in range(facts):
            topic = TOPICS[i % len(TOPICS)]
            text = f"Fact {i} about {topic}: step {i % 13} of the {topic} runbook uses make {topic}-{i % 7}."
            if i % 2:
                svc.remember(text, title=f"{topic}-{i}", scope="global")
            else:
                svc.remember(text, title=f"{topic}-{i}", cwd=repo)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--baseline", default=None, help="a source tree to compare against (PYTHONPATH)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    env_info = environment()
    print_environment(env_info)
    tmp = Path(tempfile.mkdtemp(prefix="coffer-bench-cli-"))
    try:
        home, repo = tmp / "home", make_repo(tmp / "repo")
        build_store(home, repo, args.facts)
        env = cached_bytecode({**os.environ, "COFFER_HOME": str(home)}, tmp / "pycache")
        env.pop("PYTHONPATH", None)
        recall = [sys.executable, "-m", "coffer_memory._cli", "recall", "deploy runbook", "--limit", "10"]
        floor = "python + apsw, one FTS5 query (floor)"
        variants: list[Variant] = [
            ("python -c pass (interpreter start)", [sys.executable, "-c", "pass"], b"", env),
            (floor, [sys.executable, "-c", FLOOR_QUERY, str(home / "index.db")], b"", env),
            ("coffer recall (keyword), this tree", recall, b"", env),
        ]
        if args.baseline:
            baseline_env = {**env, "PYTHONPATH": str(Path(args.baseline).resolve())}
            # Trees from before the private-module rename run the CLI as coffer_memory.cli.
            old = (Path(args.baseline) / "coffer_memory" / "cli").is_dir()
            base_recall = [*recall[:2], "coffer_memory.cli", *recall[3:]] if old else recall
            variants.append(("coffer recall (keyword), baseline", base_recall, b"", baseline_env))
        figures = interleaved(variants, args.calls, cwd=repo)
        title = f"coffer recall per call ({args.facts} facts, interleaved, load {os.getloadavg()[0]:.1f} at the end)"
        print(floor_table(figures, floor, title))
        p50 = figures["coffer recall (keyword), this tree"]["wall"]["p50"]
        ratio = p50 / figures[floor]["wall"]["p50"]
        print(
            f"\ntarget recall p50 <= {TARGET_P50_MS:.0f} ms and <= {TARGET_RATIO:.0f}x the floor: "
            f"{p50:.0f} ms ({'met' if p50 <= TARGET_P50_MS else 'missed'}), "
            f"{ratio:.1f}x ({'met' if ratio <= TARGET_RATIO else 'missed'})"
        )
        write_json(args.json, {"environment": env_info, "facts": args.facts, "figures": figures})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
