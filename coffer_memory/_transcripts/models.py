"""Value objects shared by the transcript readers, the scrubber and distillation."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal, TypeAlias

import attrs

from .. import vocabulary

Role = Literal["user", "assistant"]


def unicode_text(value: str) -> str:
    """``value`` with each lone surrogate (JSON's ``"\\ud800"``, which agents' files may hold)
    made U+FFFD: no file or JSON answer can carry one, so a transcript holding one was a REST
    ``500`` to show, and its distillation an ``INVALID_INPUT`` at the write."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def _unicode_or_none(value: str | None) -> str | None:
    return None if value is None else unicode_text(value)


@attrs.frozen
class SessionSummary:
    """One past agent session, as listed (a read-only projection; nothing is persisted)."""

    agent: str
    """``claude-code``, ``codex`` or ``opencode``."""
    session_id: str
    title: str | None = attrs.field(converter=_unicode_or_none)
    project_path: str | None = attrs.field(converter=_unicode_or_none)
    """The session's working directory (the real cwd, never decoded from a folder name)."""
    message_count: int
    started_at: datetime | None
    last_activity_at: datetime | None
    source_path: str
    """Absolute path of the file the session was read from (for OpenCode's database: the .db)."""


@attrs.frozen
class Message:
    """One user or assistant turn: its natural-language text blocks only, joined by blank lines.

    Readers drop tool calls, tool results, reasoning, images, file and step parts, injected
    instructions and synthetic text before building a ``Message``; ``Transcript.dropped`` counts them.
    """

    role: Role
    text: str = attrs.field(converter=unicode_text)
    timestamp: datetime | None = None


@attrs.frozen
class Transcript:
    """A session's summary and its prose turns, in order."""

    summary: SessionSummary
    messages: tuple[Message, ...]
    dropped: Mapping[str, int] = attrs.field(factory=dict)
    """Blocks left out by the reader, counted by kind (``tool_use``, ``tool_result``, ``thinking``, ...)."""


DistillStatus: TypeAlias = vocabulary.DistillStatus


@attrs.frozen
class DistillResult:
    """What distilling one session did. ``scrubbed`` counts what was removed, never the values."""

    agent: str
    session_id: str
    status: DistillStatus
    store: str | None = None
    insights: tuple[Any, ...] = ()
    """``coffer_memory._transcripts.distill.Insight`` items (written, or proposed in a dry run)."""
    paths: tuple[str, ...] = ()
    """Journal files written."""
    scrubbed: Mapping[str, int] = attrs.field(factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    detail: str | None = None
    """Why nothing was written (for ``invalid_output``: the parse error)."""


@attrs.frozen
class SweepResult:
    """What a sweep over past sessions did."""

    agent: str | None
    considered: int
    results: tuple[DistillResult, ...]
    skipped_active: int = 0
    """Sessions left for later because they were active in the last ``min_idle_seconds``."""
    remaining: int = 0
    """Sessions still to distill after this run (the per-run bound was reached)."""
    skipped_opted_out: int = 0
    """Sessions of projects that opted out (``.coffer-optout`` or ``[projects] exclude``): never read."""
