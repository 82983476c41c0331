"""Fenced code blocks in Markdown, found the CommonMark way (shared by the chunker and the scrubber).

A fence opens with three or more backticks or tildes and closes only at a line made of the same
character, at least as many times, and blanks: a ```` ``` ```` line inside a ```` ```` ```` block
is content, not its end. A backtick fence's info string may not hold a backtick (```` ```a` ````
is inline code, not a fence). An unclosed fence runs to the end of the text. Indentation is
accepted at any depth, since fences nested in list items are indented.
"""

from __future__ import annotations

import re

__all__ = ["FENCE_CLOSE", "FENCE_OPEN", "fence_spans"]

FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*)$")
FENCE_CLOSE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*$")


def fence_spans(lines: list[str]) -> list[tuple[int, int, str]]:
    """Fenced blocks as (first line, end line exclusive, info string); unclosed ones run to the end."""
    spans: list[tuple[int, int, str]] = []
    i, n = 0, len(lines)
    while i < n:
        m = FENCE_OPEN.match(lines[i])
        if m is None or (m["fence"][0] == "`" and "`" in m["info"]):
            i += 1
            continue
        char, width = m["fence"][0], len(m["fence"])
        j = i + 1
        while j < n:
            c = FENCE_CLOSE.match(lines[j])
            if c is not None and c["fence"][0] == char and len(c["fence"]) >= width:
                break
            j += 1
        end = min(j + 1, n)
        spans.append((i, end, m["info"]))
        i = end
    return spans
