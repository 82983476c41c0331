"""Hybrid (or vector) recall gives the same hits before and after a change: ``keyword_same.py``'s
homes and recalls with the real embedder, one JSON line per recall to compare.

``build`` writes ``keyword_same.py``'s two homes (1,000 bench facts in a project and the global
store with tags, agent sessions and Chinese texts; and a 300-fact home), then embeds every fact
with ``--embedder`` (default the multilingual-e5 default). ``run`` copies a built home to a fixed
path and runs the 394 recalls there in ``--mode`` (hybrid by default), hand edits between them
re-embedding what they touch. ``--embedding-cache PATH`` keeps the model's vectors in a file
(``_embed_cache.py``) so that building again and every run after the first embed nothing anew:

    .venv/bin/python bench/hybrid_same.py build /tmp/hsame --embedding-cache /tmp/emb.sqlite
    .venv/bin/python bench/hybrid_same.py run /tmp/hsame/1k /tmp/before.jsonl --coffer-src /tmp/base \\
        --embedding-cache /tmp/emb.sqlite
    .venv/bin/python bench/hybrid_same.py run /tmp/hsame/1k /tmp/after.jsonl --embedding-cache /tmp/emb.sqlite
    cmp /tmp/before.jsonl /tmp/after.jsonl
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

for i, arg in enumerate(sys.argv):  # before anything imports coffer_memory
    if arg == "--coffer-src" and i + 1 < len(sys.argv):
        sys.path.insert(0, os.path.abspath(sys.argv[i + 1]))

import coffer_memory  # noqa: E402
from coffer_memory import MemoryService, Settings  # noqa: E402

sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import keyword_same  # noqa: E402


def vector_settings(provider: str, cache: str | None) -> dict[str, Any]:
    """``Settings.load`` keywords of a home whose vector modes run ``provider`` (through the
    embedding cache when one is given)."""
    if cache:
        import _embed_cache

        provider = _embed_cache.use(Path(cache), provider)
    return {
        "embedding": {"provider": provider},
        "memory": {"retrieval_modes": ["grep", "keyword", "vector", "hybrid"]},
    }


def build(base: Path, settings: dict[str, Any]) -> None:
    """``keyword_same``'s homes, every fact embedded."""
    for name, n in (("1k", 1000), ("300", 300)):
        keyword_same.build(base / name, n)
        with MemoryService(settings=Settings.load(base / name / "home", **settings)) as svc:
            svc.reindex()


def main() -> None:
    """``build DIR`` or ``run BUILT OUT [--mode hybrid] [--at DIR] [--coffer-src SRC]``."""
    parser, b, r = keyword_same.commands(__doc__, Path("/tmp/coffer-hybrid-same"))
    r.add_argument("--mode", default="hybrid", choices=["hybrid", "vector"])
    for p in (b, r):
        p.add_argument("--embedder", default="auto", help="embedding provider (default: auto)")
        p.add_argument(
            "--embedding-cache", default=None, metavar="PATH", help="keep the vectors in this file"
        )
    args = parser.parse_args()
    settings = vector_settings(args.embedder, args.embedding_cache)
    if args.command == "build":
        build(args.dir, settings)
        print(f"built {args.dir}/1k and {args.dir}/300 with {os.path.dirname(coffer_memory.__file__)}")
    else:
        count = keyword_same.run(args.built, args.out, args.at, args.mode, settings)
        print(f"{count} {args.mode} recalls with {os.path.dirname(coffer_memory.__file__)} -> {args.out}")


if __name__ == "__main__":
    main()
