"""``coffer-mcp`` start-up as an agent pays it: spawn to ``initialize``, ``tools/list`` and a first
``tools/call`` answered.

Each run starts ``coffer-mcp`` (stdio, a temporary COFFER_HOME) and speaks JSON-RPC lines to it as
an agent does: ``initialize``, then ``notifications/initialized`` and ``tools/list``, then one
``coffer__list_memory`` call (which needs the MCP SDK loaded and the server built). Agents build
their tool list from the first two; Codex (>= 0.147) leaves out a server that has not answered them
within 1 s. Rows: ``coffer-mcp`` as installed (the handshake answered before the SDK is imported),
the same with ``COFFER_MCP_FAST_HANDSHAKE=0`` (import the SDK, then serve: the path before session
8), and baselines splitting the cost: the bare interpreter, the SDK's server import alone and the
MCP adapter's import. The rows take turns run by run, with bytecode cached as an installed package
has it; ``--baseline DIR`` adds ``coffer-mcp`` run from another source tree (PYTHONPATH).

    .venv/bin/python bench/mcp_startup.py [--runs 10] [--baseline DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
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

MCP = str(Path(sys.executable).parent / "coffer-mcp")
STEPS = ("initialize", "tools/list", "tools/call")


def spawned(argv: list[str]) -> dict[str, float]:
    """Wall seconds of one fresh process (its only step: exit)."""
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return {"exit": time.perf_counter() - start}


def session(env: dict[str, str]) -> dict[str, float]:
    """Seconds from spawning coffer-mcp to each answer of an agent's opening exchange."""
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    }
    call = {"name": "coffer__list_memory", "arguments": {"scope": "global"}}
    messages = [
        [{"id": 0, "method": "initialize", "params": init}],
        [{"method": "notifications/initialized"}, {"id": 1, "method": "tools/list"}],
        [{"id": 2, "method": "tools/call", "params": call}],
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(
        [MCP],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
    )
    assert proc.stdin is not None and proc.stdout is not None
    seconds: dict[str, float] = {}
    try:
        for step, batch in zip(STEPS, messages, strict=True):
            for message in batch:
                proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
            proc.stdin.flush()
            answer = json.loads(proc.stdout.readline())
            if "result" not in answer or answer["result"].get("isError"):
                raise SystemExit(f"coffer-mcp failed at {step}: {answer}")
            seconds[step] = time.perf_counter() - start
    finally:
        proc.stdin.close()
        proc.wait(120)
    return seconds


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
        os.environ["COFFER_HOME"] = str(home / "home")
        floor = "python -c pass (interpreter start)"
        runs: dict[str, Callable[[], dict[str, float]]] = {
            floor: lambda: spawned([sys.executable, "-c", "pass"]),
            "python -c 'import mcp.server.mcpserver' (the SDK)": lambda: spawned(
                [sys.executable, "-c", "import mcp.server.mcpserver"]
            ),
            "python -c 'import coffer_memory_mcp.server'": lambda: spawned(
                [sys.executable, "-c", "import coffer_memory_mcp.server"]
            ),
            "coffer-mcp (handshake before the SDK)": lambda: session({}),
            "coffer-mcp, COFFER_MCP_FAST_HANDSHAKE=0 (SDK first)": lambda: session(
                {"COFFER_MCP_FAST_HANDSHAKE": "0"}
            ),
        }
        if args.baseline:
            base = str(Path(args.baseline).resolve())
            runs["coffer-mcp from --baseline"] = lambda: session({"PYTHONPATH": base})
        seconds: dict[str, dict[str, list[float]]] = {label: {} for label in runs}
        for i in range(args.runs + 1):  # the first round warms the page and bytecode caches; not counted
            for label, run in runs.items():
                took = run()
                for step, value in took.items():
                    if i:
                        seconds[label].setdefault(step, []).append(value)
        figures = {
            label: {step: summary([ms(x) for x in values]) for step, values in steps.items()}
            for label, steps in seconds.items()
        }
        floor_ms = figures[floor]["exit"]["p50"]
        rows = []
        for label, steps in figures.items():
            cells: list[object] = [label, next(iter(steps.values()))["n"]]
            for step in STEPS:
                cells.append(steps[step]["p50"] if step in steps else "")
            last = steps.get("tools/list") or steps["exit"]
            cells += [last["p95"], last["p50"] / floor_ms]
            rows.append(cells)
        headers = ["variant", "n", "initialize p50", "tools/list p50", "tools/call p50", "p95 *", "x floor *"]
        title = f"coffer-mcp start-up, ms from spawn (interleaved, load {os.getloadavg()[0]:.1f} at the end)"
        print(table(headers, rows, title=title))
        print("* of tools/list answered (an agent's tool list), or of the process exit for the python rows")
        write_json(args.json, {"environment": env_info, "figures": figures})
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
