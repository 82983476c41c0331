"""The audit log: an append-only JSON Lines file under the home, the truth of what coffer did.

    <home>/audit/events-<start>.jsonl     one event per line, 0600, in segments

Each line is one event, ``{"at", "event", "store", "document_id", "details"}``, appended with
``O_APPEND`` and fsync'd under ``locks/audit.lock`` (threads and processes queue on it, so lines
never interleave, whatever their length). The log is machine-local, like ``index.db``'s
neighbours: it records what happened on this machine and is not synced with ``memory/``.
Deleting ``index.db`` loses no event.

A segment is never renamed or rewritten: when the newest one would grow past ``max_bytes``, the
next event starts a new segment named after its own time, so segment names sort by time and a
position (segment, offset) stays valid for good (what the audit cursor holds). Nothing is ever
deleted by coffer; old segments may be archived or removed by hand.

Reads tolerate damage: a line that is not a JSON object (a torn last line after a crash, a hand
edit) is skipped, and a writer that finds the file not ending in a newline starts its event on a
new line, so a torn line never swallows the next event.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import attrs

from .._home import AUDIT_SEGMENT_GLOB, HomeLayout, audit_segment_stamp
from .files import ensure_dir, fsync_dir
from .lanes import append_whole
from .lock import store_lock

DEFAULT_MAX_BYTES = 8 * 1024 * 1024
"""A segment holds about 30,000 events before the next one starts (a read scans newest first)."""
_BLOCK = 64 * 1024
# Every event coffer records (docs/concepts.md "The audit log" lists them; tests/test_audit_log.py
# holds the code's audit calls to this list). A filter on any other name is refused, unless the
# log holds events of that name (written by an older coffer).
EVENTS = (
    "memory_added",
    "memory_updated",
    "memory_deleted",
    "memory_cleared",
    "memory_organized",
    "memory_reorganized",
    "store_configured",
    "store_moved",
    "store_merged",
    "store_deleted",
    "agent_hook_installed",
    "agent_hook_uninstalled",
    "agent_native_memory_disabled",
    "agent_native_memory_restored",
)


@attrs.frozen
class AuditEvent:
    """One line of the audit log.

    ``details`` carries what the event is about (paths, counts, ``actor``, ``origin_session_id``),
    never a memory's text.
    """

    at: datetime
    event: str
    store: str | None
    document_id: str | None
    details: Mapping[str, Any]

    @property
    def actor(self) -> str | None:
        """Who made the change, when the event says (``agent``, ``user``, ``external``...)."""
        actor = self.details.get("actor")
        return str(actor) if actor is not None else None

    def to_dict(self) -> dict[str, Any]:
        """The event as the service has always returned it (``at`` as an ISO 8601 string)."""
        return {
            "at": _iso(self.at),
            "event": self.event,
            "store": self.store,
            "document_id": self.document_id,
            "details": dict(self.details),
        }


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def _parse_line(line: bytes) -> AuditEvent | None:
    """An event from one line; None for a torn or foreign line."""
    try:
        raw = json.loads(line)
        at = datetime.fromisoformat(raw["at"])
        details = raw.get("details") or {}
        if not isinstance(details, dict) or not isinstance(raw["event"], str):
            return None
    except (ValueError, KeyError, TypeError):
        return None
    return AuditEvent(
        at=at if at.tzinfo else at.replace(tzinfo=UTC),
        event=raw["event"],
        store=raw.get("store"),
        document_id=raw.get("document_id"),
        details=details,
    )


def _lines_backward(path: Path, end: int | None) -> Iterator[tuple[int, bytes]]:
    """``(offset, line)`` of each line before ``end`` (whole file: None), last line first."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except (FileNotFoundError, OSError):
        return
    with os.fdopen(fd, "rb") as fh:
        pos = fh.seek(0, os.SEEK_END) if end is None else min(end, fh.seek(0, os.SEEK_END))
        tail = b""
        while pos > 0:
            step = min(_BLOCK, pos)
            pos -= step
            fh.seek(pos)
            chunk = fh.read(step) + tail
            lines = chunk.split(b"\n")
            tail = lines.pop(0)  # may continue in the block before
            offset = pos + len(tail) + 1
            starts = []
            for line in lines:
                starts.append(offset)
                offset += len(line) + 1
            for start, line in zip(reversed(starts), reversed(lines), strict=True):
                if line.strip():
                    yield start, line
        if tail.strip():
            yield 0, tail


