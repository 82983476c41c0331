"""``coffer audit``: read the audit log (``<home>/audit/``), newest event first."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .._render import table
from .._store.when import FORMS
from ..vocabulary import MAX_AUDIT_LIMIT
from ._common import add_command, add_store, emit_json

if TYPE_CHECKING:
    from .._service import MemoryService

WHEN_HELP = FORMS
# Detail keys shown in the table (the rest is in --json); paths last, they are long.
# A store's move and merge say where it went: without them the row said only that it happened.
_SHOWN = (
    "actor",
    "lane",
    "agent",
    "origin_session_id",
    "deleted",
    "merged",
    "created",
    "source",
    "into",
    "from_root",
    "to_root",
    "path",
)


def _details(details: dict[str, Any]) -> str:
    return " ".join(f"{k}={details[k]}" for k in _SHOWN if details.get(k) not in (None, ""))


def cmd_audit(svc: MemoryService, args: argparse.Namespace) -> None:
    page = svc.audit(
        store=args.store,
        event=args.event,
        since=args.since,
        until=args.until,
        limit=args.limit,
        cursor=args.cursor,
    )
    if args.json:
        emit_json(page)
        return
    rows = [
        (
            e.at.strftime("%Y-%m-%d %H:%M:%S"),
            e.event,
            e.store or "-",
            e.document_id or "-",
            _details(dict(e.details)),
        )
        for e in page.items
    ]
    print(table(("at (UTC)", "event", "store", "document", "details"), rows) if rows else "(no events)")
    if page.next_cursor:
        print(f"\nmore: --cursor {page.next_cursor}")


def register(sub: Any) -> None:
    """Add ``coffer audit``."""
    p = add_command(sub, "audit", "what coffer (and edits outside it) changed, newest first")
    add_store(p, "only events of this store ('global', 'project-<ULID>', a label or a unique prefix)")
    p.add_argument(
        "--event",
        help="only this event, e.g. memory_added, memory_updated, store_deleted (a typo is refused)",
    )
    p.add_argument("--since", help="only events at or after this time: " + WHEN_HELP)
    p.add_argument("--until", help="only events before this time: " + WHEN_HELP)
    p.add_argument(
        "--limit", type=int, default=50, help=f"at most this many events (1-{MAX_AUDIT_LIMIT}, default 50)"
    )
    p.add_argument("--cursor", help="the token printed after 'more:' for the next page")
    p.set_defaults(func=cmd_audit)


__all__ = ["register"]
