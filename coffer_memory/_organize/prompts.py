"""Prompts and JSON schemas of the organizer and the reorg loop."""

from __future__ import annotations

from typing import Any

ORGANIZE_SYSTEM = (
    "You file notes into a knowledge base of Markdown topic documents kept by a coding assistant. "
    "Answer with one JSON object and nothing else."
)

ORGANIZE_TASK = """New note (inbox/{name}):
Title: {title}
Text:
{body}

Candidate topic documents:
{candidates}

Choose one action:
- "merge": the note belongs in one candidate. Set "target" to that candidate's file name and "body" to the
  COMPLETE new Markdown body of that document with the note's information integrated (keep everything
  that is still true, drop duplicates, keep its headings). Set "description" to a one-line summary.
- "create": no candidate fits. Set "slug" (short, kebab-case), "title", a one-line "description" and the
  "body" of a new topic document that holds the note.
- "rule": the note is an instruction about how an agent must work (a procedure, a must or a never), not a
  fact about the project. Set "rule" to it as one imperative sentence.
Leave the fields an action does not use as empty strings."""

ORGANIZE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["merge", "create", "rule"]},
        "target": {"type": "string"},
        "slug": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "body": {"type": "string"},
        "rule": {"type": "string"},
    },
    "required": ["action", "target", "slug", "title", "description", "body", "rule"],
    "additionalProperties": False,
}

SPLIT_TASK = """These are the rules a coding assistant follows in one project. The file is getting long:
group the rules by topic. Keep every rule, word for word; put each rule in exactly one group.

{rules}

Answer with {{"groups": [{{"slug": "kebab-case-topic", "title": "Topic", "rules": ["rule", ...]}}, ...]}}."""

SPLIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "groups": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "slug": {"type": "string"},
                    "title": {"type": "string"},
                    "rules": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["slug", "title", "rules"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["groups"],
    "additionalProperties": False,
}

REORG_SYSTEM = """You maintain a knowledge base of Markdown topic documents for a coding assistant.
Improve it: merge documents that cover the same topic, split documents that cover several topics or are
too long, and fix titles and descriptions. Work step by step with these tools, one call per answer:
- {{"tool": "list_topics"}}: every document's file name, title, description and size.
- {{"tool": "read_topic", "name": "x.md"}}: one document's body.
- {{"tool": "write_topic", "name": "x.md", "title": "...", "description": "...", "body": "..."}}: create or
  replace a document (the old version is archived first).
- {{"tool": "supersede_topic", "name": "x.md", "replaced_by": "y.md"}}: retire a document whose content now
  lives elsewhere (it is archived, never lost).
- {{"tool": "done", "summary": "what you changed"}}: finish.
You have at most {steps} calls. Answer with one JSON object and nothing else."""

REORG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool": {
            "type": "string",
            "enum": ["list_topics", "read_topic", "write_topic", "supersede_topic", "done"],
        },
        "name": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "body": {"type": "string"},
        "replaced_by": {"type": "string"},
        "summary": {"type": "string"},
    },
    "required": ["tool"],
    "additionalProperties": False,
}
