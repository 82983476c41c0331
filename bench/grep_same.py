"""Grep recall gives the same hits before and after a change: ``keyword_same.py``'s homes and
recalls in grep mode, one JSON line per recall to compare.

``build`` writes ``keyword_same.py``'s two homes (1,000 bench facts in a project and the global
store with tags, agent sessions and Chinese texts; and a 300-fact home). ``run`` copies a built
home to a fixed path and runs the 394 recalls there with ``--backend`` (``ripgrep``, ``python``
or ``auto``, the default a service uses), hand edits between them (a fact rewritten through a
rename, one deleted, one hand-written file added):

    .venv/bin/python bench/grep_same.py build /tmp/gsame
    .venv/bin/python bench/grep_same.py run /tmp/gsame/1k /tmp/before.jsonl --coffer-src /tmp/base
    .venv/bin/python bench/grep_same.py run /tmp/gsame/1k /tmp/after.jsonl --backend python
    cmp /tmp/before.jsonl /tmp/after.jsonl
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

for i, arg in enumerate(sys.argv):  # before anything imports coffer_memory
    if arg == "--coffer-src" and i + 1 < len(sys.argv):
        sys.path.insert(0, os.path.abspath(sys.argv[i + 1]))

import coffer_memory  # noqa: E402

sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import keyword_same  # noqa: E402


def main() -> None:
    """``build DIR`` or ``run BUILT OUT [--backend NAME] [--at DIR] [--coffer-src SRC]``."""
    parser, _, r = keyword_same.commands(__doc__, Path("/tmp/coffer-grep-same"))
    r.add_argument("--backend", default="ripgrep", help="grep_backend: ripgrep, python or auto")
    args = parser.parse_args()
    if args.command == "build":
        keyword_same.build(args.dir / "1k", 1000)
        keyword_same.build(args.dir / "300", 300)
        print(f"built {args.dir}/1k and {args.dir}/300 with {os.path.dirname(coffer_memory.__file__)}")
    else:
        count = keyword_same.run(args.built, args.out, args.at, "grep", {"grep_backend": args.backend})
        print(
            f"{count} grep recalls ({args.backend}) with {os.path.dirname(coffer_memory.__file__)} -> {args.out}"
        )


if __name__ == "__main__":
    main()
