"""What ``coffer agents status`` spends on its MCP check: ``check_mcp_server`` on ``coffer-mcp``,
start to return (the server's ``initialize`` and ``tools/list`` answers, then its exit on EOF).

Rows take turns run by run: this tree's ``coffer-mcp`` and, with ``--baseline EXE``, another build's
(e.g. ``/work/main/.venv/bin/coffer-mcp``). Each run uses the same temporary COFFER_HOME, so the
handshake snapshot recorded on a first start is in place for the rest (as on a user's machine).

    .venv/bin/python bench/agents_status_probe.py [--runs 10] [--baseline EXE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from coffer_memory._agents.probe import check_mcp_server


def main() -> int:
    """Print the median and each run's seconds per row, and the ratio to the baseline."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--baseline", help="another coffer-mcp executable to compare with")
    args = parser.parse_args()
    rows = {"this tree": str(Path(sys.executable).parent / "coffer-mcp")}
    if args.baseline:
        rows["baseline"] = args.baseline
    seconds: dict[str, list[float]] = {name: [] for name in rows}
    with tempfile.TemporaryDirectory() as home:
        env = {"COFFER_HOME": home}
        for exe in rows.values():  # a first start records the handshake in the home: not measured
            check_mcp_server([exe], env)
        for _ in range(args.runs):
            for name, exe in rows.items():
                started = time.monotonic()
                check = check_mcp_server([exe], env)
                seconds[name].append(time.monotonic() - started)
                assert check.ok, check.summary()
    for name, values in seconds.items():
        print(f"{name:10} median {statistics.median(values):.2f} s  " + " ".join(f"{v:.2f}" for v in values))
    if args.baseline:
        ratio = statistics.median(seconds["baseline"]) / statistics.median(seconds["this tree"])
        print(f"baseline / this tree: {ratio:.1f}x")
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
