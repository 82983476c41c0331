"""``coffer export`` and ``coffer import``: stores to a zip or JSONL file and back; other tools' memory in."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from .._errors import InvalidInput
from .._porting.models import EXPORT_FORMATS, IMPORT_KINDS, ImportEntry
from .._render import table
from ._common import FILE, add_command, emit_json
from ._progress import Progress
from ._terminal import shown_path

if TYPE_CHECKING:
    from .._service import MemoryService

SHOWN_ENTRIES = 20
"""The entries ``coffer import`` lists without ``--full`` (problems first)."""
PROBLEMS = ("conflict", "skipped")


def cmd_export(svc: MemoryService, args: argparse.Namespace) -> None:
    if args.all and args.stores:
        raise InvalidInput("pass --store or --all, not both", field="store")
    stores = args.stores or None
    if args.output == "-":
        if args.format == "zip" and sys.stdout.isatty():  # its bytes would garble the terminal
            raise InvalidInput(
                "a zip is binary: write it to a file (-o FILE), redirect standard output, or use --format jsonl",
                field="output",
            )
        report = svc.export_memory(sys.stdout.buffer, stores=stores, format=args.format)
        sys.stdout.buffer.flush()
        return
    report = svc.export_memory(args.output, stores=stores, format=args.format)
    if args.json:
        emit_json(report.to_record())
        return
    print(
        f"exported {report.files} files of {len(report.stores)} store(s) to {shown_path(report.path)} "
        f"({report.format}, {report.size} bytes, sha256 {report.sha256[:12]}…)"
    )


def cmd_import(svc: MemoryService, args: argparse.Namespace) -> int:
    bar = Progress("step", enabled=not args.json, leave=False)

    phase = [""]

    def show(name: str, done: int, total: int | None) -> None:
        if name != phase[0]:
            phase[0] = name
            bar.reset(name, total)  # drawn at once; a new count: the files read are not the steps
        bar.total = total
        bar.update(done - bar.n)

    def progress(done: int, total: int, _entry: ImportEntry) -> None:
        # A real import checks every entry (first half of the steps), then writes them.
        show("checking" if args.dry_run or done <= total // 2 else "writing", done, total)

    def reading(done: int, total: int | None) -> None:
        # A coffer export is read and each file checked against its manifest first (about a
        # second per 1,000 files): the bar sat at nothing, with no name, all that time.
        show("reading", done, total)

    try:
        report = svc.import_memory(
            args.source,
            kind=args.kind,
            store=args.store,
            dry_run=args.dry_run,
            progress=progress,
            reading=reading,
        )
    finally:
        bar.close()
    if args.json:
        emit_json(report.to_record())
        return 0
    verb = "would write" if report.dry_run else "wrote"
    shown = [e for e in report.entries if args.verbose or report.dry_run or e.action != "unchanged"]
    # Problems first; at most SHOWN_ENTRIES rows unless --full (10k facts printed 10,001 lines).
    shown.sort(key=lambda e: e.action not in PROBLEMS)
    hidden = 0 if args.full else max(0, len(shown) - SHOWN_ENTRIES)
    rows = [
        (
            e.action
            if not report.dry_run or e.action not in ("created", "updated")
            else f"{e.action} (dry run)",
            e.store or "-",
            str(e.path) if e.path is not None else e.source,
            e.reason or (", ".join(f"{n} {k} redacted" for k, n in e.findings) if e.findings else ""),
        )
        for e in shown[: len(shown) - hidden]
    ]
    if rows:
        print(table(("action", "store", "file", "note"), rows))
    if hidden:
        problems = sum(1 for e in shown if e.action in PROBLEMS)
        said = f", {problems} of them conflicts or skipped" if problems else ""
        print(f"... and {hidden} more entries not listed ({len(shown)} in all{said}; --full lists every one)")
    counts = ", ".join(f"{n} {a}" for a, n in sorted(report.counts.items())) or "nothing found"
    print(
        f"{report.kind} import from {shown_path(report.source)}: {verb} {report.written} file(s) ({counts})"
    )
    return 0


def register(sub: Any) -> None:
    """Add ``coffer export`` and ``coffer import``."""
    p = add_command(sub, "export", "export stores' truth files: a zip with a manifest, or JSONL")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--store", dest="stores", action="append", help="a store to export (repeatable)")
    group.add_argument("--all", action="store_true", help="every store (the default)")
    p.add_argument("--format", choices=EXPORT_FORMATS, default="zip", help="zip (default) or jsonl")
    p.add_argument(
        "-o", "--output", required=True, help="the file to write ('-' for standard output)"
    ).complete = FILE  # type: ignore[attr-defined]
    p.set_defaults(func=cmd_export)

    p = add_command(
        sub,
        "import",
        "import memory: a coffer export, Claude Code's memory, CLAUDE.md/AGENTS.md/Cursor rules, "
        "an MCP memory.jsonl or a basic-memory folder (idempotent; try --dry-run first)",
    )
    p.add_argument(
        "source",
        nargs="?",
        help="file or folder to import (default: Claude Code's folder with --from claude-code, "
        "the current directory with --from rules)",
    ).complete = FILE  # type: ignore[attr-defined]
    p.add_argument(
        "--from", dest="kind", choices=IMPORT_KINDS, help="the source's kind (default: told from it)"
    )
    p.add_argument(
        "--store",
        help="a coffer export: only this store; other sources: write everything to this store "
        "(default: the matching project store, or global)",
    )
    p.add_argument("--dry-run", action="store_true", help="show what would be written; write nothing")
    p.add_argument("-v", "--verbose", action="store_true", help="also list entries that were unchanged")
    p.add_argument(
        "--full",
        action="store_true",
        help=f"list every entry (default: the first {SHOWN_ENTRIES}, conflicts and skipped files first, then counts)",
    )
    p.set_defaults(func=cmd_import)
