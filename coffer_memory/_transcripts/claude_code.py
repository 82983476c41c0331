"""Claude Code sessions: ``<claude>/projects/<encoded cwd>/<sessionId>.jsonl``, read-only.

What is a turn here:

- a *user* turn is a ``type:"user"`` line with prose: not a tool result (those arrive as user
  lines too), not ``isMeta`` / ``isCompactSummary``, not slash-command or local-command echo,
  ``<system-reminder>`` text or ``[Request interrupted by user]``;
- an *assistant* turn is one API response: its blocks are logged one per line, the lines share
  ``message.id``, and the turn is the join of their ``text`` blocks (thinking and tool calls are
  dropped). A response made only of tool calls has no prose and is not a turn.

Subagent transcripts (``<sessionId>/subagents/agent-*.jsonl``, older ``agent-*.jsonl`` next to the
sessions) and inline ``isSidechain`` lines belong to a subagent, not to the session.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from .._agents.homes import CLAUDE_CODE
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

# User text that Claude Code writes itself: slash-command echo, local command output, shell-mode
# echo, reminders and the interruption marker. None of it is something the user asked.
_NOISE_PREFIXES = (
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<system-reminder>",
    "[Request interrupted by user",
)
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


@attrs.define
class _Turn:
    role: Role
    texts: list[str]
    timestamp: datetime | None


@attrs.define
class _Parsed:
    """Everything one pass over a session file yields."""

    turns: list[_Turn] = attrs.field(factory=list)
    dropped: dict[str, int] = attrs.field(factory=dict)
    uuids: list[str] = attrs.field(factory=list)
    leaf_titles: dict[str, str] = attrs.field(factory=dict)
    custom_title: str | None = None
    ai_title: str | None = None
    cwd: str | None = None
    span: TimeSpan = attrs.field(factory=TimeSpan)

    def messages(self) -> tuple[Message, ...]:
        return tuple(
            Message(role=t.role, text="\n\n".join(t.texts), timestamp=t.timestamp)
            for t in self.turns
            if t.texts
        )


def _text_blocks(content: object) -> list[dict[str, Any]]:
    """A message's content as a list of blocks (a plain string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    return []


def _is_noise(text: str) -> bool:
    return text.lstrip().startswith(_NOISE_PREFIXES)


def _user_line(row: dict[str, Any], message: dict[str, Any], parsed: _Parsed) -> None:
    if row.get("isMeta") is True:
        bump(parsed.dropped, "meta")
        return
    if row.get("isCompactSummary") is True:
        bump(parsed.dropped, "compact_summary")
        return
    blocks = _text_blocks(message.get("content"))
    if any(block.get("type") == "tool_result" for block in blocks):
        # A tool result line is the tool talking, not the user; everything in it goes.
        for block in blocks:
            bump(parsed.dropped, block.get("type"))
        return
    texts: list[str] = []
    for block in blocks:
        if block.get("type") != "text":
            bump(parsed.dropped, block.get("type"))  # images, documents...
            continue
        text = block.get("text")
        if not isinstance(text, str):
            continue
        # Reminders can be glued to a real prompt: cut them out before judging what is left.
        cleaned = _REMINDER.sub("", text).strip()
        if cleaned != text.strip():
            bump(parsed.dropped, "system_reminder")
        if _is_noise(cleaned):
            bump(parsed.dropped, "cli_notice")
        elif cleaned:
            texts.append(cleaned)
    if texts:
        parsed.turns.append(_Turn("user", texts, parse_timestamp(row.get("timestamp"))))


