"""A journal append to a day that already holds ``--entries`` entries, with the real default
embedder (``[embedding] provider = "auto"``): the texts the append gives the embedder and its
wall time, ``--appends`` appends, against the same append to an empty day (the limit, measured
in the same run).

The code measured is the ``coffer_memory`` Python imports: put an older tree first on
``PYTHONPATH`` to measure it (``bench/_common.py`` puts this checkout first: run a copy of this
file from the older tree's ``bench/``).

    .venv/bin/python bench/journal_embed.py [--entries 200] [--appends 10]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import ms, summary, table
from _repo import git_repo

import coffer_memory
from coffer_memory import MemoryService, Settings

MODES = {"retrieval_modes": ["keyword", "vector", "hybrid"], "default_mode": "keyword"}


def appends(entries: int, count: int) -> tuple[list[float], list[int]]:
    """Wall seconds and texts embedded of ``count`` appends to a day of ``entries`` entries."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = git_repo(Path(tmp))
        settings = Settings.load(Path(tmp) / "home", embedding={"provider": "auto"}, memory=MODES)
        with MemoryService(settings=settings) as svc:
            svc.journal_append("the day begins", cwd=repo)  # opens the index and its embedder
            vectors = svc.index.vectors
            assert vectors is not None, "no embedder: pip install 'coffer-memory[vector]'"
            embedder = vectors.embedder
            real = embedder.embed_batch
            given: list[int] = [0]  # the texts of the day's entries, then of each append

            def counted(texts: Sequence[str]) -> Sequence[Sequence[float]]:
                given[-1] += len(texts)
                return real(texts)

            embedder.embed_batch = counted  # type: ignore[method-assign]
            if entries:
                rows: list[tuple[str | None, str]] = [
                    (None, f"entry {i}: checked the sluice number {i} and logged its level")
                    for i in range(entries)
                ]
                svc.lanes.journal_append_parts(rows, cwd=repo)
            walls = []
            del given[0]
            for i in range(count):
                given.append(0)
                start = time.perf_counter()
                svc.journal_append(f"the otter crossed the weir at mark {i}", cwd=repo)
                walls.append(time.perf_counter() - start)
            return walls, given


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=200)
    parser.add_argument("--appends", type=int, default=10)
    args = parser.parse_args()
    empty, empty_texts = appends(0, args.appends)
    full, full_texts = appends(args.entries, args.appends)
    limit = summary([ms(s) for s in empty])
    rows = []
    for name, walls, texts in (("append to a new day (limit)", empty, empty_texts),
                               (f"append to a day of {args.entries}", full, full_texts)):  # fmt: skip
        s = summary([ms(w) for w in walls])
        rows.append((name, s["n"], sum(texts) / len(texts), s["p50"], s["p95"], s["p50"] / limit["p50"]))
    print(f"coffer_memory from {Path(coffer_memory.__file__).parent}")
    print(table(("case", "n", "texts embedded", "p50 ms", "p95 ms", "p50 / limit"), rows))


if __name__ == "__main__":
    main()
