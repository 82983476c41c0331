"""Shared helpers of the benchmark scripts: percentiles, aligned tables, environment facts."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as `python bench/x.py` from a checkout without an install
    sys.path.insert(0, str(REPO_ROOT))


def recall_modes(parser: argparse.ArgumentParser, modes: str | None, embedder: str | None) -> list[str]:
    """``--modes`` as a list (default grep,keyword, plus vector,hybrid when ``--embedder`` is given);
    vector or hybrid without an embedder is a usage error."""
    default = "grep,keyword,vector,hybrid" if embedder else "grep,keyword"
    chosen = [m.strip() for m in (modes or default).split(",") if m.strip()]
    if not embedder and any(m in ("vector", "hybrid") for m in chosen):
        parser.error("vector and hybrid need --embedder")
    return chosen


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct``-th percentile (0-100) with linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    rank = (len(ordered) - 1) * pct / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (rank - low))


def summary(values: Sequence[float]) -> dict[str, float]:
    """n, p50, p95, p99, max and mean of a list of figures."""
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values) if values else float("nan"),
        "mean": sum(values) / len(values) if values else float("nan"),
    }


def ms(seconds: float) -> float:
    """Seconds to milliseconds."""
    return seconds * 1000.0


@contextmanager
def stopwatch() -> Iterator[list[float]]:
    """``with stopwatch() as t: ...`` then ``t[0]`` holds the elapsed seconds."""
    box: list[float] = []
    start = time.perf_counter()
    try:
        yield box
    finally:
        box.append(time.perf_counter() - start)


def fmt(value: object, digits: int = 2) -> str:
    """A table cell: floats with ``digits`` decimals, NaN as '-', everything else str()."""
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        return f"{value:.{digits}f}"
    return str(value)


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    digits: int = 2,
    title: str | None = None,
    left: int = 1,
) -> str:
    """A plain-text table: the first ``left`` columns left-aligned, the others right-aligned."""
    cells = [[fmt(c, digits) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(values: Sequence[str]) -> str:
        out = []
        for i, value in enumerate(values):
            out.append(value.ljust(widths[i]) if i < left else value.rjust(widths[i]))
        return "  ".join(out).rstrip()

    parts = []
    if title:
        parts.append(title)
    parts.append(line(list(headers)))
    parts.append("  ".join("-" * w for w in widths))
    parts.extend(line(row) for row in cells)
    return "\n".join(parts)


def _run(args: list[str]) -> str:
    try:
        out = subprocess.run(args, capture_output=True, text=True, check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else ""


def environment(tmp: str | None = None) -> dict[str, Any]:
    """Date, machine and versions the figures were taken with."""
    import apsw

    from coffer_memory.plugins.builtin.grep import find_ripgrep

    rg = find_ripgrep()
    fs = "unknown"
    if tmp:
        out = subprocess.run(["df", "--output=fstype", tmp], capture_output=True, text=True, check=False)
        lines = out.stdout.split()
        fs = lines[-1] if out.returncode == 0 and len(lines) > 1 else _run(["stat", "-f", "-c", "%T", tmp])
    commit = _run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"])
    dirty = _run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--", "coffer_memory"])
    return {
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "commit": commit
        + (" (+ uncommitted changes in coffer_memory/)" if dirty not in ("", "unknown") else ""),
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "ripgrep": _run([rg, "--version"]) if rg else "not found",
        "tmp_filesystem": fs,
        "load_average_at_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def print_environment(env: dict[str, Any]) -> None:
    """The environment as a two-column table."""
    print(table(["environment", "value"], [[k, v] for k, v in env.items()], left=2))
    print()


def write_json(path: str | None, payload: dict[str, Any]) -> None:
    """Write ``payload`` to ``path`` (pretty JSON) when a path was given."""
    if not path:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    print(f"raw figures written to {path}")


def cached_bytecode(env: dict[str, str], folder: Path) -> dict[str, str]:
    """``env`` with bytecode cached under ``folder`` (``PYTHONPYCACHEPREFIX``), as an installed
    package has it. With ``PYTHONDONTWRITEBYTECODE`` set (this machine sets it) and an editable
    install, every start-up would compile every coffer module from source."""
    out = {**env, "PYTHONPYCACHEPREFIX": str(folder)}
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


Variant = tuple[str, list[str], bytes, dict[str, str]]
"""A label, the command, its standard input and its environment."""


def interleaved(variants: Sequence[Variant], calls: int, cwd: Path | None = None) -> dict[str, Any]:
    """Wall and CPU (user + system of the child) milliseconds of each variant, run ``calls`` times
    as fresh processes, the variants taking turns call by call so that load falls on all alike
    (one warm-up round first, not counted; a failing command stops the benchmark)."""
    import resource

    wall: dict[str, list[float]] = {label: [] for label, *_ in variants}
    cpu: dict[str, list[float]] = {label: [] for label, *_ in variants}
    for i in range(calls + 1):
        for label, argv, stdin, env in variants:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            proc = subprocess.run(argv, input=stdin, cwd=cwd, env=env, capture_output=True, check=False)
            elapsed = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if proc.returncode != 0:
                raise SystemExit(f"{argv} failed: {proc.stderr.decode(errors='replace')[-800:]}")
            if i:
                wall[label].append(ms(elapsed))
                used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                cpu[label].append(ms(used))
    return {label: {"wall": summary(wall[label]), "cpu": summary(cpu[label])} for label in wall}


def floor_table(figures: dict[str, Any], floor: str, title: str) -> str:
    """Wall p50/p95 and CPU p50 of each variant, each with its ratio to the ``floor`` variant's."""
    base = figures[floor]
    rows = [
        [
            label,
            f["wall"]["n"],
            f["wall"]["p50"],
            f["wall"]["p95"],
            f["wall"]["p50"] / base["wall"]["p50"],
            f["wall"]["p95"] / base["wall"]["p95"],
            f["cpu"]["p50"],
            f["cpu"]["p50"] / base["cpu"]["p50"],
        ]
        for label, f in figures.items()
    ]
    headers = ["variant", "n", "p50 ms", "p95 ms", "p50 x floor", "p95 x floor", "cpu p50 ms", "cpu x floor"]
    return table(headers, rows, title=title)
