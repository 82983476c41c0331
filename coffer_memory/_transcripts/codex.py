"""Codex CLI rollouts: ``<codex>/sessions/YYYY/MM/DD/rollout-*.jsonl``, read-only.

Each line is ``{"timestamp", "type", "payload"}``. The conversation is read from the
``response_item`` messages only: the same words are logged again as ``event_msg``
(``user_message`` / ``agent_message``), and reading both would count every turn twice.

Not prompts: ``developer`` messages and the user items Codex injects itself (``# AGENTS.md
instructions``, ``<environment_context>``, ``<user_instructions>``). Tool calls and their output,
reasoning and the like are dropped and counted in ``Transcript.dropped``.

Rollouts written before the ``payload`` envelope (a first line ``{"id", "timestamp",
"instructions"}`` then bare response items) are read too; their cwd comes from the injected
``<environment_context>``. ``archived_sessions/`` is left out: the user archived those.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from .._agents.homes import CODEX
from .models import Message, Role, SessionSummary, Transcript
from .readers import (
    BaseReader,
    ScannedSession,
    SourceScan,
    TimeSpan,
    bump,
    iter_jsonl,
    parse_timestamp,
    title_from_text,
)

_INJECTED_PREFIXES = ("# AGENTS.md instructions", "<environment_context>", "<user_instructions>")
_ENVELOPE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_TEXT_BLOCKS = frozenset({"input_text", "output_text", "text"})
_CWD_TAG = re.compile(r"<cwd>([^<]+)</cwd>")
_UUID_TAIL = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")


@attrs.define
class _Parsed:
    messages: list[Message] = attrs.field(factory=list)
    dropped: dict[str, int] = attrs.field(factory=dict)
    session_id: str | None = None
    cwd: str | None = None
    context_cwd: str | None = None
    """Fallback cwd: a ``turn_context`` line's, or the one inside ``<environment_context>``."""
    span: TimeSpan = attrs.field(factory=TimeSpan)


def _envelope(row: dict[str, Any], first: bool) -> tuple[str | None, dict[str, Any] | None]:
    """``(type, payload)`` of a line, whichever generation of the format wrote it."""
    kind, payload = row.get("type"), row.get("payload")
    if isinstance(payload, dict) and isinstance(kind, str):
        return kind, payload
    if first and kind is None and "id" in row:
        return "session_meta", row  # pre-envelope first line: the meta object itself
    if isinstance(kind, str) and kind not in _ENVELOPE_TYPES and "record_type" not in row:
        return "response_item", row  # pre-envelope bare response item
    return None, None


def _message(item: dict[str, Any], timestamp: datetime | None, parsed: _Parsed) -> None:
    role = item.get("role")
    content = item.get("content")
    blocks = [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []
    if role not in ("user", "assistant"):
        bump(parsed.dropped, role if isinstance(role, str) else "message")  # developer, system
        return
    texts: list[str] = []
    for block in blocks:
        text = block.get("text")
        if block.get("type") not in _TEXT_BLOCKS or not isinstance(text, str):
            bump(parsed.dropped, block.get("type"))  # input_image, refusal...
            continue
        if role == "user" and text.lstrip().startswith(_INJECTED_PREFIXES):
            bump(parsed.dropped, "injected_context")
            found = _CWD_TAG.search(text)
            if found and parsed.context_cwd is None:
                parsed.context_cwd = found.group(1).strip()
            continue
        if text.strip():
            texts.append(text.strip())
    if texts:
        speaker: Role = "user" if role == "user" else "assistant"
        parsed.messages.append(Message(role=speaker, text="\n\n".join(texts), timestamp=timestamp))


def parse_rollout(path: Path) -> _Parsed:
    """One pass over a rollout file."""
    parsed = _Parsed()
    first = True
    for row in iter_jsonl(path):
        kind, payload = _envelope(row, first)
        first = False
        moment = parse_timestamp(row.get("timestamp"))
        parsed.span.add(moment)
        if payload is None:
            continue
        if kind == "session_meta":
            # After a resume or fork more meta lines can follow; the first one is this file's.
            if parsed.session_id is None and isinstance(payload.get("id"), str):
                parsed.session_id = payload["id"]
                if isinstance(payload.get("cwd"), str) and payload["cwd"]:
                    parsed.cwd = payload["cwd"]
                parsed.span.add(parse_timestamp(payload.get("timestamp")))
        elif kind == "turn_context":
            if parsed.context_cwd is None and isinstance(payload.get("cwd"), str):
                parsed.context_cwd = payload["cwd"]
        elif kind == "response_item":
            item_type = payload.get("type")
            if item_type == "message":
                _message(payload, moment, parsed)
            else:
                bump(parsed.dropped, item_type)  # function_call(_output), reasoning, custom_tool_call...
        elif kind == "compacted":
            bump(parsed.dropped, "compacted")
        # event_msg repeats the response items (and adds token counts): nothing to take from it.
    return parsed


class CodexReader(BaseReader):
    """Rollouts under ``<codex>/sessions``."""

    agent = CODEX

    def __init__(self, codex_dir: Path) -> None:
        self.sessions_dir = codex_dir / "sessions"

    def sources(self) -> list[Path]:
        """Every ``rollout-*.jsonl`` under ``sessions/`` (dated folders, searched recursively)."""
        if not self.sessions_dir.is_dir():
            return []
        return sorted(self.sessions_dir.rglob("rollout-*.jsonl"))

    def _summary(self, path: Path, parsed: _Parsed) -> SessionSummary:
        session_id = parsed.session_id
        if session_id is None:  # no meta line: the file name ends with the thread id
            found = _UUID_TAIL.search(path.stem)
            session_id = found.group(1) if found else path.stem
        return SessionSummary(
            agent=self.agent,
            session_id=session_id,
            title=None,  # rollouts have no title of their own; resolve uses the first prompt
            project_path=parsed.cwd or parsed.context_cwd,
            message_count=len(parsed.messages),
            started_at=parsed.span.first,
            last_activity_at=parsed.span.last,
            source_path=str(path.absolute()),
        )

    def scan(self, source: Path) -> SourceScan:
        """One session per rollout file, titled by its first real prompt."""
        parsed = parse_rollout(source)
        first_prompt = next((m.text for m in parsed.messages if m.role == "user"), None)
        session = ScannedSession(
            summary=self._summary(source, parsed), fallback_title=title_from_text(first_prompt)
        )
        return SourceScan(sessions=(session,))

    def load(self, summary: SessionSummary) -> Transcript:
        """Re-read the rollout and return its prose turns."""
        parsed = parse_rollout(Path(summary.source_path))
        return Transcript(summary=summary, messages=tuple(parsed.messages), dropped=parsed.dropped)
