"""Distillation: one LLM call turns a scrubbed session into insights ``{name, description, body}``.

Only the scrubbed prose of user and assistant turns is sent (see ``scrub``). Insights carry no
type: the journal lane is the only classification, and promoting recurring journal patterns
into knowledge or rules is the organizer's job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from .._llm import ChatMessage, LLMOutputInvalid, extract_json
from .._store.lanes import demote_headings
from .increment import content_hash
from .models import Message, Transcript

MAX_INSIGHTS = 12
MAX_NAME_CHARS = 120
MAX_DESCRIPTION_CHARS = 400
MAX_BODY_CHARS = 4000

SYSTEM_PROMPT = (
    "You read a conversation between a developer and a coding agent and extract what is worth "
    "remembering in later sessions on the same project: decisions and their reasons, conventions, "
    "commands that work, pitfalls found, and open follow-ups. Skip small talk, one-off steps and "
    "anything that only mattered during the session. Never include secrets, credentials or "
    "personal data, even if the text shows them. Answer with JSON only."
)

INSIGHTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "insights": {
            "type": "array",
            "maxItems": MAX_INSIGHTS,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "body": {"type": "string"},
                },
                "required": ["name", "description", "body"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["insights"],
    "additionalProperties": False,
}


@attrs.frozen
class Insight:
    """One thing worth remembering from a session."""

    name: str
    """A short kebab-case handle, e.g. ``use-make-release-for-tagging``."""
    description: str
    """One sentence saying what the insight is."""
    body: str
    """The details, in Markdown."""

    def journal_text(self) -> str:
        """The insight as a journal entry's text."""
        return f"**{self.name}**: {self.description}\n\n{demote_headings(self.body)}".strip()


def content_sha256(transcript: Transcript) -> str:
    """The ledger key of a session's content: its prose turns, as read (before scrubbing)."""
    return content_hash(transcript.messages)


def _turns(messages: Sequence[Message]) -> list[str]:
    lines = []
    for message in messages:
        lines.append(f"[{message.role}]")
        lines.append(message.text.strip())
        lines.append("")
    return lines


def build_prompt(
    messages: Sequence[Message], *, project: str | None, context: Sequence[Message] = ()
) -> list[ChatMessage]:
    """The chat messages of a distillation call.

    ``context`` holds turns distilled before (a continued session): shown so the new turns make
    sense, with the instruction to take nothing from them.
    """
    lines = [f"Project: {project}" if project else "Project: (unknown)", ""]
    if context:
        lines += [
            "Earlier in the session (already distilled: context only, take no insight from it):",
            "",
            *_turns(context),
        ]
    lines += [
        "Conversation (tool calls, tool output, pasted files and secrets were removed):",
        "",
        *_turns(messages),
    ]
    lines.append(
        f"Return at most {MAX_INSIGHTS} insights as "
        '{"insights": [{"name": "kebab-case-handle", "description": "one sentence", '
        '"body": "the details in Markdown"}]}. Return {"insights": []} when nothing is worth keeping.'
    )
    return [ChatMessage("system", SYSTEM_PROMPT), ChatMessage("user", "\n".join(lines))]


def _clean(value: Any, field: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LLMOutputInvalid(f"an insight has no {field}", reason="invalid_insight")
    text = value.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def parse_insights(text: str) -> list[Insight]:
    """The insights in a model's answer; ``LLMOutputInvalid`` when the answer is malformed.

    Accepts ``{"insights": [...]}`` or a bare array. Any malformed insight rejects the whole
    answer: writing part of a half-understood answer is worse than writing nothing.
    """
    value = extract_json(text, expect="any")
    items = value.get("insights") if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise LLMOutputInvalid("the answer has no insights array", reason="no_insights", text=text)
    insights = []
    for item in items[:MAX_INSIGHTS]:
        if not isinstance(item, dict):
            raise LLMOutputInvalid("an insight is not an object", reason="invalid_insight", text=text)
        insights.append(
            Insight(
                name=" ".join(_clean(item.get("name"), "name", MAX_NAME_CHARS).split()),
                description=" ".join(
                    _clean(item.get("description"), "description", MAX_DESCRIPTION_CHARS).split()
                ),
                body=_clean(item.get("body"), "body", MAX_BODY_CHARS),
            )
        )
    return insights
