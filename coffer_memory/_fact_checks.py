"""The checks of what a fact is written with: its text, title and description, tags, session id
and actor, each refused with a typed error (``InvalidInput``, ``MemoryRejected``) before anything is
written. Facts (``_core.py``) and the journal lane (``_lanes.py``) share them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ._errors import InvalidInput, MemoryRejected
from ._index.filters import check_tags
from ._store.writer import Writer
from .vocabulary import ACTORS, MAX_SESSION_ID_CHARS


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


def tags_of(tags: object) -> object:
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
    assert isinstance(raw, list)  # tags_of made it one, and check_tags accepted it
    checked = [writer.check(t, "tags", findings) for t in raw]
    return clean if checked == raw else check_tags(checked)


def check_actor(actor: object) -> None:
    """``InvalidInput`` unless ``actor`` is agent or user."""
    if actor not in ACTORS:
        raise InvalidInput("actor must be 'agent' or 'user'", field="actor")
