"""Reading the audit log (``<home>/audit/``): one page at a time with a signed cursor, or the newest
events as dicts. Apart from ``_indexing``: the log is a file beside the index, read without it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ._config import Settings
from ._cursor import decode_cursor, encode_cursor
from ._errors import InvalidInput, check_limit, safe_echo
from ._models import Page
from ._store.audit import EVENTS, AuditEvent, AuditLog
from ._store.paths import StorePaths
from ._store.when import parse_when
from .vocabulary import MAX_AUDIT_LIMIT

# Audit cursors are signed like the others; the log is append-only, so their "version" never moves.
AUDIT_CURSOR_STORE = "audit"


def audit_page(
    settings: Settings,
    audit_log: AuditLog,
    *,
    store: str | None = None,
    event: str | None = None,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    limit: int = 100,
    cursor: str | None = None,
) -> Page[AuditEvent]:
    """Audit events newest first, filtered, ``limit`` at a time with an opaque cursor.

    ``since`` is inclusive and ``until`` exclusive: datetimes, ISO 8601 strings (naive = UTC)
    or durations ago (``30m``, ``2h``, ``7d``). A cursor holds a position in the append-only
    log, so it never goes stale; it is bound to its filters.
    """
    check_limit(limit, MAX_AUDIT_LIMIT)
    if store is not None:  # a typo is an error; a deleted store's events stay readable
        store = StorePaths.of(settings.memory_dir, store).name
    now = datetime.now(UTC)
    low = parse_when(since, field="since", now=now)
    high = parse_when(until, field="until", now=now)
    if low is not None and high is not None and high <= low:  # as recall and list_facts say it
        raise InvalidInput("until must be later than since", field="until")
    # Bound to the filters as given; "2h" is resolved once, on the first page, and kept.
    query = ["audit", store, event, _as_given(since), _as_given(until)]
    before = None
    if cursor:
        position = decode_cursor(settings.home, cursor, query, AUDIT_CURSOR_STORE, 0)
        if (
            len(position) != 4
            or not isinstance(position[0], str)
            or not isinstance(position[1], int)
            or not all(p is None or isinstance(p, str) for p in position[2:])
        ):
            raise InvalidInput("cursor is malformed", field="cursor")
        before = (position[0], position[1])
        low, high = (datetime.fromisoformat(p) if p else None for p in position[2:])
    events, more = audit_log.read(store=store, event=event, since=low, until=high, limit=limit, before=before)
    # A typo found nothing and would say "(no events)"; an older coffer's name that the log
    # holds is still read (it found events).
    unknown = event is not None and event not in EVENTS and not events and not cursor
    if unknown and not audit_log.read(event=event, limit=1)[0]:
        raise InvalidInput(
            f"unknown event {safe_echo(event)!r}; the events are: {', '.join(EVENTS)}",
            field="event",
            events=list(EVENTS),
        )
    next_cursor = None
    if more:
        bounds = [low and low.isoformat(), high and high.isoformat()]
        next_cursor = encode_cursor(settings.home, query, AUDIT_CURSOR_STORE, 0, [*more, *bounds])
    return Page(items=tuple(events), next_cursor=next_cursor)


def audit_events(
    settings: Settings,
    audit_log: AuditLog,
    store: str | None = None,
    limit: int = 100,
    *,
    event: str | None = None,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
) -> list[dict[str, Any]]:
    """The newest audit events (optionally of one store, one event, a time range), newest first."""
    page = audit_page(settings, audit_log, store=store, event=event, since=since, until=until, limit=limit)
    return [e.to_dict() for e in page.items]


def _as_given(bound: datetime | str | None) -> str | None:
    return bound.isoformat() if isinstance(bound, datetime) else bound
