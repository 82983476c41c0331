"""Export and import: wall-clock seconds for a store of ``--facts`` facts, through the public calls.

The facts are seeded as fact files in the global store (as a user or a sync tool would put them)
and indexed once; then ``export_memory`` (zip, JSONL), ``import_memory`` of the zip into a fresh
home (dry run, first run, second run that writes nothing) and of an MCP ``memory.jsonl`` with as
many entities are timed ``--repeat`` times each (fresh homes), with the physical limit of a
restore measured in the same run: the same files written, fsync'ed and renamed, each folder
fsync'ed once. Figures are seconds in this process: median, p95, per file and times the floor.

    .venv/bin/python bench/porting.py [--facts 1000] [--repeat 3] [--skip-mcp] [--export-only]

``cpu s`` is the process's user and system time of the step (median): on a shared machine the
wall clock swings with the load, the CPU time much less.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, percentile, print_environment, table
from filters import SEED, WORDS  # the same seeded developer vocabulary

from coffer_memory import MemoryService
from coffer_memory._models import MemoryFact
from coffer_memory._store.files import fact_id_for, render_fact


def seed(svc: MemoryService, count: int) -> None:
    rng = random.Random(SEED)
    sp = svc.paths("global")
    sp.inbox.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    for i in range(count):
        body = " ".join(rng.choice(WORDS) for _ in range(60))
        rel = f"knowledge/inbox/fact-{i}.md"
        fact = MemoryFact(
            id=fact_id_for("global", rel, now),
            title=f"fact {i}",
            description=body[:80],
            body=body,
            actor="user",
            origin_session_id=None,
            created_at=now,
            updated_at=now,
        )
        (sp.root / rel).write_bytes(render_fact(fact))
    svc.reindex("global")


CPU: dict[str, list[float]] = {}  # user + system seconds of each step, by step


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(fn: Callable[[], Any], step: str = "") -> tuple[float, Any]:
    cpu, start = _cpu(), time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    if step:
        CPU.setdefault(step, []).append(_cpu() - cpu)
    return seconds, result


def durable_floor(folder: Path, files: list[tuple[str, bytes]]) -> float:
    """Seconds to write ``files`` as durably as an import must: each to a temp file, fsync'ed,
    renamed into place, then each folder fsync'ed once (the physical limit of a restore)."""
    start = time.perf_counter()
    folders: set[Path] = set()
    for rel, data in files:
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(".tmp-" + path.name)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
        folders.add(path.parent)
    for each in folders:
        fd = os.open(each, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each step (fresh homes)")
    parser.add_argument("--skip-mcp", action="store_true", help="time the coffer steps only")
    parser.add_argument("--export-only", action="store_true", help="time the exports only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coffer-bench-porting-") as tmp:
        print_environment(environment(tmp))
        root = Path(tmp)
        times: dict[str, list[float]] = {}
        notes: dict[str, str] = {}

        def record(step: str, seconds: float, note: str) -> None:
            times.setdefault(step, []).append(seconds)
            notes[step] = note

        with MemoryService(root / "source") as svc:
            seed(svc, args.facts)
            for _ in range(args.repeat):
                seconds, report = timed(lambda: svc.export_memory(root / "e.zip"), "export zip")
                record("export zip", seconds, f"{report.files} files, {report.size} bytes")
                seconds, report = timed(
                    lambda: svc.export_memory(root / "e.jsonl", format="jsonl"), "export jsonl"
                )
                record("export jsonl", seconds, f"{report.files} files, {report.size} bytes")
        with zipfile.ZipFile(root / "e.zip") as zf:
            members = [(n, zf.read(n)) for n in zf.namelist() if n != "manifest.json"]
        for run in range(0 if args.export_only else args.repeat):
            record("floor: durable write of the files", durable_floor(root / f"floor-{run}", members), "")
            with MemoryService(root / f"fresh-{run}") as fresh:
                for label, dry in (
                    ("import zip, dry run", True),
                    ("import zip", False),
                    ("import zip again", False),
                ):
                    seconds, result = timed(partial(fresh.import_memory, root / "e.zip", dry_run=dry), label)
                    record(label, seconds, f"{result.counts}")
        graph = root / "memory.jsonl"
        rng = random.Random(SEED)
        with graph.open("w") as handle:
            for i in range(args.facts):
                obs = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(3)]
                handle.write(
                    json.dumps(
                        {"type": "entity", "name": f"e{i}", "entityType": "thing", "observations": obs}
                    )
                    + "\n"
                )
        for run in range(0 if args.skip_mcp or args.export_only else args.repeat):
            with MemoryService(root / f"graph-{run}") as svc:
                seconds, result = timed(lambda: svc.import_memory(graph), "import mcp-memory")
                record("import mcp-memory", seconds, f"{result.counts}")
                seconds, result = timed(lambda: svc.import_memory(graph), "import mcp-memory again")
                record("import mcp-memory again", seconds, f"{result.counts}")
        floor = statistics.median(times.get("floor: durable write of the files", [math.nan]))
        rows: list[list[object]] = []
        for step, values in times.items():
            median = statistics.median(values)
            rows.append(
                [
                    step,
                    median,
                    percentile(values, 95),
                    statistics.median(CPU[step]) if step in CPU else math.nan,
                    1000 * median / max(len(members), 1),
                    median / floor,
                    notes[step],
                ]
            )
        print(
            table(
                ["step", "median s", "p95 s", "cpu s", "ms per file", "x floor", "result"],
                rows,
                digits=2,
                title=f"{args.repeat} run(s) each; floor = each file written, fsync'ed and renamed, "
                "each folder fsync'ed once",
            )
        )


if __name__ == "__main__":
    main()
