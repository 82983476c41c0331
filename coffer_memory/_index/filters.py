"""Tags and time filters: validated once, then said as SQL over the ``documents`` table.

Recall and ``list_facts`` put the clause inside their index query, so a page of ``limit`` hits
is ``limit`` matching hits, however many newer facts do not match.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import Any

import attrs

from .._errors import InvalidInput, safe_echo
from .._store.files import clean_tag, format_time, parse_time
from .._store.when import FORMS, empty_bound, is_duration, parse_when
from ..vocabulary import MAX_TAG_CHARS, MAX_TAGS
from .keys import KIND

TimeBound = datetime | date | str


def check_tags(tags: object, field: str = "tags") -> tuple[str, ...]:
    """Tags given by a caller, cleaned and deduplicated in order; ``InvalidInput`` when one is bad."""
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        raise InvalidInput("tags must be a list of strings", field=field)
    out: list[str] = []
    for position, raw in enumerate(tags, start=1):
        tag = clean_tag(raw)
        if tag is None:
            raise InvalidInput(
                f"tag {_shown(position, raw)} is not a tag: 1 to {MAX_TAG_CHARS} characters, no comma or line break",
                field=field,
            )
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise InvalidInput(f"at most {MAX_TAGS} tags", field=field)
    return tuple(out)


def _shown(position: int, raw: object) -> str:
    """A refused tag as an error message names it: by position and length, never its text (a
    message is logged and sent back whole: ``tags=["password=hunter2, prod"]`` echoed the password)."""
    if not isinstance(raw, str):
        return f"#{position} (of type {type(raw).__name__})"
    return f"#{position} ({len(raw)} characters)"


def check_time(value: object, field: str, now: datetime | None = None) -> datetime | None:
    """A ``since``/``until`` bound: a datetime (naive means UTC), a date (its midnight, UTC), an
    ISO 8601 string, or a duration ago (``30m``, ``12h``, ``7d``, ``2w``) counted from ``now``;
    ``InvalidInput`` otherwise, an empty string included (None is no bound). The forms are the audit log's (``when.parse_when``)."""
    if value is None:
        return None
    if isinstance(value, str) and not value.strip():
        raise empty_bound(field)
    if not isinstance(value, (str, date)):
        raise InvalidInput(f"{field} must be a datetime or a string: {FORMS}", field=field)
    if is_duration(value):
        resolved = parse_when(str(value), field=field, now=now or datetime.now(UTC))
        parsed = parse_time(resolved)
    else:
        parsed = parse_time(value)
    if parsed is None:
        if isinstance(value, date) or is_duration(value) or _iso(str(value)):
            raise InvalidInput(
                f"{field} must fall within the years 1970 to 9999 (UTC): {safe_echo(value)!r}", field=field
            )
        raise InvalidInput(f"{field} must be {FORMS}: {safe_echo(value)!r}", field=field)
    return parsed.astimezone(UTC)


def _iso(value: str) -> bool:
    """True when ``value`` reads as an ISO 8601 time (whatever its year)."""
    try:
        datetime.fromisoformat(value.strip())
    except ValueError:
        return False
    return True


@attrs.frozen
class FactFilter:
    """Facts carrying every one of ``tags`` and updated in ``[since, until)``."""

    tags: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    @classmethod
    def of(
        cls, tags: object = None, since: object = None, until: object = None, *, now: datetime | None = None
    ) -> FactFilter | None:
        """The validated filter, or None when nothing filters. Durations ago (``7d``) count from
        ``now``, the same instant for both bounds (the current time when not given)."""
        if tags is None and since is None and until is None:
            return None  # most recalls: no clock read, no checks (each recall asks)
        wanted = check_tags(tags) if tags is not None else ()
        now = now or datetime.now(UTC)
        low, high = check_time(since, "since", now), check_time(until, "until", now)
        if low is not None and high is not None and high <= low:
            raise InvalidInput("until must be later than since", field="until")
        if not wanted and low is None and high is None:
            return None
        return cls(tags=wanted, since=low, until=high)

    def sql(self, alias: str = "d") -> tuple[str, list[Any]]:
        """A condition on ``documents AS alias`` (joined by AND) and its parameters."""
        parts: list[str] = []
        params: list[Any] = []
        if self.since is not None:
            parts.append(f"{alias}.updated_at >= ?")
            params.append(format_time(self.since))
        if self.until is not None:
            parts.append(f"{alias}.updated_at < ?")
            params.append(format_time(self.until))
        for tag in self.tags:
            parts.append(f"{alias}.rowid IN (SELECT document_rowid FROM document_tags WHERE tag = ?)")
            params.append(tag)
        return " AND ".join(parts), params

    def chunk_rowids(self, store: str) -> tuple[str, list[Any]]:
        """A subquery of the chunk rowids (= FTS rowids) of the store's matching documents."""
        where, params = self.sql("d")
        return (
            "SELECT c.rowid FROM documents d JOIN chunks c "
            "ON c.document_id = d.id AND c.resource_name = d.resource_name "
            f"WHERE d.kind = ? AND d.resource_name = ? AND {where}",
            [KIND, store, *params],
        )
