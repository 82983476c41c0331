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
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")
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


def _time(text: str) -> object:
    if not _TIME.fullmatch(text):
        return _NO
    try:
        return datetime.fromisoformat(text)
    except ValueError:  # the shape of a time but no real one (a hand-edited 2026-02-30): YAML's
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


_FIELDS = (
    ("kind: ", None),
    ("title: ", _scalar),
    ("description: ", _scalar),
    ("metadata:", None),
    ("  actor: ", None),
    ("origin_session_id: ", _scalar),
    ("created_at: ", _time),
    ("updated_at: ", _time),
)


def split_rendered(text: str) -> tuple[dict[str, Any], str] | None:
    """``(metadata, body)`` as python-frontmatter and YAML would give them, or None."""
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 3)
    if end < 0:
        return None
    header = text[4:end]
    if _BREAKS.search(header) or _NON_PRINTABLE.search(header):
        return None
    lines = header.split("\n")
    tags = _tags(lines.pop()[6:]) if lines[-1].startswith("tags: ") else None  # last when written
    if tags is _NO:
        return None
    if lines[-1:] == [""] or len(lines) not in (7, 8):
        return None
    fields = _FIELDS if len(lines) == 8 else tuple(f for f in _FIELDS if f[0] != "created_at: ")
    meta: dict[str, Any] = {}
    for line, (prefix, read) in zip(lines, fields, strict=True):
        if not line.startswith(prefix):
            return None
        raw = line[len(prefix) :]
        if prefix == "kind: ":
            if raw != "knowledge":
                return None
            meta["kind"] = raw
        elif prefix == "metadata:":
            if raw:
                return None
        elif prefix == "  actor: ":
            if raw not in ("agent", "user"):
                return None
            meta["metadata"] = {"actor": raw}
        else:
            assert read is not None
            value = read(raw)
            if value is _NO:
                return None
            meta[prefix[:-2]] = value
    if tags is not None:
        meta["tags"] = tags
    body = text[end + 5 :]
    # python-frontmatter reads the whole text with "\r\n" made "\n": a body with CRLF lines
    # under a header with LF ones (a paste, a partial Windows edit) reads the same here.
    return meta, (body.replace("\r\n", "\n") if "\r" in body else body).strip()


def rendered_times(text: str, created: bool, updated: bool) -> tuple[str, str] | None:
    """The fact's ``(created_at, updated_at)`` as ``files.format_time`` writes them, read from a
    header ``split_rendered`` read; ``created``/``updated``: whether that time was taken (one out of
    range stands in for the other, as ``parse_fact`` does). None when neither was taken."""
    end = text.find("\n---\n", 3)
    found = []
    for key, taken in (("\ncreated_at: ", created), ("\nupdated_at: ", updated)):
        at = text.find(key, 3, end) if taken else -1
        value = text[at + 13 : at + 42] if at >= 0 else None
        found.append(value if value is not None and value.isascii() else None)
    first, second = found
    if first is None and second is None:
        return None
    return (first or second or "", second or first or "")
