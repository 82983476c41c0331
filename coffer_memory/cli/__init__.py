"""The ``coffer`` command: a face over ``MemoryService``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import CofferError
from . import agents, facts, lanes, meta, porting, settings, transcripts
from ._common import DIRECTORY, hint, resolve_store_args


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``coffer``."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="coffer", description="Shared local-first memory for coding agents."
    )
    parser.add_argument(
        "--home", help="coffer home (default: $COFFER_HOME or ~/.coffer)"
    ).complete = DIRECTORY  # type: ignore[attr-defined]
    parser.add_argument("--version", action="version", version=f"coffer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    facts.register(sub)
    lanes.register(sub)
    transcripts.register(sub)
    agents.register(sub)
    settings.register(sub)
    porting.register(sub)
    meta.register(sub)
    return parser


def _run(args: argparse.Namespace) -> Any:
    """Run the chosen command: commands about coffer itself open no store, the rest get a service."""
    if hasattr(args, "run"):
        return args.run(args)
    from ..service import MemoryService

    with MemoryService(args.home) as svc:
        resolve_store_args(svc, args)
        return args.func(svc, args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``coffer``; returns the exit status (1 with the error code on stderr on failure)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        status = _run(args)
    except CofferError as exc:
        if getattr(args, "json", False):
            json.dump({"error": exc.to_dict()}, sys.stderr, ensure_ascii=False)
            sys.stderr.write("\n")
        else:
            print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
            tip = hint(exc, args)
            if tip:
                print(tip, file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except Exception as exc:  # never a raw traceback: one line here, the traceback in a log file
        where = _log_unexpected(args)
        first = (str(exc).splitlines() or [""])[0]
        print(f"error: unexpected {type(exc).__name__}: {first} (details: see {where})", file=sys.stderr)
        return 1
    return int(status or 0)


def _log_unexpected(args: argparse.Namespace) -> Path:
    """Append the current traceback to ``<home>/logs/errors.log`` (the command's name only: its
    arguments may hold what a user asked to remember); returns the log's path."""
    from ..home import HomeLayout
    from ..store.files import ensure_dir

    entry = f"{datetime.now(UTC).isoformat()} coffer {args.command}\n{traceback.format_exc()}\n"
    try:
        log_file = HomeLayout(Settings.load(args.home).home).errors_log
    except Exception:
        log_file = Path(tempfile.gettempdir()) / "errors.log"
    folder = log_file.parent
    for where in (folder, Path(tempfile.gettempdir())):
        path = log_file if where == folder else where / f"coffer-errors-{os.getuid()}.log"
        try:
            ensure_dir(where)
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "a") as handle:
                handle.write(entry)
        except OSError:
            continue
        return path
    return path
