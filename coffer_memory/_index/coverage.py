"""Coverage: how many of a query's terms a keyword hit holds, and the ranking it corrects.

bm25 over an OR of the query's terms lets one rare term outweigh several common ones: a short
chunk holding only ``instruments`` outranks the one holding ``melanie``, ``play`` and
``instruments``. The candidates bm25 found are re-scored as ``bm25 × (1 + w × share of the query
terms present)``, so a hit holding more of the question moves up among hits of similar bm25.
The terms are compared as the word index sees them (the same tokenizer, CJK runs as their
pieces), from the texts the search already read: no extra query. A CJK piece is looked up as a
substring (a bigram of the index is two adjacent CJK characters), which is what the index saw
without segmenting every candidate again.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence

import apsw

from .cjk import CJK_RUN, has_cjk

# Chosen on LoCoMo's dev conversations (0-4), keyword turn level: R@5 by weight 0 → 0.529,
# 0.3 → 0.533, 1 → 0.545, 2 → 0.549, 4 → 0.553, 1000 (coverage first) → 0.556; flat past 4.
COVERAGE_WEIGHT = 4.0
# The word index's tokenizer (migration 4 in db.py), as apsw names it.
_TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])


def _tokens(tokenize: apsw.FTS5Tokenizer, text: str, reason: int) -> list[str]:
    # Without offsets or colocated tokens, apsw returns the bare token strings.
    found = tokenize(text.encode("utf-8"), reason, None, include_offsets=False, include_colocated=False)
    return [str(t) for t in found]


def by_coverage(
    conn: apsw.Connection,
    terms: Sequence[str],
    ranked: Sequence[tuple[int, float]],
    texts: Mapping[int, tuple[str, str, str]],
    weight: float = COVERAGE_WEIGHT,
) -> list[tuple[int, float]]:
    """``ranked`` (rowid, bm25: lower is better) re-scored by the share of ``terms`` each row's
    text holds, best first; rowid breaks ties as in the search. A query of one term is unchanged."""
    if len(terms) < 2 or not ranked or weight <= 0:
        return list(ranked)
    tokenize = conn.fts5_tokenizer(*_TOKENIZER)
    wanted = []
    for term in terms:
        tokens = _tokens(tokenize, term, apsw.FTS5_TOKENIZE_QUERY)
        cjk = tuple(t for t in tokens if has_cjk(t))
        if tokens:
            wanted.append((frozenset(tokens).difference(cjk), cjk))
    if len(wanted) < 2:
        return list(ranked)
    scored = []
    for rowid, score in ranked:
        found = texts.get(rowid)
        text = found[1] if found else ""
        if not text.isascii():
            text = unicodedata.normalize("NFKC", text)
        words = set(
            _tokens(tokenize, CJK_RUN.sub(" ", text) if has_cjk(text) else text, apsw.FTS5_TOKENIZE_DOCUMENT)
        )
        share = sum(1 for latin, cjk in wanted if latin <= words and all(c in text for c in cjk))
        scored.append((rowid, score * (1.0 + weight * share / len(wanted))))
    return sorted(scored, key=lambda r: (r[1], r[0]))
