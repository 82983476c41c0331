"""English words of a query: clitics off, and stems for grep.

Questions are full of contractions and possessives (``what's``, ``isn't``, ``who'll``,
``ledger's``). The word index splits them at the apostrophe (``ledger`` and ``s``), so a query
word that keeps its clitic searches a phrase (``"ledger s"``) that a fact saying ``ledger`` does
not hold, and ``what's`` or ``isn't`` count as content words. A query word loses its clitic
here, so what is left is the word itself (``ledger``) or a stopword (``what``, ``is``). Typewriter,
typographic (U+2019, smart quotes) and modifier-letter (U+02BC) apostrophes are all apostrophes.

Grep matches substrings, not words: ``restores`` is not in ``restore drills``, nor ``tables`` in
``Table naming``. A plain word of a grep query is searched as its Porter stem (what the word index
stems it to: ``restor``, ``tabl``), which every inflection of the word holds; a stem that Porter
ended in ``i`` for a ``y`` (``queri``, ``retri``) loses it, as ``query`` and ``queries`` both hold
``quer``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import apsw

_APOSTROPHES = "'\u2019\u02bc"
# 's (is, has, possessive), 're, 've, 'll, 'd (had, would), 'm; n't is cut before its apostrophe.
_CLITIC = re.compile(f"^(.+?)(?:n[{_APOSTROPHES}]t|[{_APOSTROPHES}](?:s|re|ve|ll|d|m))$")
# Negations whose stem changed when n't was attached: can't, won't, shan't.
_IRREGULAR = {"ca": "can", "wo": "will", "sha": "shall"}


def without_clitic(word: str) -> str:
    """``word`` (lower case) without an English clitic: ``isn't`` -> ``is``, ``won't`` -> ``will``,
    ``ledger's`` -> ``ledger``; any other word as it is (``o'brien``, ``rock'n'roll``)."""
    if "'" not in word and "\u2019" not in word and "\u02bc" not in word:
        return word  # none of ``_APOSTROPHES``: no clitic (the regex tried each length of its lazy stem)
    m = _CLITIC.match(word)
    if m is None:
        return word
    stem = m.group(1)
    return _IRREGULAR.get(stem, stem) if word[len(stem)] == "n" else stem


_PLAIN = re.compile("[a-z]{4,}")  # shorter words are mostly their own stem; names with digits or
# punctuation (pg_dump, v2.3.0, --no-verify) are searched as written
_stemmer: list[apsw.FTS5Tokenizer] = []


def grep_words(words: Sequence[str]) -> list[str]:
    """``words`` (lower case) as grep patterns: plain words as their stems (see above), the rest
    as they are."""
    if not any(_PLAIN.fullmatch(w) for w in words):
        return list(words)
    if not _stemmer:  # the word index's stemmer, from a connection of its own (no index needed)
        _stemmer.append(apsw.Connection(":memory:").fts5_tokenizer("porter", ["unicode61"]))
    out = []
    for word in words:
        if _PLAIN.fullmatch(word):
            # Without offsets or colocated tokens, apsw gives the bare token strings.
            stem = list(
                _stemmer[0](
                    word.encode(),
                    apsw.FTS5_TOKENIZE_QUERY,
                    None,
                    include_offsets=False,
                    include_colocated=False,
                )
            )
            word = str(stem[0]) if len(stem) == 1 else word
            word = word[:-1] if word.endswith("i") and len(word) > 4 else word
        out.append(word)
    return list(dict.fromkeys(out))
