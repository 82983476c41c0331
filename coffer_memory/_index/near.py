"""Near spellings of a query's words, for a keyword recall that found nothing else.

A word of a query that nothing holds, neither as a word nor as a substring, is most often
mistyped (``migraton``), spelled the other side of the Atlantic (``colors`` for ``colours``,
``license`` for ``licence``) or written as one word where the fact has two (``oomkilled``,
``maxretries`` for ``OOM-killed``, ``max_retries``). Such a query found nothing at all. Its
words of four letters or more are then looked up by their trigrams: a chunk counts when one
of its words, or two adjacent words written together, holds ``NEAR_SHARE`` of a query word's
trigrams (two at the least) and the two sets of trigrams have a Dice coefficient of
``NEAR_DICE`` or more. Both: a long pair of words holds half of a word's trigrams by chance
(``outage``: out and age in ``rolloutimage``, Dice 0.29), and a short word has a high Dice
with any word it is part of (``keep`` in ``zookeeprr``: 0.44, but 2 of 7 trigrams);
``colors`` and ``colours`` are 0.5 and 0.44. And the word must begin as the query word does
(its first three letters): words that share an ending are not spellings of each other
(``nothing`` holds 3 of the 5 trigrams of ``something``, Dice 0.5), and a typo is rarely in
the first letters. Only a recall that found nothing else pays for it.

A word with two adjacent letters swapped (``reveiw``) keeps few of its trigrams: the word with
each pair swapped back is looked for as a substring too, and a word that is one of them counts as
near as one letter in the word's length is far (``review``: 5/6).

The statement that reads the candidates is ``fts._near_words``'s on SQLite, ``pg/near.py``'s on
PostgreSQL; this module holds the words asked for and the scoring of what the statement found.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from .cjk import has_cjk

NEAR_SHARE = 0.5
NEAR_DICE = 0.4
NEAR_ROWS = 200  # the most candidate chunks read, by bm25 of their trigrams (twice the limit, 50 at least)
_NEAR_MIN = 4  # shorter words have one or two trigrams: any word sharing one would do
_NEAR_GRAMS = 64  # the most trigrams asked for (a long query of unknown words)
_ALNUM = re.compile(r"[^\W_]+")


def _grams(word: str, size: int) -> set[str]:
    return {word[i : i + size] for i in range(len(word) - size + 1)}


def transpositions(word: str) -> set[str]:
    """``word`` with two adjacent letters swapped, each way it can be (``reveiw`` -> ``review``,
    ...): a transposition keeps few of a word's trigrams (``reveiw`` shares one of four with
    ``review``), so it is looked for as itself."""
    return {word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in range(len(word) - 1)} - {word}


@attrs.frozen
class NearQuery:
    """The query words looked up by their ``size``-grams (the trigram index's) and as themselves
    with two letters swapped, and the MATCH expression asking for those."""

    words: list[str]
    grams: list[set[str]]
    swaps: list[set[str]]
    size: int
    pieces: list[str]  # the grams and the swapped words, each a substring a candidate may hold

    @classmethod
    def of(cls, terms: Sequence[str], size: int) -> NearQuery | None:
        """The words of ``terms`` worth a lookup (None when none is: CJK, or all too short)."""
        words = list(
            dict.fromkeys(
                w for t in terms if not has_cjk(t) for w in _ALNUM.findall(t) if len(w) >= _NEAR_MIN
            )
        )
        if not words:
            return None
        grams = [_grams(w, size) for w in words]
        swaps = [transpositions(w) for w in words]
        asked = list(dict.fromkeys(g for gs in grams for g in sorted(gs)))[:_NEAR_GRAMS]
        # The swapped words as substrings too: a row holding one ranks by its several trigrams.
        asked += sorted({v for vs in swaps for v in vs})[:_NEAR_GRAMS]
        return cls(words=words, grams=grams, swaps=swaps, size=size, pieces=asked)

    @property
    def match(self) -> str:
        """The trigram index's MATCH expression of rows holding any of the pieces."""
        return " OR ".join('"' + g.replace('"', '""') + '"' for g in self.pieces)

    def scored(self, rows: Iterable[tuple[Any, Any, Any]], limit: int) -> list[tuple[float, str, str]]:
        """(score, chunk id, text) of the ``(chunk_id, text, bm25)`` rows holding a near spelling,
        the nearest first (ties by bm25), at most ``limit``."""
        size = self.size
        scored = []
        kept: dict[str, set[str]] = {}  # the grams of each word met, for the rows after

        def near(word: str, gs: set[str], swapped: set[str], parts: list[str]) -> float:
            """The best Dice coefficient of ``gs`` and a word's (or two adjacent words') grams,
            among the words that begin as ``word`` does; a word that is ``word`` with two letters
            swapped (``swapped``) is as near as one letter in the word's length is far."""
            best = 1.0 - 1.0 / len(word) if swapped.intersection(parts) else 0.0
            least = max(2, NEAR_SHARE * len(gs))
            start = word[:size]
            shares = []
            for i, part in enumerate(parts):
                found = kept.get(part) or kept.setdefault(part, _grams(part, size))
                shares.append(len(gs & found))
                if shares[i] >= least and part.startswith(start):
                    best = max(best, 2 * shares[i] / (len(gs) + len(found)))
            for i in range(len(parts) - 1):  # two words written as one: only beside a word that shares
                if (shares[i] or shares[i + 1]) and parts[i].startswith(start[: len(parts[i])]):
                    pair = parts[i] + parts[i + 1]
                    found = kept.get(pair) or kept.setdefault(pair, _grams(pair, size))
                    shared = len(gs & found)
                    if shared >= least and pair.startswith(start):
                        best = max(best, 2 * shared / (len(gs) + len(found)))
            return best if best >= NEAR_DICE else 0.0

        for chunk, text, bm25 in rows:
            folded = unicodedata.normalize("NFKC", str(text)).lower()
            # The grams anywhere in the text bound what one of its words can hold: most candidates
            # (a common gram's rows) fall short here, before their words are cut up.
            wanted = [
                (w, gs, vs)
                for w, gs, vs in zip(self.words, self.grams, self.swaps, strict=True)
                if sum(g in folded for g in gs) >= max(2, NEAR_SHARE * len(gs))
                or any(v in folded for v in vs)
            ]
            score = 0.0
            if wanted:
                parts = _ALNUM.findall(folded)
                score = sum(near(w, gs, vs, parts) for w, gs, vs in wanted)
            if score:
                scored.append((score, -float(bm25), str(chunk), str(text)))
        scored.sort(key=lambda r: (-r[0], -r[1]))
        return [(n, c, t) for n, _, c, t in scored[:limit]]
