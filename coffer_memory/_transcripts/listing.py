"""Listing past sessions of an agent, with an in-process cache of the parsed source files.

A session file is parsed again only when its signature (``mtime_ns`` and size, plus the WAL for
OpenCode's database) changed since the last listing; files that disappeared leave the cache.
When no source changed at all, the previous listing is reused as is.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import attrs

from .._agents.homes import AGENTS, CLAUDE_CODE, CODEX, OPENCODE, AgentHomes
from .._errors import InvalidInput, SessionNotFound, safe_echo
from ..vocabulary import MAX_TRANSCRIPT_LIST_LIMIT
from .models import SessionSummary, Transcript
from .readers import SourceScan, SourceUnavailable, TranscriptReader
from .scrub import scrub_title

SORT_FIELDS: tuple[str, ...] = ("started_at", "last_activity_at", "message_count")
ORDERS: tuple[str, ...] = ("asc", "desc")
MAX_LIMIT = MAX_TRANSCRIPT_LIST_LIMIT


def reader_for(agent: str, homes: AgentHomes) -> TranscriptReader:
    """The reader for ``agent`` (``claude-code``, ``codex`` or ``opencode``) over ``homes``.

    Raises ``ValueError`` for another name; the lister turns that into ``InvalidInput``.
    """
    # Imported on first use: a process lists one agent's sessions, rarely all three.
    if agent == CLAUDE_CODE:
        from .claude_code import ClaudeCodeReader

        return ClaudeCodeReader(homes.claude)
    if agent == CODEX:
        from .codex import CodexReader

        return CodexReader(homes.codex)
    if agent == OPENCODE:
        from .opencode import OpenCodeReader

        return OpenCodeReader(homes.opencode_data)
    raise ValueError(f"unknown agent {agent!r}")


@attrs.frozen
class SessionPage:
    """One page of a session listing."""

    items: tuple[SessionSummary, ...]
    total: int
    """How many sessions matched the filters, over all pages."""


@attrs.define
class _AgentCache:
    entries: dict[Path, tuple[Hashable, SourceScan]] = attrs.field(factory=dict)
    key: tuple[tuple[Path, Hashable], ...] | None = None
    sessions: list[SessionSummary] = attrs.field(factory=list)


class SessionLister:
    """Lists, finds and loads past sessions; safe to share between threads.

    ``scans`` counts the source files parsed since creation and ``last_scanned`` lists those
    parsed by the latest refresh, so callers (and tests) can see what the cache saved.
    """

    def __init__(
        self, homes: AgentHomes | None = None, *, readers: Mapping[str, TranscriptReader] | None = None
    ) -> None:
        self.homes = homes if homes is not None else AgentHomes.from_env()
        self._readers: dict[str, TranscriptReader] = (
            dict(readers)
            if readers is not None
            else {agent: reader_for(agent, self.homes) for agent in AGENTS}
        )
        self._caches: dict[str, _AgentCache] = {agent: _AgentCache() for agent in self._readers}
        self._lock = threading.Lock()
        self.scans = 0
        self.last_scanned: list[Path] = []

    def reader(self, agent: str) -> TranscriptReader:
        """The reader used for ``agent``; ``InvalidInput`` for an unknown agent name."""
        reader = self._readers.get(agent)
        if reader is None:
            raise InvalidInput(
                f"unknown agent {safe_echo(agent)!r}: expected one of {', '.join(AGENTS)}", field="agent"
            )
        return reader

    def all_sessions(self, agent: str) -> list[SessionSummary]:
        """Every session of ``agent``, refreshed from disk (unchanged files come from the cache)."""
        reader = self.reader(agent)
        with self._lock:
            cache = self._caches[agent]
            fresh: dict[Path, tuple[Hashable, SourceScan]] = {}
            scanned: list[Path] = []
            for source in reader.sources():
                signature = reader.signature(source)
                if signature is None:  # gone between the directory walk and the stat
                    continue
                hit = cache.entries.get(source)
                if hit is not None and hit[0] == signature:
                    fresh[source] = hit
                    continue
                try:
                    scan = reader.scan(source)
                except (OSError, SourceUnavailable):
                    continue  # vanished or unreadable right now: not listed, not cached, retried next time
                scanned.append(source)
                fresh[source] = (signature, scan)
            self.scans += len(scanned)
            self.last_scanned = scanned
            key = tuple((source, entry[0]) for source, entry in fresh.items())
            if key != cache.key:
                # Titles are redacted here, once, so that no listing, search or lookup (CLI,
                # REST, MCP) ever shows a secret that ``show`` would redact.
                resolved = reader.resolve([entry[1] for entry in fresh.values()])
                cache.sessions = [_titled(s) for s in resolved if _nameable(s)]
                cache.key = key
            cache.entries = fresh  # sources that vanished are dropped here
            return list(cache.sessions)

    def cached_sources(self, agent: str) -> list[Path]:
        """The source files whose parse is cached for ``agent`` (as of the latest refresh)."""
        self.reader(agent)
        with self._lock:
            return list(self._caches[agent].entries)

    def list_sessions(
        self,
        agent: str,
        *,
        search: str | None = None,
        project: str | None = None,
        started_after: datetime | None = None,
        started_before: datetime | None = None,
        sort: str = "last_activity_at",
        order: str = "desc",
        limit: int = 50,
        offset: int = 0,
    ) -> SessionPage:
        """A filtered, sorted page of ``agent``'s sessions.

        ``search`` is a case-insensitive substring of the title or the project path; ``project``
        an exact project path; ``started_after`` / ``started_before`` bound ``started_at``
        (inclusive / exclusive; naive datetimes are taken as UTC). Sessions without the sort
        field's value come last in either order.
        """
        _check_page(sort, order, limit, offset)
        after, before = _aware(started_after), _aware(started_before)
        needle = search.strip().casefold() if search and search.strip() else None
        matches = [
            s
            for s in self.all_sessions(agent)
            if (needle is None or _matches(s, needle))
            and (project is None or s.project_path == project)
            and (after is None or (s.started_at is not None and s.started_at >= after))
            and (before is None or (s.started_at is not None and s.started_at < before))
        ]
        ordered = sorted_sessions(matches, sort, descending=order == "desc")
        return SessionPage(items=tuple(ordered[offset : offset + limit]), total=len(ordered))

    def find(self, agent: str, session_id: str) -> SessionSummary:
        """The listed session with this id; ``SessionNotFound`` if there is none."""
        for summary in self.all_sessions(agent):
            if summary.session_id == session_id:
                return summary
        raise SessionNotFound(agent, session_id)

    def load(self, agent: str, session_id: str) -> Transcript:
        """A session's prose turns; ``SessionNotFound`` if it is not listed or vanished meanwhile."""
        summary = self.find(agent, session_id)
        try:
            return self.reader(agent).load(summary)
        except (OSError, SourceUnavailable) as exc:
            raise SessionNotFound(agent, session_id) from exc


