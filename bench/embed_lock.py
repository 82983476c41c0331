"""Writes that embed, beside keyword reads: how long a keyword recall takes while another thread
remembers facts (``--write journal``: appends journal entries) through an embedder taking
``--delay`` seconds a batch, the same recall with no write beside it (the limit), and the CPU
time of a remember itself with the docs' hash embedder (no delay).

The code measured is the ``coffer_memory`` Python imports: put an older tree first on
``PYTHONPATH`` to measure it (``git archive <rev> coffer_memory | tar -x -C /tmp/old``).

    .venv/bin/python bench/embed_lock.py [--delay 0.2] [--writes 25] [--remembers 300] [--write journal]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _repo import git_repo

import coffer_memory
from coffer_memory import MemoryService, Settings
from coffer_memory.plugins import get_plugin_manager, hookimpl

EXAMPLE = Path(__file__).parent.parent / "examples" / "coffer_hash_embedder.py"
MODES = {"retrieval_modes": ["keyword", "vector", "hybrid"], "default_mode": "keyword"}


def _hash_embedder() -> type:
    spec = importlib.util.spec_from_file_location("coffer_hash_embedder_bench", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.HashEmbedder  # type: ignore[no-any-return]


def _register(name: str, make: Callable[[], object]) -> None:
    class Plugin:
        @hookimpl
        def register_embedders(self, register: Callable[[str, object], None]) -> None:
            register(name, lambda _settings: make())

    get_plugin_manager().register(Plugin(), name=f"{name}-bench")


def _quantiles(values: Sequence[float]) -> dict[str, float]:
    cuts = statistics.quantiles(values, n=100)
    return {"p50": round(cuts[49], 3), "p95": round(cuts[94], 3)}


def recall_beside_writes(delay: float, writes: int, write: str = "remember") -> dict[str, Any]:
    """Keyword recall wall ms (p50, p95) while ``writes`` remembers (or journal appends) embed on
    another thread, and the same recall alone before them (the limit: no lock to wait for)."""
    base = _hash_embedder()

    class Slow(base):  # type: ignore[misc, valid-type]
        def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
            time.sleep(delay)
            return super().embed_batch(texts)  # type: ignore[no-any-return]

    _register("slow", lambda: Slow(64))
    walls: list[float] = []
    alone: list[float] = []
    with tempfile.TemporaryDirectory() as home:
        repo = git_repo(Path(home))
        settings = Settings.load(Path(home) / "home", embedding={"provider": "slow"}, memory=MODES)
        with MemoryService(settings=settings) as svc:
            for i in range(20):
                if write == "journal":
                    svc.journal_append(f"harbour entry {i}", cwd=repo)
                else:
                    svc.remember(f"harbour fact {i}", store="global")

            def recall() -> float:
                start = time.perf_counter()
                if write == "journal":
                    svc.recall("harbour", cwd=repo, mode="keyword")
                else:
                    svc.recall("harbour", stores=["global"], mode="keyword")
                return (time.perf_counter() - start) * 1000

            for _ in range(50):
                alone.append(recall())
            done = threading.Event()

            def writer() -> None:
                for i in range(writes):
                    if write == "journal":
                        svc.journal_append(f"the harbour master logs tide {i}", cwd=repo)
                    else:
                        svc.remember(f"the harbour master logs tide {i}", store="global")
                done.set()

            thread = threading.Thread(target=writer)
            thread.start()
            while not done.is_set():
                walls.append(recall())
                time.sleep(0.01)
            thread.join()
    beside = _quantiles(walls)
    limit = _quantiles(alone)
    return {
        "write": write,
        "recalls": len(walls),
        **beside,
        "alone": limit,
        "ratio_p50": round(beside["p50"] / limit["p50"], 2),
    }


def remember_cpu(count: int) -> dict[str, Any]:
    """CPU ms of this process per remember (p50, p95) with the hash embedder."""
    _register("hash-cpu", lambda: _hash_embedder()(64))
    cpu: list[float] = []
    with tempfile.TemporaryDirectory() as home:
        settings = Settings.load(Path(home), embedding={"provider": "hash-cpu"}, memory=MODES)
        with MemoryService(settings=settings) as svc:
            svc.remember("warm up fact", store="global")
            for i in range(count):
                start = time.process_time()
                svc.remember(
                    f"fact number {i} about the harbour, the tides and release {i % 17}", store="global"
                )
                cpu.append((time.process_time() - start) * 1000)
    return _quantiles(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the slow embedder takes a batch")
    parser.add_argument("--writes", type=int, default=25, help="remembers beside the recalls")
    parser.add_argument("--remembers", type=int, default=300, help="remembers timed for CPU")
    parser.add_argument(
        "--write", choices=["remember", "journal"], default="remember", help="the writes beside"
    )
    args = parser.parse_args()
    print(
        json.dumps(
            {
                "code": str(Path(coffer_memory.__file__).parent),
                "keyword_recall_wall_ms": recall_beside_writes(args.delay, args.writes, args.write),
                "remember_cpu_ms": remember_cpu(args.remembers),
            }
        )
    )


if __name__ == "__main__":
    main()
