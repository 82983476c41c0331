"""Time bounds as people type them: ISO 8601 dates and times, or a duration ago (``30m``,
``12h``, ``7d``, ``2w``). One reading for every ``since``/``until`` (recall, ``list_facts``,
the audit log), so that what one command takes the others take too."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .._errors import InvalidInput, safe_echo
from ..vocabulary import WHEN_FORMS

# A leading minus is the same time ago: "-1d" is how `date -d` and many tools write yesterday.
DURATION = re.compile(r"^-?(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
FORMS = WHEN_FORMS


def empty_bound(field: str) -> InvalidInput:
    """The error for a ``since``/``until`` given as an empty (or blank) string: it is no time, and
    reading it as "no bound" let ``--since "$FROM"`` with ``FROM`` unset filter nothing, silently."""
    return InvalidInput(f"{field} is empty: give {FORMS}; or leave {field} out for no bound", field=field)


def is_duration(value: object) -> bool:
    """True when ``value`` is a duration ago (``7d``), which names a different time at each call."""
    return isinstance(value, str) and DURATION.match(value.strip()) is not None


def parse_when(value: datetime | str | None, *, field: str, now: datetime | None = None) -> datetime | None:
    """A time bound in UTC: a datetime (naive = UTC), an ISO 8601 date or time (naive = UTC), or
    a duration ago counted from ``now`` (pass one ``now`` for every bound of a call, so that
    ``since="2h", until="1h"`` is one hour wide). ``InvalidInput`` for anything else."""
    if value is None:
        return None
    try:
        if isinstance(value, datetime):
            return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)
        text = str(value).strip()
        if not text:
            raise empty_bound(field)
        ago = DURATION.match(text)
        if ago:
            delta = timedelta(**{_UNITS[ago.group(2)]: int(ago.group(1))})
            return (now or datetime.now(UTC)) - delta
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidInput(f"{field} must be {FORMS}: {safe_echo(value)!r}", field=field) from None
        # In UTC here: a time that has no UTC form (year 9999 at -14:00) overflowed later, unexplained.
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:  # also a duration longer than the calendar ("800000d")
        raise InvalidInput(
            f"{field} must be {FORMS}: {safe_echo(value)!r} is outside the years 1 to 9999", field=field
        ) from None
