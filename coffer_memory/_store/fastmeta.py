"""A fast reader for the frontmatter coffer itself writes (``files.render_fact``).

A rebuild spent about a third of its time in YAML for a header whose keys, order and quoting
coffer chose. This reads exactly that shape: the keys in ``render_fact``'s order, each value a
plain scalar that YAML would read as a string (or null), a single-quoted one, or a timestamp
in ``format_time``'s form, then the tags as a flow list of such scalars. Anything else (a hand-edited or hand-written header, an extra key,
a double-quoted value with escapes) returns None, and the caller takes the YAML path, which
stays the reference: a test parses many rendered facts both ways and compares.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import yaml

_RESOLVER = yaml.resolver.Resolver()
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@` \t")
_NO = object()
_NON_PRINTABLE = yaml.reader.Reader.NON_PRINTABLE
# Line breaks to YAML besides "\n": one inside a value folds it or breaks the header, so a
# header holding any of them is YAML's to read (render_fact writes none: ``_one_line``).
_BREAKS = re.compile("[\r\x85\u2028\u2029]")
# The first characters YAML's implicit resolvers look at (bool, null, numbers, times...): a
# plain scalar starting with any other character is a string without asking the resolver. A
# letter leads only to bool and null, whole words of at most 5 letters ("false", "NULL").
_RESOLVED_FIRST = frozenset(k for k in _RESOLVER.yaml_implicit_resolvers if k)
_LETTER_WORDS_MAX = 5


def _scalar(text: str) -> object:
    """The value of one rendered scalar, or ``_NO`` when only YAML can say."""
    if not text:
        return _NO
    if text[0] == "'":
        inner = text[1:-1]
        if len(text) < 2 or text[-1] != "'" or "'" in inner.replace("''", ""):
            return _NO
        return inner.replace("''", "'")
    if text == "null":  # what an unset origin_session_id is written as: YAML's null
        return None
    if text[0] in _INDICATORS or text[-1] in " \t:" or ": " in text or " #" in text or "\t" in text:
        return _NO
    if None not in _RESOLVER.yaml_implicit_resolvers and (
        text[0] not in _RESOLVED_FIRST or (text[0].isalpha() and len(text) > _LETTER_WORDS_MAX)
    ):
        return text
    tag = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    if tag == "tag:yaml.org,2002:str":
        return text
    if tag == "tag:yaml.org,2002:null":
        return None
    return _NO


def _tags(text: str) -> object:
    """A rendered flow list of tags (``[deploy, 'yes', it's]``), or ``_NO`` when only YAML can say."""
    if len(text) < 3 or text[0] != "[" or text[-1] != "]":
        return _NO
    out = []
    for item in text[1:-1].split(", "):
        # A quoted item holding ", " was cut in two here: its halves fail ``_scalar``. In a flow
        # list YAML ends a plain scalar at "?" too.
        if any(c in item for c in ',?[]{}:"'):
            return _NO
        value = _scalar(item)
        if value is _NO:
            return _NO
        out.append(value)
    return out


# The whole header as ``render_fact`` writes it, from the opening line to the closing one. No
# line of it is ``---``, so its closing line is the first ``---`` line (where python-frontmatter
# ends the header too). The values are checked afterwards: printable (``_printable``), then read.
_T = r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00)"
_HEADER = re.compile(
    "---\n"
    "kind: knowledge\n"
    "title: ([^\n]*)\n"
    "description: ([^\n]*)\n"
    "metadata:\n"
    "  actor: (agent|user)\n"
    "origin_session_id: ([^\n]*)\n"
    f"(?:created_at: {_T}\n)?"
    f"updated_at: {_T}\n"
    "(?:tags: ([^\n]*)\n)?"
    "---\n"
)


def _printable(value: str) -> bool:
    """Neither a character YAML refuses nor a line break of its own (asked when ``str.isprintable``,
    which says yes to neither and at C speed, said no)."""
    return not (_BREAKS.search(value) or _NON_PRINTABLE.search(value))


Rendered = tuple[dict[str, Any], str, str | None, str]


def read_rendered(text: str) -> Rendered | None:
    """``(metadata, body, created_at, updated_at)`` of a header in ``render_fact``'s form, the
    two times as written (``created_at`` None when the header has none), or None: ``split_rendered``
    with the times' text, which a documents row holds as the file wrote it."""
    m = _HEADER.match(text)
    if m is None:
        return None
    title, description, actor, origin, created_text, updated_text, tags_text = m.groups()
    # Written out, without loops: a rebuild reads every file's header here. The values are checked
    # as one text: printable is a property of each character.
    values = f"{title}{description}{origin}{tags_text or ''}"
    if not values.isprintable() and not _printable(values):
        return None
    title_value = _scalar(title)
    description_value = _scalar(description)
    origin_value = None if origin == "null" else _scalar(origin)  # what _scalar gives "null"
    if title_value is _NO or description_value is _NO or origin_value is _NO:
        return None
    try:  # the shape of a time but no real one (a hand-edited 2026-02-30): YAML's
        created = None if created_text is None else datetime.fromisoformat(created_text)
        updated = datetime.fromisoformat(updated_text)
    except ValueError:
        return None
    meta: dict[str, Any] = {
        "kind": "knowledge",
        "title": title_value,
        "description": description_value,
        "metadata": {"actor": actor},
        "origin_session_id": origin_value,
    }
    if created is not None:
        meta["created_at"] = created
    meta["updated_at"] = updated
    if tags_text is not None:
        tags = _tags(tags_text)
        if tags is _NO:
            return None
        meta["tags"] = tags
    body = text[m.end() :]
    # python-frontmatter reads the whole text with "\r\n" made "\n": a body with CRLF lines
    # under a header with LF ones (a paste, a partial Windows edit) reads the same here.
    return meta, (body.replace("\r\n", "\n") if "\r" in body else body).strip(), created_text, updated_text


def split_rendered(text: str) -> tuple[dict[str, Any], str] | None:
    """``(metadata, body)`` as python-frontmatter and YAML would give them, or None."""
    found = read_rendered(text)
    return None if found is None else (found[0], found[1])
