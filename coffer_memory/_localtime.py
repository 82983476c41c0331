"""Local time: the one rule for days and the times coffer shows.

A journal day is the calendar day where the writing process is (its local time zone: ``TZ``, else
the system's), not UTC's: an entry written at 07:30 in Shanghai (23:30 UTC the day before) belongs
to that Shanghai morning. The times coffer writes beside a day (a journal entry's heading, a
handoff's ``updated_at``) carry that zone's UTC offset, so the file says which zone its day is in and
every instant stays exact. What the CLI and the web pages show is local time with the offset stated
(``2026-12-03 07:30:00+08:00``); JSON answers keep the instant with its offset.

A zone whose offset is not whole minutes (a POSIX ``TZ`` such as ``XST-5:30:15``) has its times
written and shown in UTC: JSON (Pydantic) writes an offset to the minute, so ``+05:30:15`` left REST
and MCP 15 seconds off the instant written. Its day is still the local one.

Facts' own times (``created_at``, ``updated_at``) and the consolidation log stay in UTC: they name
no day.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

__all__ = ["local_day", "local_stamp", "local_text"]


def local_day(at: datetime) -> str:
    """The local calendar day of ``at`` (timezone-aware) as ``YYYY-MM-DD``."""
    return at.astimezone().date().isoformat()


def local_stamp(at: datetime) -> str:
    """``at`` in local time with its offset, to the millisecond: what a lane file holds
    (``2026-12-03T07:30:00.000+08:00``); ``_store.files.parse_time`` reads it back exactly."""
    return _local(at).isoformat(timespec="milliseconds")


def local_text(at: datetime, timespec: Literal["minutes", "seconds"] = "seconds") -> str:
    """``at`` for people: local time with the offset stated (``2026-12-03 07:30:00+08:00``)."""
    return _local(at).isoformat(sep=" ", timespec=timespec)


_MINUTE = timedelta(minutes=1)


def _local(at: datetime) -> datetime:
    """``at`` in local time, or in UTC where the local offset is not whole minutes."""
    local = at.astimezone()
    offset = local.utcoffset()
    return local if offset is None or not offset % _MINUTE else at.astimezone(UTC)
