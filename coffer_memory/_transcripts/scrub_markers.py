"""The markers the scrubber leaves where it removed something, and how to recognise them."""

from __future__ import annotations

import re
from typing import Final

_MARKER_TEXT: Final = {
    "fenced_output": "command output",
    "log_run": "log output",
    "pasted_file": "file content",
    "diff": "diff",
}
ENCODED_MARKER: Final = "[encoded data removed]"

# A line made only of one of our markers. Runs never cross one, so that two fragments brought
# together by a removal or a truncation are not re-joined into a new run on a second pass.
MARKER_LINE = re.compile(
    r"^\[(?:(?:command output|log output|file content|diff) removed: \d+ lines?"
    r"|encoded data removed|… \d+ characters truncated …)\]$"
)
# Spans a truncation must not cut through (they contain blanks, unlike ``[REDACTED:kind]``).
MARKER_SPAN = re.compile(
    r"\[(?:(?:command output|log output|file content|diff) removed: \d+ lines?"
    r"|encoded data removed|… \d+ characters truncated …)\]|\[REDACTED:[a-z0-9_]+\]"
)


# The start of any marker: a value that starts like one was put there by an earlier pass.
MARKER_START = re.compile(r"\[(?:REDACTED:|encoded\b|command\b|log\b|file\b|diff\b|… )")


def redacted(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def removed_line(kind: str, n_lines: int) -> str:
    return f"[{_MARKER_TEXT[kind]} removed: {n_lines} line{'' if n_lines == 1 else 's'}]"
