"""Topic documents as the organizer writes them: frontmatter {title, description, updated_at} + body."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .._store.files import format_time, now_utc, yaml_scalar
from ..vocabulary import MAX_TAGS

TOPIC_KEYS = ("title", "description", "updated_at", "tags")


def merged_tags(*groups: Sequence[str]) -> tuple[str, ...]:
    """The tags of a topic after a merge: every group's, in first-seen order, at most ``MAX_TAGS``.

    A topic that absorbs an inbox item keeps the item's tags, so a ``tags=`` recall still finds
    what was remembered under them (and the topic's own tags survive the rewrite).
    """
    return tuple(dict.fromkeys(t for group in groups for t in group))[:MAX_TAGS]


def render_topic(
    title: str,
    description: str,
    body: str,
    extra: Mapping[str, Any] | None = None,
    tags: Sequence[str] = (),
) -> bytes:
    """A topic document's bytes; ``extra`` keeps frontmatter keys someone added by hand."""
    lines = [
        "---",
        f"title: {yaml_scalar(' '.join(title.split()))}",
        f"description: {yaml_scalar(' '.join(description.split()))}",
        f"updated_at: {format_time(now_utc())}",
    ]
    rest = {k: v for k, v in (extra or {}).items() if k not in TOPIC_KEYS and k != "kind"}
    if "created_at" in rest:
        lines.append(f"created_at: {rest.pop('created_at')}")
    if tags:
        lines.append(f"tags: {yaml_scalar(list(tags))}")
    if rest:
        lines.append(yaml.safe_dump(rest, allow_unicode=True, sort_keys=False).rstrip("\n"))
    return ("\n".join(lines) + "\n---\n\n" + body.strip() + "\n").encode()


def unified(before: bytes | None, after: bytes | None, path: str) -> str:
    """A unified diff between two versions of a store file (None: absent)."""
    old = (before or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    new = (after or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    a = "/dev/null" if before is None else f"a/{path}"
    b = "/dev/null" if after is None else f"b/{path}"
    return "".join(difflib.unified_diff(old, new, a, b))


def read_or_none(path: Path) -> bytes | None:
    """A file's bytes, or None when it does not exist."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
