"""``coffer recall`` wall time per call on a 1k-fact store, as a user at a shell pays it.

A temporary COFFER_HOME gets ``--facts`` facts (half in the project store of a real temporary git
repository, half global) and one warm-up recall builds the index. Then each variant runs
``--calls`` times as a fresh subprocess, spawn to exit, the variants interleaved call by call so
machine load falls on all of them alike. Floors: the bare interpreter, and the interpreter plus
apsw running one FTS5 query on the same index (what a keyword recall cannot go below).

``--baseline DIR`` adds the same recall run from another source tree (e.g. ``git archive`` of an
older commit unpacked in DIR, put first on PYTHONPATH), so before and after come from one run.

    .venv/bin/python bench/cli_startup.py [--facts 1000] [--calls 30] [--baseline DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, ms, print_environment, summary, table, write_json
from hook import make_repo

from coffer_memory import MemoryService

TARGET_P50_MS = 300.0
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
        env = {**os.environ, "COFFER_HOME": str(home)}
        env.pop("PYTHONPATH", None)
        recall = [sys.executable, "-m", "coffer_memory._cli", "recall", "deploy runbook", "--limit", "10"]
        variants: list[tuple[str, list[str], dict[str, str]]] = [
            ("python -c pass (interpreter start)", [sys.executable, "-c", "pass"], env),
            (
                "python + apsw, one FTS5 query (floor)",
                [sys.executable, "-c", FLOOR_QUERY, str(home / "index.db")],
                env,
            ),
            ("coffer recall (keyword), this tree", recall, env),
        ]
        if args.baseline:
            baseline_env = {**env, "PYTHONPATH": str(Path(args.baseline).resolve())}
            variants.append(("coffer recall (keyword), baseline", recall, baseline_env))
        for _, argv, variant_env in variants:  # warm-up: index built, page cache hot, output checked
            proc = subprocess.run(
                argv, cwd=repo, env=variant_env, capture_output=True, text=True, check=False
            )
            if proc.returncode != 0 or (argv[-1] != "pass" and not proc.stdout.strip()):
                raise SystemExit(f"{argv} failed: {proc.stderr[-800:]}")
        times: dict[str, list[float]] = {label: [] for label, _, _ in variants}
        for _ in range(args.calls):
            for label, argv, variant_env in variants:
                start = time.perf_counter()
                subprocess.run(argv, cwd=repo, env=variant_env, capture_output=True, check=True)
                times[label].append(ms(time.perf_counter() - start))
        figures = {label: summary(values) for label, values in times.items()}
        floor = figures["python + apsw, one FTS5 query (floor)"]["p50"]
        rows = [
            [label, s["n"], s["p50"], s["p95"], s["max"], s["p50"] / floor] for label, s in figures.items()
        ]
        print(
            table(
                ["variant", "n", "p50 ms", "p95 ms", "max ms", "x floor"],
                rows,
                title=f"coffer recall wall time per call ({args.facts} facts, interleaved)",
            )
        )
        p50 = figures["coffer recall (keyword), this tree"]["p50"]
        print(f"\ntarget recall p50 <= {TARGET_P50_MS:.0f} ms: {'met' if p50 <= TARGET_P50_MS else 'missed'}")
        write_json(args.json, {"environment": env_info, "facts": args.facts, "figures": figures})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
