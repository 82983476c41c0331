"""What ``coffer`` prints to a terminal cannot drive the terminal.

A fact's title, text and tags, a file name, a session's prose: any of them may hold a terminal
escape (``ESC ] 0 ; … BEL`` retitles the window, ``ESC [ 2 J`` clears it, ``ESC ] 52`` writes the
clipboard in many terminals) that an agent remembered from a page it read, or that a hand-written
or synced fact file carries. ``coffer facts list`` printed them raw, so listing facts ran them.
On a terminal, stdout now shows each control character as a visible ``\\xNN`` (tab and line break
stay); a pipe or a file still gets the text byte for byte (``coffer facts show ID > fact.md``).

The bidirectional controls (Unicode's Bidi_Control: U+202A-U+202E, U+2066-U+2069, U+200E,
U+200F, U+061C) show as ``\\u202e`` the same way: a title holding RIGHT-TO-LEFT OVERRIDE is
displayed in an order that lies about what it says ("Trojan Source"); the stored text keeps them.

Zero-width characters show as ``\\u200b`` too, as the web view shows them: ZERO WIDTH SPACE,
WORD JOINER and the BOM (U+200B, U+2060, U+FEFF) always, so that ``pay<ZWSP>pal`` does not read
as ``paypal``. The joiners (ZWNJ U+200C, ZWJ U+200D) only where they join nothing: next to an
ASCII character, a blank or an end. Between two other characters they are part of the text (an
emoji sequence, 👩 ZWJ 💻, is one picture; Persian and the Indic scripts spell words with them),
and a terminal, unlike the page, shows that text for reading and copying as it is.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Any, TextIO

# C0 controls but tab and line feed (a carriage return rewrites the line it is on), DEL, and the
# C1 controls (U+009B is a one-character CSI in terminals that read 8-bit controls).
# And the bidirectional controls, which reorder what a terminal that implements bidi shows.
# And the zero-width characters; the joiners only where they join no two non-ASCII characters.
_CONTROL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]"
    r"|(?<![^\x00-\x7f\s])[\u200c\u200d]|[\u200c\u200d](?![^\x00-\x7f\s])"
)


def _shown(c: str) -> str:
    code = ord(c)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def inert(text: str) -> str:
    """``text`` with every terminal control character written as ``\\xNN``, and every
    bidirectional control and zero-width character that hides something as ``\\uNNNN``."""
    return _CONTROL.sub(lambda m: _shown(m.group()), text)


# What makes a path need quoting: a control character (line breaks and tabs too: a newline in a
# path started a line of its own), a bidirectional control, or a byte that was not UTF-8.
_ODD = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\udc80-\udcff]")


def shown_path(path: object) -> str:
    """A path as ``coffer`` prints it, to a terminal or a pipe: as it is when it holds nothing
    odd, else in double quotes with each odd character written ``\\xNN`` / ``\\uNNNN`` (and ``\\``
    and ``"`` escaped), so that it stays on one line and drives no terminal."""
    text = str(path)
    if not _ODD.search(text):
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')

    def odd(m: re.Match[str]) -> str:
        code = ord(m.group())
        return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else _shown(m.group())

    return '"' + _ODD.sub(odd, escaped) + '"'


class _InertTerminal:
    """A text stream that writes ``inert(text)`` to the terminal it wraps; the rest is its own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(inert(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def inert_stdout() -> Iterator[None]:
    """While it runs, ``sys.stdout`` shows control characters as text when it is a terminal."""
    stream = sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # no stream, or a closed one
        tty = False
    if not tty:
        yield
        return
    sys.stdout = _InertTerminal(stream)
    try:
        yield
    finally:
        sys.stdout = stream
