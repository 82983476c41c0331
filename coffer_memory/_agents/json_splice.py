"""Write an edited JSON object back into the user's text, changing only what changed.

``splice(text, new, style)`` keeps every member whose value did not change byte for byte (a
one-line ``"allow": ["Bash(ls)", "Read"]`` in a 2-space file stays one line) and renders only new
or changed members, in the file's own style (``JsonStyle``), re-using the layout of the object
they sit in: its member indentation, one-line or not, its separators. Returns ``None`` when the
text cannot be scanned (then the caller renders the whole document).
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

__all__ = ["JsonStyle", "splice"]

_DECODER = json.JSONDecoder()
_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_LITERALS = ("true", "false", "null")


@attrs.frozen
class JsonStyle:
    """How the file writes JSON: ``json.dumps`` arguments."""

    indent: int | str | None
    separators: tuple[str, str]
    ensure_ascii: bool

    def dumps(self, value: Any, prefix: str) -> str:
        """``value`` in this style; continuation lines start with ``prefix`` (the member's indent)."""
        text = json.dumps(
            value, ensure_ascii=self.ensure_ascii, indent=self.indent, separators=self.separators
        )
        return text.replace("\n", "\n" + prefix)


@attrs.frozen
class _Member:
    key_start: int
    value_start: int
    node: _Node


@attrs.frozen
class _Node:
    start: int
    end: int
    members: dict[str, _Member] | None = None
    """For an object: its members by key (in text order)."""


class _Unscannable(Exception):
    pass


def _skip(text: str, i: int) -> int:
    match = _WS.match(text, i)
    return match.end() if match else i


def _string(text: str, i: int) -> tuple[str, int]:
    """The JSON string starting at ``i`` (its opening quote) and the index after it."""
    value, end = _DECODER.raw_decode(text, i)
    if not isinstance(value, str):
        raise _Unscannable
    return value, end


def _scan(text: str, i: int) -> _Node:
    """The value starting at ``i`` (no leading whitespace), with its extent."""
    if i >= len(text):
        raise _Unscannable
    char = text[i]
    if char == "{":
        members: dict[str, _Member] = {}
        j = _skip(text, i + 1)
        if text.startswith("}", j):
            return _Node(i, j + 1, members)
        while True:
            if not text.startswith('"', j):
                raise _Unscannable
            key, after_key = _string(text, j)
            colon = _skip(text, after_key)
            if not text.startswith(":", colon):
                raise _Unscannable
            value_start = _skip(text, colon + 1)
            node = _scan(text, value_start)
            members[key] = _Member(j, value_start, node)
            j = _skip(text, node.end)
            if text.startswith("}", j):
                return _Node(i, j + 1, members)
            if not text.startswith(",", j):
                raise _Unscannable
            j = _skip(text, j + 1)
    if char == "[":
        j = _skip(text, i + 1)
        if text.startswith("]", j):
            return _Node(i, j + 1)
        while True:
            j = _skip(text, _scan(text, j).end)
            if text.startswith("]", j):
                return _Node(i, j + 1)
            if not text.startswith(",", j):
                raise _Unscannable
            j = _skip(text, j + 1)
    if char == '"':
        return _Node(i, _string(text, i)[1])
    for literal in _LITERALS:
        if text.startswith(literal, i):
            return _Node(i, i + len(literal))
    number = _NUMBER.match(text, i)
    if number is None:
        raise _Unscannable
    return _Node(i, number.end())


def _line_indent(text: str, at: int) -> str:
    """The whitespace that starts the line holding ``at``."""
    start = text.rfind("\n", 0, at) + 1
    return _WS.match(text, start).group(0).replace("\n", "").replace("\r", "")  # type: ignore[union-attr]


def _same(a: Any, b: Any) -> bool:
    dump = json.dumps
    return type(a) is type(b) and dump(a, separators=(",", ":")) == dump(b, separators=(",", ":"))


def _render(text: str, node: _Node, old: Any, new: Any, style: JsonStyle) -> str:
    if _same(old, new):
        return text[node.start : node.end]
    own = text[node.start : node.end]
    if not node.members or not isinstance(new, dict) or not isinstance(old, dict):
        # A scalar, an array, or an empty object: rendered whole, in the file's style.
        return style.dumps(new, _line_indent(text, node.start))
    members = list(node.members.values())
    first = members[0]
    colon = text[_string(text, first.key_start)[1] : first.value_start]
    multiline = "\n" in own
    if multiline:
        closing = _line_indent(text, node.end - 1)
        inner = _line_indent(text, first.key_start)
    else:  # a one-line object stays one line: added values use its own spacing
        closing = inner = ""
        comma = text[first.node.end : members[1].key_start] if len(members) > 1 else style.separators[0]
        if len(members) == 1 and style.indent is not None:
            comma = ", " if " " in colon else ","
        style = attrs.evolve(
            style, indent=None, separators=(comma, colon.strip() + colon[len(colon.rstrip()) :])
        )
    pieces = []
    for key, value in new.items():
        member = node.members.get(key)
        if member is not None:
            head = text[member.key_start : member.value_start]
            pieces.append(head + _render(text, member.node, old[key], value, style))
        else:
            head = json.dumps(key, ensure_ascii=style.ensure_ascii) + colon
            pieces.append(head + style.dumps(value, inner))
    if not pieces:
        return "{}"
    if multiline:
        return "{\n" + ",\n".join(inner + p for p in pieces) + "\n" + closing + "}"
    pad = own[1 : first.key_start - node.start]
    return "{" + pad + style.separators[0].join(pieces) + pad[::-1] + "}"


def splice(text: str, old: Any, new: Any, style: JsonStyle) -> str | None:
    """``text`` (which holds ``old``) rewritten to hold ``new``; ``None`` if it cannot be scanned."""
    try:
        start = _skip(text, 0)
        root = _scan(text, start)
    except (_Unscannable, ValueError, IndexError):
        return None
    return text[:start] + _render(text, root, old, new, style) + text[root.end :]
