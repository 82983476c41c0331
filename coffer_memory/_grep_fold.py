"""How grep compares a query with a file: both lowercased and composed (NFC), the Turkish dotted
capital I as a plain ``i``; and the ripgrep patterns that find every line doing so.

A file holds a pattern when ``fold(file)`` holds ``fold(pattern)``. ``str.lower`` alone compared
code points: a decomposed ``cafe\\u0301`` missed a composed ``café`` (and the reverse), and
``İstanbul`` (whose lowercase is ``i`` and a combining dot above) missed ``istanbul``. Both
built-in backends decide with ``fold`` (rg finds the lines, Python folds them), so they agree;
ASCII is only lowercased, as before (``str.isascii`` at C speed decides).

ripgrep cannot compose a file's text, so ``rg_patterns`` widens each pattern into a regex that
matches every raw spelling of its folded form: each ``i`` also as ``İ`` and with a combining dot
after it, each other non-ASCII character also decomposed. Its ``--ignore-case`` does the rest
(simple case folding: every character whose lowercase is one character). Patterns with neither
stay fixed strings (``--fixed-strings``, rg's path until now).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

_DOTTED = "i\u0307"  # what "İ".lower() gives: i and U+0307 COMBINING DOT ABOVE
# The characters rg's regex syntax gives a meaning; each is escaped with a backslash.
_META = frozenset("\\.+*?()|[]{}^$#&-~")


def fold(text: str) -> str:
    """``text`` as grep compares it: lowercased, composed (NFC), ``i`` with a dot above as ``i``."""
    low = text.lower()
    if low.isascii():
        return low
    return unicodedata.normalize("NFC", low).replace(_DOTTED, "i")


def _regex_of(folded: str) -> str:
    """A regex (rg's syntax, with ``--ignore-case``) of every raw spelling of ``folded``."""
    out = []
    for ch in folded:
        if ch == "i":
            out.append("(?:i\u0307?|\u0130)")
        elif ch in _META:
            out.append("\\" + ch)
        elif ch.isascii():
            out.append(ch)
        else:
            decomposed = unicodedata.normalize("NFD", ch)
            out.append(ch if decomposed == ch else f"(?:{ch}|{decomposed})")
    return "".join(out)


def rg_patterns(patterns: Sequence[str]) -> tuple[bool, list[str]]:
    """Whether rg searches ``patterns`` as fixed strings, and what it is given: the patterns as
    they are when none needs widening (ASCII without an ``i``), else each one's regex."""
    folded = [fold(p) for p in patterns]
    if all(f.isascii() and "i" not in f for f in folded):
        return True, list(patterns)
    return False, [_regex_of(f) for f in folded]
