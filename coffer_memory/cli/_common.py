"""Helpers shared by the ``coffer`` subcommands: JSON output, store targeting."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import attrs

from ..models import FactRecord
from ..service import Scope


def jsonable(value: Any) -> Any:
    """attrs objects, paths and datetimes made JSON-friendly."""
    if attrs.has(type(value)):
        out = {k: jsonable(v) for k, v in attrs.asdict(value, recurse=False).items()}
        if isinstance(value, FactRecord):
            out["folder_path"] = str(value.folder_path)
        return out
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def emit_json(value: Any) -> None:
    """Print ``value`` as indented JSON."""
    json.dump(jsonable(value), sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def read_text(value: str | None) -> str | None:
    """The argument, or standard input when it is ``-``."""
    if value == "-":
        return sys.stdin.read()
    return value


def target(args: argparse.Namespace) -> dict[str, Any]:
    """``store``/``cwd``/``scope`` keyword arguments from the shared options."""
    scope: Scope = "global" if getattr(args, "global_", False) else "project"
    return {"store": getattr(args, "store", None), "cwd": args.cwd, "scope": scope}


def add_target(p: argparse.ArgumentParser) -> None:
    """The shared --store / --global / --cwd options."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("--store", help="store name: 'global' or 'project-<ULID>'")
    group.add_argument("--global", dest="global_", action="store_true", help="use the global store")
    p.add_argument("--cwd", default=None, help="directory whose git project picks the store (default: .)")


def add_command(parent: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    """A subcommand with the shared ``--json`` flag."""
    p: argparse.ArgumentParser = parent.add_parser(name, help=help_text, description=help_text)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p
