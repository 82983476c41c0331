"""``coffer-mcp`` start-up as an agent pays it: spawn to an answered ``tools/list``.

Each run starts ``coffer-mcp`` (stdio, a temporary COFFER_HOME) through the same client that
``coffer agents status`` and ``coffer doctor`` use (``coffer_memory._agents.probe``), sends
``initialize`` and ``tools/list``, and stops it. The baseline rows split the cost: the bare
interpreter, and the interpreter importing the MCP adapter (which imports the SDK).

    .venv/bin/python bench/mcp_startup.py [--runs 10] [--json out.json]
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

from coffer_memory._agents.probe import check_mcp_server

MCP = str(Path(sys.executable).parent / "coffer-mcp")


def spawned(argv: list[str], runs: int) -> list[float]:
    """Wall seconds of ``runs`` fresh processes."""
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    env_info = environment()
    print_environment(env_info)
    home = Path(tempfile.mkdtemp(prefix="coffer-bench-mcp-"))
    try:
        starts = []
        for _ in range(args.runs + 1):  # the first run warms the page cache; not counted
            check = check_mcp_server([MCP], {"COFFER_HOME": str(home)}, timeout=120)
            if not check.ok:
                raise SystemExit(f"coffer-mcp failed: {check.summary()}")
            starts.append(check.seconds)
        variants = [
            ("python -c pass (interpreter start)", spawned([sys.executable, "-c", "pass"], args.runs)),
            (
                "python -c 'import coffer_memory_mcp'",
                spawned([sys.executable, "-c", "import coffer_memory_mcp"], args.runs),
            ),
            ("coffer-mcp spawn -> tools/list answered", starts[1:]),
        ]
        rows, figures = [], {}
        for label, seconds in variants:
            s = summary([ms(x) for x in seconds])
            figures[label] = s
            rows.append([label, s["n"], s["p50"], s["p95"], s["max"]])
        print(table(["variant", "n", "p50 ms", "p95 ms", "max ms"], rows, title="coffer-mcp start-up"))
        write_json(args.json, {"environment": env_info, "figures": figures})
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