def _assistant_line(
    row: dict[str, Any], message: dict[str, Any], parsed: _Parsed, responses: dict[str, _Turn]
) -> None:
    if row.get("isApiErrorMessage") is True:  # Claude Code's own error notice, not the model's words
        bump(parsed.dropped, "api_error")
        return
    key = message.get("id") or row.get("uuid")
    turn = responses.get(key) if isinstance(key, str) else None
    if turn is None:
        # The turn takes the place of the response's first line, whatever order later lines come in.
        turn = _Turn("assistant", [], parse_timestamp(row.get("timestamp")))
        parsed.turns.append(turn)
        if isinstance(key, str):
            responses[key] = turn
    for block in _text_blocks(message.get("content")):
        text = block.get("text")
        if block.get("type") == "text" and isinstance(text, str):
            if text.strip():
                turn.texts.append(text.strip())
        else:
            bump(parsed.dropped, block.get("type"))


def parse_session_file(path: Path) -> _Parsed:
    """One pass over a session file: turns, titles, uuids, cwd and time span."""
    parsed = _Parsed()
    responses: dict[str, _Turn] = {}
    for row in iter_jsonl(path):
        kind = row.get("type")
        if kind == "custom-title":
            if isinstance(row.get("customTitle"), str) and row["customTitle"].strip():
                parsed.custom_title = row["customTitle"]  # the latest one wins
            continue
        if kind == "ai-title":
            if isinstance(row.get("aiTitle"), str) and row["aiTitle"].strip():
                parsed.ai_title = row["aiTitle"]
            continue
        if kind == "summary":
            leaf, text = row.get("leafUuid"), row.get("summary")
            if isinstance(leaf, str) and isinstance(text, str) and text.strip():
                parsed.leaf_titles[leaf] = text
            continue
        if row.get("isSidechain") is True:
            bump(parsed.dropped, "sidechain")
            continue
        uuid = row.get("uuid")
        if isinstance(uuid, str):
            parsed.uuids.append(uuid)
        parsed.span.add(parse_timestamp(row.get("timestamp")))
        if parsed.cwd is None and isinstance(row.get("cwd"), str) and row["cwd"]:
            parsed.cwd = row["cwd"]
        message = row.get("message")
        if not isinstance(message, dict):
            continue
        if kind == "user":
            _user_line(row, message, parsed)
        elif kind == "assistant":
            _assistant_line(row, message, parsed, responses)
    return parsed


class ClaudeCodeReader(BaseReader):
    """Sessions under ``<claude>/projects``."""

    agent = CLAUDE_CODE

    def __init__(self, claude_dir: Path) -> None:
        self.projects = claude_dir / "projects"

    def sources(self) -> list[Path]:
        """Top-level ``*.jsonl`` of every project folder, minus the older ``agent-*`` subagent files."""
        if not self.projects.is_dir():
            return []
        # One level deep only: ``<sessionId>/subagents/agent-*.jsonl`` are subagents, not sessions.
        return sorted(p for p in self.projects.glob("*/*.jsonl") if not p.name.startswith("agent-"))

    def _summary(self, path: Path, parsed: _Parsed, count: int, title: str | None) -> SessionSummary:
        return SessionSummary(
            agent=self.agent,
            session_id=path.stem,
            title=title,
            project_path=parsed.cwd,
            message_count=count,
            started_at=parsed.span.first,
            last_activity_at=parsed.span.last,
            source_path=str(path.absolute()),
        )

    def scan(self, source: Path) -> SourceScan:
        """One session per file; ``summary`` lines are passed on for whichever file they title."""
        parsed = parse_session_file(source)
        messages = parsed.messages()
        title = parsed.custom_title or parsed.ai_title
        first_prompt = next((m.text for m in messages if m.role == "user"), None)
        session = ScannedSession(
            summary=self._summary(source, parsed, len(messages), title),
            fallback_title=title_from_text(first_prompt),
            # Only a session without an explicit title can be named by a summary line.
            uuids=() if title else tuple(parsed.uuids),
        )
        return SourceScan(sessions=(session,), leaf_titles=parsed.leaf_titles)

    def load(self, summary: SessionSummary) -> Transcript:
        """Re-read the session file and return its prose turns."""
        parsed = parse_session_file(Path(summary.source_path))
        return Transcript(summary=summary, messages=parsed.messages(), dropped=parsed.dropped)
