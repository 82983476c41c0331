"""The protocol every transcript reader follows, and the parsing helpers they share.

Reading happens in two steps so that a caller can cache the expensive one:

1. ``scan(source)`` parses one file (or one database) into a ``SourceScan``. It depends on that
   source's content only, so its result can be kept until the source's ``signature`` changes.
2. ``resolve(scans)`` combines the scans of all sources: titles that live in *another* file
   (Claude Code ``summary`` lines), one copy per session id (OpenCode's database over its legacy
   JSON tree), and no sessions without a single prose message. It is cheap and never touches disk.

Readers never write: files are opened for reading, SQLite read-only (see ``opencode.py``).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import attrs

from .._jsontext import loads as json_loads
from .._store.scan import open_regular
from .models import SessionSummary, Transcript
from .secrets import redact_secrets

TITLE_MAX_CHARS = 80
# The longest JSON Lines record read: far above an agent's longest turn (a pasted screenshot's
# base64 is a few MiB), so that a file of one endless line is not read into memory whole.
MAX_RECORD_BYTES = 64 << 20


class SourceUnavailable(Exception):
    """A source could not be read right now (locked or unreadable database): skip it, do not cache."""


@attrs.frozen
class ScannedSession:
    """One session as read from a single source, before the cross-source step."""

    summary: SessionSummary
    """Its ``title`` is the source's own explicit title, or ``None`` when the source has none."""
    fallback_title: str | None = None
    """The first real user prompt, on one line and truncated: the title when nothing else applies."""
    uuids: tuple[str, ...] = ()
    """Claude Code only: the file's line uuids in file order, kept when a ``summary`` line written
    into another file may be this session's title (so only when it has no explicit title)."""


@attrs.frozen
class SourceScan:
    """What one source holds: its sessions, plus title hints meant for other sources."""

    sessions: tuple[ScannedSession, ...] = ()
    leaf_titles: Mapping[str, str] = attrs.field(factory=dict)
    """Claude Code ``summary`` lines found here: ``leafUuid`` -> summary text (the leaf may be in
    any file)."""


class TranscriptReader(Protocol):
    """Read-only access to one agent's past sessions."""

    agent: str

    def sources(self) -> list[Path]:
        """Candidate source files, in priority order (on a duplicate session id the first wins)."""
        ...

    def signature(self, source: Path) -> Hashable | None:
        """A value that changes whenever ``source``'s content may have; ``None`` if it is gone."""
        ...

    def scan(self, source: Path) -> SourceScan:
        """Parse one source. Raises ``OSError`` or ``SourceUnavailable`` when it cannot be read."""
        ...

    def resolve(self, scans: Sequence[SourceScan]) -> list[SessionSummary]:
        """Final summaries from the scans of every source, given in ``sources()`` order."""
        ...

    def summaries(self, source: Path) -> list[SessionSummary]:
        """``scan`` then ``resolve`` one source on its own (titles from other files are not seen)."""
        ...

    def load(self, summary: SessionSummary) -> Transcript:
        """The full prose turns of a listed session (``OSError`` if its source has vanished)."""
        ...


class BaseReader(ABC):
    """Defaults shared by the readers: stat signatures and the standard ``resolve``."""

    agent: str = ""

    def signature(self, source: Path) -> Hashable | None:
        """``(mtime_ns, size)`` of the file, ``None`` when it no longer exists."""
        return file_signature(source)

    @abstractmethod
    def scan(self, source: Path) -> SourceScan:
        """Parse one source (each reader implements it)."""

    def resolve(self, scans: Sequence[SourceScan]) -> list[SessionSummary]:
        """Apply cross-file titles, drop sessions without prose, keep the first copy of each id."""
        leaf_titles: dict[str, str] = {}
        for scan in scans:
            leaf_titles.update(scan.leaf_titles)
        seen: set[str] = set()
        out: list[SessionSummary] = []
        for scan in scans:
            for item in scan.sessions:
                summary = item.summary
                # Empty copies are skipped before the duplicate check, so a session that a migration
                # left empty in one source still lists from the source that has its messages.
                if summary.message_count == 0 or summary.session_id in seen:
                    continue
                seen.add(summary.session_id)
                title = summary.title or _leaf_title(item.uuids, leaf_titles) or item.fallback_title
                out.append(summary if title == summary.title else attrs.evolve(summary, title=title))
        return out

    def summaries(self, source: Path) -> list[SessionSummary]:
        """``scan`` then ``resolve`` this one source."""
        return self.resolve([self.scan(source)])


