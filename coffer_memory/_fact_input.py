"""What a fact write checks and derives before it touches a store: its text, one-line fields,
session id, tags and actor (``validate_text``, ``check_field``, ...), the title and description
derived from a text, and ``WriteEvents`` (the listeners told after each new fact).

Kept apart from ``_core.Facts``, which uses them (as do the lanes, the organizer and imports).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from ._errors import InvalidInput, MemoryRejected
from ._index.filters import check_tags
from ._models import MemoryFact
from ._store.writer import Writer
from .vocabulary import ACTORS, MAX_SESSION_ID_CHARS

__all__ = [
    "WriteEvents",
    "as_tag_list",
    "check_actor",
    "check_field",
    "check_session_id",
    "checked_tags",
    "default_description",
    "default_title",
    "follow_body",
    "next_suffix",
    "validate_text",
]


def default_title(text: str) -> str:
    first = text.strip().splitlines()[0].strip().lstrip("#").strip()
    return first[:80].rstrip() or "memory"


def default_description(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 200 else flat[:199].rstrip() + "…"


def next_suffix(folder: Path, slug: str) -> int:
    """The first ``-N`` suffix above every ``<slug>-N.md`` already in ``folder``."""
    pattern = re.compile(re.escape(slug) + r"-(\d+)\.md")
    taken = [int(m.group(1)) for name in os.listdir(folder) if (m := pattern.fullmatch(name))]
    return max(taken, default=1) + 1


def follow_body(old: MemoryFact, new_body: str | None) -> str:
    """Keep a description the user wrote; re-derive one that was derived from the old body."""
    if new_body is not None and old.description == default_description(old.body):
        return default_description(new_body)
    return old.description


def validate_text(text: object, limit: int, *, any_store: bool = False) -> str:
    """A fact or journal text, stripped: ``MemoryRejected`` when empty or longer than ``limit``
    (``any_store``: ``limit`` is the highest any store allows, checked before the store is known)."""
    if not isinstance(text, str):
        raise InvalidInput("text must be a string", field="text")
    if not text.strip():
        raise MemoryRejected("empty")
    if len(text.strip()) > limit:
        raise MemoryRejected("too_long", length=len(text.strip()), limit=limit, any_store=any_store)
    return text.strip()


def check_field(value: str | None, name: str, limit: int) -> str | None:
    """A one-line title or description, flattened; ``InvalidInput`` when too long."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string", field=name)
    flat = " ".join(value.split())
    if len(flat) > limit:
        raise InvalidInput(f"{name} is longer than {limit} characters", field=name)
    return flat


# An agent session's id as agents and apps write them (UUIDs, ULIDs, "<app>-<n>"): one token of
# printable ASCII, so it is stored in the frontmatter and shown by the audit as given.
_SESSION_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._:@+/=-]{{0,{MAX_SESSION_ID_CHARS - 1}}}")


def check_session_id(value: object) -> str | None:
    """``value`` as a session id (None stays None); ``InvalidInput`` unless it is one token of up
    to ``MAX_SESSION_ID_CHARS`` letters, digits and ``. _ : @ + / = -``."""
    if value is None:
        return None
    if not isinstance(value, str) or not _SESSION_ID.fullmatch(value):
        raise InvalidInput(
            f"origin_session_id must be one to {MAX_SESSION_ID_CHARS} characters of letters, digits"
            " and . _ : @ + / = - (starting with a letter or digit)",
            field="origin_session_id",
        )
    return value


def as_tag_list(tags: object) -> object:
    """``tags`` as a list when it is an iterable of them (read twice: checked, then scrubbed);
    anything else is left for ``check_tags`` to refuse."""
    if isinstance(tags, str | bytes) or not isinstance(tags, Iterable):
        return tags
    return list(tags)


def checked_tags(
    writer: Writer, findings: dict[str, int], raw: object, clean: tuple[str, ...]
) -> tuple[str, ...]:
    """The tags after the content checks, run on each tag as given (lowercasing first would hide
    a key's shape, ``AKIA…`` among them, and leave most of it on disk: a tag is up to 40
    characters, room for a whole token); a redacted tag is checked again as a tag."""
    assert isinstance(raw, list)  # as_tag_list made it one, and check_tags accepted it
    checked = [writer.check(t, "tags", findings) for t in raw]
    return clean if checked == raw else check_tags(checked)


def check_actor(actor: object) -> None:
    """``InvalidInput`` unless ``actor`` is agent or user."""
    if actor not in ACTORS:
        raise InvalidInput("actor must be 'agent' or 'user'", field="actor")


class WriteEvents:
    """Listeners told after each new fact (the organizer re-arms its auto-organize timer here)."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[str], None]] = []

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(store)`` after every new fact."""
        self._listeners.append(listener)

    def wrote(self, store: str) -> None:
        """A new fact landed in ``store``."""
        for listener in self._listeners:
            listener(store)