def _nameable(summary: SessionSummary) -> bool:
    """Whether a session's id and file path are text: a file named in another encoding than UTF-8
    gives neither, so no face can name or show the session, and it made the agent's whole listing
    a REST ``500`` (no JSON answer can carry the lone surrogates Python reads such a name as)."""
    try:
        summary.session_id.encode("utf-8")
        summary.source_path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _titled(summary: SessionSummary) -> SessionSummary:
    title = scrub_title(summary.title)
    return summary if title == summary.title else attrs.evolve(summary, title=title)


def _check_page(sort: str, order: str, limit: int, offset: int) -> None:
    if sort not in SORT_FIELDS:
        raise InvalidInput(
            f"sort must be one of {', '.join(SORT_FIELDS)}, got {safe_echo(sort)!r}", field="sort"
        )
    if order not in ORDERS:
        raise InvalidInput(f"order must be 'asc' or 'desc', got {safe_echo(order)!r}", field="order")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(
            f"limit must be an integer from 1 to {MAX_LIMIT}, got {safe_echo(limit)!r}", field="limit"
        )
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInput(
            f"offset must be a non-negative integer, got {safe_echo(offset)!r}", field="offset"
        )


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def _matches(summary: SessionSummary, needle: str) -> bool:
    return any(
        value is not None and needle in value.casefold() for value in (summary.title, summary.project_path)
    )


def sorted_sessions(items: list[SessionSummary], field: str, *, descending: bool) -> list[SessionSummary]:
    """Sorted by ``field`` (ties by session id), items without a value last whatever the order."""
    present = [s for s in items if getattr(s, field) is not None]
    missing = [s for s in items if getattr(s, field) is None]
    present.sort(key=lambda s: (getattr(s, field), s.session_id), reverse=descending)
    missing.sort(key=lambda s: s.session_id)
    return present + missing