def _leaf_title(uuids: Sequence[str], leaf_titles: Mapping[str, str]) -> str | None:
    """The summary whose leaf is the latest of ``uuids`` (later summaries cover more of the session)."""
    if not leaf_titles:
        return None
    for uuid in reversed(uuids):
        title = leaf_titles.get(uuid)
        if title:
            return title
    return None


# -- helpers ---------------------------------------------------------------------------------------


def file_signature(path: Path) -> tuple[int, int] | None:
    """``(mtime_ns, size)`` of ``path``; ``None`` if it does not exist (or cannot be stat'ed)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON Lines file, skipping blank, broken and non-object lines, and
    lines longer than ``MAX_RECORD_BYTES``.

    Agents append to these files while we read them, so a half-written last line is normal.
    """
    with open_regular(path) as handle:
        while raw := handle.readline(MAX_RECORD_BYTES + 1):
            if len(raw) > MAX_RECORD_BYTES:  # skipped to its end, never held whole
                while raw and not raw.endswith(b"\n"):
                    raw = handle.readline(1 << 20)
                continue
            if not raw.strip():
                continue
            try:
                row = json_loads(raw)
            except ValueError:  # JSONDecodeError and UnicodeDecodeError both derive from it
                continue
            if isinstance(row, dict):
                yield row


def read_json(path: Path) -> dict[str, Any] | None:
    """One JSON object file, or ``None`` when it does not parse or is not an object."""
    try:
        with open_regular(path) as handle:
            value = json_loads(handle.read())
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def parse_timestamp(value: object) -> datetime | None:
    """An ISO-8601 string as an aware UTC datetime (naive values are taken as UTC); else ``None``."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def from_epoch_ms(value: object) -> datetime | None:
    """Milliseconds since the epoch (OpenCode's clock) as an aware UTC datetime."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return datetime.fromtimestamp(value / 1000.0, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def title_from_text(text: str | None, limit: int = TITLE_MAX_CHARS) -> str | None:
    """``text`` on one line (whitespace runs collapsed), secrets redacted, at most ``limit``
    characters, cut with '…'. Redacted before the cut: a cut token no longer has its shape."""
    if not text:
        return None
    # Only a prefix is redacted (a first prompt may be a huge paste), cut at a blank so that no
    # token is cut; redaction shrinks text, hence the room left for it.
    room = 8 * limit + 1024
    if len(text) > room:
        text = text[:room].rsplit(None, 1)[0]
    line = " ".join(redact_secrets(text).split())
    if not line:
        return None
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    # Cut at a word boundary unless that would lose more than half of the room.
    if line[limit - 1] != " " and " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + "…"


class TimeSpan:
    """The earliest and latest of a stream of timestamps (lines are not always in time order)."""

    __slots__ = ("first", "last")

    def __init__(self) -> None:
        self.first: datetime | None = None
        self.last: datetime | None = None

    def add(self, moment: datetime | None) -> None:
        """Widen the span to include ``moment`` (``None`` is ignored)."""
        if moment is None:
            return
        if self.first is None or moment < self.first:
            self.first = moment
        if self.last is None or moment > self.last:
            self.last = moment


def bump(counter: dict[str, int], kind: object, n: int = 1) -> None:
    """Count ``n`` dropped blocks of ``kind`` (unnamed kinds are counted as ``unknown``)."""
    key = kind if isinstance(kind, str) and kind else "unknown"
    counter[key] = counter.get(key, 0) + n
