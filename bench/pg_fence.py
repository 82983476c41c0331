"""What the lock fence costs a write on the shared PostgreSQL index (docs/team.md, 'A lost lock fences
the write'): ``remember`` through one service, with the fence (coffer's code) and without it (the
backend's ``check_lock`` replaced by a no-op on the same service), in interleaved rounds.

The fence is one round trip on the lock's own session (``pg_locks``) per file changed, so the
figure is that round trip beside the whole write (fsync'd file, local re-index, the push).
PostgreSQL comes from ``COFFER_PG_URL``, else a throwaway server is started as the tests do.

    .venv/bin/python bench/pg_fence.py [--writes 100] [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))  # pg_server

from _common import environment, ms, print_environment, summary, table, write_json

from coffer_memory import MemoryService
from coffer_memory._config import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writes", type=int, default=100, help="remembers per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    env = environment()
    print_environment(env)
    server = None
    url = os.environ.get("COFFER_PG_URL")
    if not url:
        from pg_server import PgServer, create_database

        server = PgServer()
        url = create_database(server.url(), "bench_fence")
    os.environ["COFFER_PG_URL"] = url
    times: dict[str, list[float]] = {"fenced": [], "unfenced": []}
    try:
        with tempfile.TemporaryDirectory(prefix="coffer-bench-fence-") as root:
            settings = Settings.load(Path(root) / "home", index={"backend": "postgresql"})
            with MemoryService(settings=settings) as svc:
                svc.remember("warm-up", store="global")
                backend: Any = svc.index.backend
                fenced = backend.check_lock
                for r in range(args.rounds):
                    for label in ("fenced", "unfenced") if r % 2 == 0 else ("unfenced", "fenced"):
                        backend.check_lock = fenced if label == "fenced" else (lambda store: None)
                        for i in range(args.writes):
                            start = time.perf_counter()
                            svc.remember(f"fact {label} {r} {i} about herons", store="global")
                            times[label].append(time.perf_counter() - start)
    finally:
        if server is not None:
            server.stop()
    figures = {label: summary(values) for label, values in times.items()}
    print(
        table(
            ("variant", "writes", "p50 ms", "p95 ms"),
            [(k, len(times[k]), ms(v["p50"]), ms(v["p95"])) for k, v in figures.items()],
        )
    )
    ratio = figures["fenced"]["p50"] / figures["unfenced"]["p50"]
    print(f"p50 fenced / unfenced: {ratio:.3f}")
    write_json(args.json, {"environment": env, "figures": figures, "ratio_p50": ratio})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
