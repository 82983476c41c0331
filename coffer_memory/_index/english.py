"""English words of a query: clitics off.

Questions are full of contractions and possessives (``what's``, ``isn't``, ``who'll``,
``ledger's``). The word index splits them at the apostrophe (``ledger`` and ``s``), so a query
word that keeps its clitic searches a phrase (``"ledger s"``) that a fact saying ``ledger`` does
not hold, and ``what's`` or ``isn't`` count as content words. A query word loses its clitic
here, so what is left is the word itself (``ledger``) or a stopword (``what``, ``is``). Typewriter,
typographic (U+2019, smart quotes) and modifier-letter (U+02BC) apostrophes are all apostrophes.
"""

from __future__ import annotations

import re

_APOSTROPHES = "'\u2019\u02bc"
# 's (is, has, possessive), 're, 've, 'll, 'd (had, would), 'm; n't is cut before its apostrophe.
_CLITIC = re.compile(f"^(.+?)(?:n[{_APOSTROPHES}]t|[{_APOSTROPHES}](?:s|re|ve|ll|d|m))$")
# Negations whose stem changed when n't was attached: can't, won't, shan't.
_IRREGULAR = {"ca": "can", "wo": "will", "sha": "shall"}


def without_clitic(word: str) -> str:
    """``word`` (lower case) without an English clitic: ``isn't`` -> ``is``, ``won't`` -> ``will``,
    ``ledger's`` -> ``ledger``; any other word as it is (``o'brien``, ``rock'n'roll``)."""
    m = _CLITIC.match(word)
    if m is None:
        return word
    stem = m.group(1)
    return _IRREGULAR.get(stem, stem) if word[len(stem)] == "n" else stem
