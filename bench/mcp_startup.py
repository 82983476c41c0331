"""``coffer-mcp`` start-up as an agent pays it: spawn to an answered ``tools/list``.

Each run starts ``coffer-mcp`` (stdio, a temporary COFFER_HOME) through the same client that
``coffer agents status`` and ``coffer doctor`` use (``coffer_memory._agents.probe``), sends
``initialize`` and ``tools/list``, and stops it. The baseline rows split the cost: the bare
interpreter, the interpreter importing the SDK's server alone (what coffer cannot avoid) and
the interpreter importing the MCP adapter. The rows take turns run by run, with bytecode cached
as an installed package has it; ``--baseline DIR`` adds ``coffer-mcp`` run from another source
tree (PYTHONPATH), so before and after come from one run.

    .venv/bin/python bench/mcp_startup.py [--runs 10] [--baseline DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import cached_bytecode, environment, ms, print_environment, summary, table, write_json

from coffer_memory._agents.probe import check_mcp_server

MCP = str(Path(sys.executable).parent / "coffer-mcp")


def spawned(argv: list[str]) -> float:
    """Wall seconds of one fresh process."""
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--baseline", default=None, help="a source tree to compare against (PYTHONPATH)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    env_info = environment()
    print_environment(env_info)
    home = Path(tempfile.mkdtemp(prefix="coffer-bench-mcp-"))
    try:
        os.environ.update(cached_bytecode(dict(os.environ), home / "pycache"))
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ.pop("PYTHONPATH", None)
        extra = {"COFFER_HOME": str(home / "home")}

        def probe(env: dict[str, str]) -> float:
            check = check_mcp_server([MCP], {**extra, **env}, timeout=120)
            if not check.ok:
                raise SystemExit(f"coffer-mcp failed: {check.summary()}")
            return check.seconds

        floor = "python -c pass (interpreter start)"
        runs: dict[str, Callable[[], float]] = {
            floor: lambda: spawned([sys.executable, "-c", "pass"]),
            "python -c 'import mcp.server.mcpserver' (the SDK)": lambda: spawned(
                [sys.executable, "-c", "import mcp.server.mcpserver"]
            ),
            "python -c 'import coffer_memory_mcp'": lambda: spawned(
                [sys.executable, "-c", "import coffer_memory_mcp"]
            ),
            "coffer-mcp spawn -> tools/list answered": lambda: probe({}),
        }
        if args.baseline:
            base = str(Path(args.baseline).resolve())
            runs["coffer-mcp spawn -> tools/list answered, baseline"] = lambda: probe({"PYTHONPATH": base})
        seconds: dict[str, list[float]] = {label: [] for label in runs}
        for i in range(args.runs + 1):  # the first round warms the page and bytecode caches; not counted
            for label, run in runs.items():
                took = run()
                if i:
                    seconds[label].append(took)
        figures = {label: summary([ms(x) for x in values]) for label, values in seconds.items()}
        rows = [
            [label, s["n"], s["p50"], s["p95"], s["p50"] / figures[floor]["p50"]]
            for label, s in figures.items()
        ]
        title = f"coffer-mcp start-up (interleaved, load {os.getloadavg()[0]:.1f} at the end)"
        print(table(["variant", "n", "p50 ms", "p95 ms", "p50 x floor"], rows, title=title))
        write_json(args.json, {"environment": env_info, "figures": figures})
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