class AuditLog:
    """The audit log of one home: append an event, read events newest first."""

    def __init__(self, home: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.layout = HomeLayout(home)
        self.max_bytes = max_bytes

    @property
    def folder(self) -> Path:
        """``<home>/audit/``."""
        return self.layout.audit

    def segments(self) -> list[Path]:
        """The log's segment files, oldest first (links are never read, nor anything but a regular
        file: a FIFO named like the newest segment blocked ``coffer audit`` for ever and took
        every write's events into its pipe)."""
        if self.folder.is_symlink():
            return []
        try:
            with os.scandir(self.folder) as entries:  # every append asks: no stat per segment
                names = [
                    e.name
                    for e in entries
                    if e.is_file(follow_symlinks=False) and fnmatch(e.name, AUDIT_SEGMENT_GLOB)
                ]
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [self.folder / name for name in sorted(names)]

    # -- writing ------------------------------------------------------------------------------
    def append(
        self,
        event: str,
        store: str | None,
        document_id: str | None,
        details: Mapping[str, Any],
        *,
        at: datetime | None = None,
    ) -> AuditEvent:
        """Append one event (durable when this returns)."""
        return self.append_many([(event, store, document_id, details)], at=at)[0]

    def append_many(
        self,
        events: Sequence[tuple[str, str | None, str | None, Mapping[str, Any]]],
        *,
        at: datetime | None = None,
    ) -> list[AuditEvent]:
        """Append ``(event, store, document_id, details)`` events in one write, one fsync (a bulk
        change's events; durable when this returns)."""
        with store_lock(self.layout.audit_lock):  # the time is taken in turn: the file stays in time order
            when = at or datetime.now(UTC)
            records = [
                AuditEvent(at=when, event=event, store=store, document_id=document_id, details=dict(details))
                for event, store, document_id, details in events
            ]
            lines = [
                json.dumps(r.to_dict(), ensure_ascii=False, default=str, separators=(",", ":")).encode(
                    "utf-8"
                )
                + b"\n"
                for r in records
            ]
            if lines:
                self._append_lines(lines, when)
        return records

    def import_events(self, events: list[AuditEvent]) -> int:
        """Append older events (index.db's audit rows from before this log) in a segment of their own.

        The segment is named after the oldest event, so it sorts before every newer segment.
        """
        if not events:
            return 0
        lines = [
            json.dumps(e.to_dict(), ensure_ascii=False, default=str, separators=(",", ":")).encode() + b"\n"
            for e in events
        ]
        self._append_lines(lines, events[0].at, segment=self._segment_for(events[0].at))
        return len(lines)

    def _segment_for(self, at: datetime) -> Path:
        return self.layout.audit_segment(audit_segment_stamp(at))

    def _current(self, at: datetime, size: int) -> Path:
        """The segment the next ``size`` bytes go to (a new one when the newest is full)."""
        segments = self.segments()
        if segments:
            newest = segments[-1]
            try:
                used = os.stat(newest, follow_symlinks=False).st_size
            except FileNotFoundError:
                used = 0
            if used == 0 or used + size <= self.max_bytes:
                return newest
            fresh = self._segment_for(at)
            return fresh if fresh.name > newest.name else newest  # a clock set back: keep order
        return self._segment_for(at)

    def _append_lines(self, lines: list[bytes], at: datetime, *, segment: Path | None = None) -> None:
        data = b"".join(lines)
        with store_lock(self.layout.audit_lock):
            ensure_dir(self.folder)
            path = segment or self._current(at, len(data))
            flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW  # RDWR: pread the last byte
            fd = os.open(path, flags, 0o600)
            try:
                start = os.fstat(fd).st_size
                if start and os.pread(fd, 1, start - 1) != b"\n":
                    data = b"\n" + data  # a torn line stays alone; this event starts cleanly
                append_whole(fd, data, start)
            finally:
                os.close(fd)
            if start == 0:
                fsync_dir(self.folder)

    # -- reading ------------------------------------------------------------------------------
    def read(
        self,
        *,
        store: str | None = None,
        event: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
        before: tuple[str, int] | None = None,
    ) -> tuple[list[AuditEvent], tuple[str, int] | None]:
        """Events newest first, filtered (``since`` inclusive, ``until`` exclusive), at most ``limit``.

        ``before`` continues after a position a previous call returned; the second value is the
        position to continue from, None when no older event is left.
        """
        found: list[AuditEvent] = []
        segments = self.segments()
        for index in range(len(segments) - 1, -1, -1):
            path = segments[index]
            end: int | None = None
            if before is not None:
                if path.name > before[0]:
                    continue
                if path.name == before[0]:
                    end = before[1]
            start_stamp = path.name
            if until is not None and start_stamp >= self._segment_for(until).name:
                continue  # every event in this segment is at or after ``until``
            for offset, line in _lines_backward(path, end):
                record = _parse_line(line)
                if record is None or not _matches(record, store, event, since, until):
                    continue
                if len(found) == limit:
                    return found, (path.name, offset + len(line) + 1)
                found.append(record)
            if since is not None and start_stamp < self._segment_for(since).name:
                break  # older segments hold only older events
        return found, None


def _matches(
    record: AuditEvent, store: str | None, event: str | None, since: datetime | None, until: datetime | None
) -> bool:
    if store is not None and record.store != store:
        return False
    if event is not None and record.event != event:
        return False
    if since is not None and record.at < since:
        return False
    return until is None or record.at < until
