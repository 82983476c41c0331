"""The ``coffer`` command: a face over ``MemoryService``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ..errors import CofferError
from ..service import MemoryService
from . import agents, facts, lanes, transcripts


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``coffer``."""
    parser = argparse.ArgumentParser(
        prog="coffer", description="Shared local-first memory for coding agents."
    )
    parser.add_argument("--home", help="coffer home (default: $COFFER_HOME or ~/.coffer)")
    sub = parser.add_subparsers(dest="command", required=True)
    facts.register(sub)
    lanes.register(sub)
    transcripts.register(sub)
    agents.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``coffer``; returns the exit status (1 with the error code on stderr on failure)."""
    args = build_parser().parse_args(argv)
    try:
        with MemoryService(args.home) as svc:
            status = args.func(svc, args)
    except CofferError as exc:
        if getattr(args, "json", False):
            json.dump({"error": exc.to_dict()}, sys.stderr, ensure_ascii=False)
            sys.stderr.write("\n")
        else:
            print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    return int(status or 0)
