"""A ``remember`` beside a ``reindex``: how long each remember takes while another thread
rebuilds the index of N facts with the real default embedder (``[embedding] provider = "auto"``),
and the same remember with nothing beside it (the limit, measured in the same run).

The code measured is the ``coffer_memory`` Python imports: put an older tree first on
``PYTHONPATH`` to measure it (``git archive <rev> coffer_memory | tar -x -C /tmp/old``).

    .venv/bin/python bench/reindex_lock.py [--facts 400] [--alone 20]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from _common import ms, summary, table

import coffer_memory
from coffer_memory import MemoryService, Settings

MODES = {"retrieval_modes": ["keyword", "vector", "hybrid"], "default_mode": "keyword"}
WORDS = [
    "otter",
    "heron",
    "kestrel",
    "plover",
    "badger",
    "marten",
    "vole",
    "shrew",
    "stoat",
    "weasel",
    "dipper",
    "wren",
]


def _text(i: int) -> str:
    """A fact of a dozen words, different for each ``i``."""
    return " ".join(WORDS[(i * 7 + k * 5) % len(WORDS)] for k in range(12)) + f" number {i}"


def measure(facts: int, alone: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        settings = Settings.load(home, embedding={"provider": "auto"}, memory=MODES)
        with MemoryService(settings=settings) as svc:
            inbox = svc.remember("the first fact", store="global").path.parent
            for i in range(facts - 1):  # by hand: the reindex indexes and embeds them
                (inbox / f"fact-{i}.md").write_text(_text(i) + "\n", encoding="utf-8")
            svc.reindex("global")
            limit = []
            for i in range(alone):
                start = time.perf_counter()
                svc.remember(f"a fact on its own number {i}", store="global")
                limit.append(time.perf_counter() - start)
            done = threading.Event()
            took: list[float] = []

            def rebuild() -> None:
                start = time.perf_counter()
                try:
                    svc.reindex("global", rebuild=True)
                finally:
                    took.append(time.perf_counter() - start)
                    done.set()

            thread = threading.Thread(target=rebuild)
            thread.start()
            beside = []
            i = 0
            while not done.is_set():  # every remember begun while the reindex runs counts
                start = time.perf_counter()
                svc.remember(f"a fact beside the reindex number {i}", store="global")
                beside.append(time.perf_counter() - start)
                i += 1
            thread.join()
    return {"alone": summary([ms(s) for s in limit]), "beside": summary([ms(s) for s in beside]),
            "reindex_s": took[0]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=400)
    parser.add_argument("--alone", type=int, default=20)
    args = parser.parse_args()
    got = measure(args.facts, args.alone)
    alone, beside = got["alone"], got["beside"]
    assert isinstance(alone, dict) and isinstance(beside, dict)
    print(f"coffer_memory from {Path(coffer_memory.__file__).parent}; {args.facts} facts; "
          f"reindex --rebuild took {got['reindex_s']:.2f} s")  # fmt: skip
    rows = [
        (name, s["n"], s["p50"], s["p95"], s["max"], s["p50"] / alone["p50"])
        for name, s in (("remember alone (limit)", alone), ("remember beside reindex", beside))
    ]
    print(table(("case", "n", "p50 ms", "p95 ms", "max ms", "p50 / limit"), rows))


if __name__ == "__main__":
    main()
