"""Faster paths give exactly what the plain ones gave (issue #15 items 3 and 4): coverage
scores against a per-text reference, per-store keyword lists against separate searches, the
rendered-frontmatter reader against YAML, and a rebuild through the fast paths against one
through the reference paths, row by row."""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Mapping, Sequence

import apsw
import pytest

from coffer_memory._index import coverage
from coffer_memory._index.cjk import CJK_RUN, has_cjk
from coffer_memory._index.coverage import COVERAGE_WEIGHT, by_coverage

# -- coverage ------------------------------------------------------------------------------------
VOCABULARY = [
    "deploy",
    "deploying",
    "Deployed",
    "migrations",
    "migration",
    "café",
    "CAFÉ",
    "naïve",
    "ünïcode",
    "部署",
    "数据库迁移",
    "の",
    "ｆｕｌｌｗｉｄｔｈ",
    "７３０５８４１９６２７３０５８４１９６",  # the separator in fullwidth digits (NFKC makes it ASCII)
    coverage._SEPARATOR,
    "7\u0301305841962730584196",  # the separator once diacritics are removed
    f"x{coverage._SEPARATOR}y",
    "make-release",
    "e.g.",
    "v1.2",
    "🚀",
    "\u2063",
    "\n",
    "relational",
    "hoping",
    "happiness",
    "",
]


Texts = Mapping[int, tuple[str, str, str]]


def _reference(
    conn: apsw.Connection, terms: Sequence[str], ranked: Sequence[tuple[int, float]], texts: Texts
) -> object:
    """``by_coverage`` as first written: every term and every text tokenized on its own."""
    weight = COVERAGE_WEIGHT
    if len(terms) < 2 or not ranked:
        return list(ranked)
    tokenize = conn.fts5_tokenizer(*coverage._TOKENIZER)

    def tokens(text: str, reason: int) -> list[str]:
        found = tokenize(text.encode("utf-8"), reason, None, include_offsets=False, include_colocated=False)
        return [str(t) for t in found]

    wanted = []
    for term in terms:
        found = tokens(term, apsw.FTS5_TOKENIZE_QUERY)
        cjk = tuple(t for t in found if has_cjk(t))
        if found:
            wanted.append((frozenset(found).difference(cjk), cjk))
    if len(wanted) < 2:
        return list(ranked)
    scored = []
    for rowid, score in ranked:
        row = texts.get(rowid)
        text = row[1] if row else ""
        if not text.isascii():
            text = unicodedata.normalize("NFKC", text)
        words = set(tokens(CJK_RUN.sub(" ", text) if has_cjk(text) else text, apsw.FTS5_TOKENIZE_DOCUMENT))
        share = sum(1 for latin, cjk in wanted if latin <= words and all(c in text for c in cjk))
        scored.append((rowid, score * (1.0 + weight * share / len(wanted))))
    return sorted(scored, key=lambda r: (r[1], r[0]))


def test_coverage_scores_equal_the_per_text_reference() -> None:
    conn = apsw.Connection(":memory:")
    r = random.Random(15)
    for _ in range(400):
        n = r.randint(0, 12)
        texts = {
            i: ("c", " ".join(r.choice(VOCABULARY) for _ in range(r.randint(0, 8))), "s")
            for i in range(n)
            if r.random() < 0.95  # now and then a row whose text is missing
        }
        ranked = [(i, -r.choice([1.0, 2.0, r.uniform(0.1, 9.0)])) for i in range(n)]
        terms = [r.choice(VOCABULARY) for _ in range(r.randint(1, 4))]
        assert by_coverage(conn, terms, ranked, texts) == _reference(conn, terms, ranked, texts), (
            terms,
            texts,
        )


@pytest.mark.parametrize("separator_works", [True, False])
def test_coverage_scores_hold_when_a_text_carries_the_separator(separator_works: bool) -> None:
    conn = apsw.Connection(":memory:")
    coverage._separator_ok[:] = [separator_works]
    try:
        texts = {
            1: ("a", f"deploy {coverage._SEPARATOR} migration", "s"),
            2: ("b", "7\u0301305841962730584196 deploy", "s"),
            3: ("c", "migrations", "s"),
        }
        ranked = [(1, -1.0), (2, -3.0), (3, -2.0)]
        terms = ["deploy", "migration"]
        assert by_coverage(conn, terms, ranked, texts) == _reference(conn, terms, ranked, texts)
    finally:
        coverage._separator_ok.clear()
