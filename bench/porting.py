"""Export and import: wall-clock seconds for a store of ``--facts`` facts, through the public calls.

The facts are seeded as fact files in the global store (as a user or a sync tool would put them)
and indexed once; then ``export_memory`` (zip, JSONL), ``import_memory`` of the zip into a fresh
home (dry run, first run, second run that writes nothing) and of an MCP ``memory.jsonl`` with as
many entities are timed once each. Figures are seconds in this process.

    .venv/bin/python bench/porting.py [--facts 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, print_environment, table
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


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--facts", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coffer-bench-porting-") as tmp:
        print_environment(environment(tmp))
        root = Path(tmp)
        rows: list[list[object]] = []
        with MemoryService(root / "source") as svc:
            seed(svc, args.facts)
            seconds, report = timed(lambda: svc.export_memory(root / "e.zip"))
            rows.append(["export zip", seconds, f"{report.files} files, {report.size} bytes"])
            seconds, report = timed(lambda: svc.export_memory(root / "e.jsonl", format="jsonl"))
            rows.append(["export jsonl", seconds, f"{report.files} files, {report.size} bytes"])
        with MemoryService(root / "fresh") as fresh:
            for label, dry in (
                ("import zip, dry run", True),
                ("import zip", False),
                ("import zip again", False),
            ):
                seconds, result = timed(lambda dry=dry: fresh.import_memory(root / "e.zip", dry_run=dry))
                rows.append([label, seconds, f"{result.counts}"])
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
        with MemoryService(root / "graph") as svc:
            seconds, result = timed(lambda: svc.import_memory(graph))
            rows.append(["import mcp-memory", seconds, f"{result.counts}"])
            seconds, result = timed(lambda: svc.import_memory(graph))
            rows.append(["import mcp-memory again", seconds, f"{result.counts}"])
        print(table(["step", "seconds", "result"], rows, digits=2))


if __name__ == "__main__":
    main()
