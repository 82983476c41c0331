"""Query text as users type it: English clitics, traditional characters, mixed scripts.

Each class was found by the held-out sets (``bench/heldout.py``, issue #14); the tests hold the
rule for the class, not the held-out questions' wording.
"""

from __future__ import annotations

import pytest

from coffer_memory import MemoryService
from coffer_memory._index.english import without_clitic
from coffer_memory._index.fts import keyword_terms


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("isn't", "is"),
        ("can't", "can"),
        ("won't", "will"),
        ("what's", "what"),
        ("how're", "how"),
        ("we'll", "we"),
        ("i've", "i"),
        ("ledger's", "ledger"),
        ("don\u2019t", "do"),  # a typographic apostrophe, as macOS and phones type it
        ("it\u02bcs", "it"),
        ("o'brien", "o'brien"),  # not a clitic: the word stays whole
        ("users", "users"),
    ],
)
def test_english_clitics_come_off(word: str, expected: str) -> None:
    assert without_clitic(word) == expected


def test_contractions_and_possessives_leave_content_words() -> None:
    assert keyword_terms("What's the ledger's owner? Isn't it Priya?") == ["ledger", "owner", "priya"]
    assert keyword_terms("why won\u2019t opensearch start") == ["opensearch", "start"]


def test_a_possessive_question_finds_the_fact_not_the_contractions(svc: MemoryService) -> None:
    chatter = svc.remember("What's new: isn't it great that we've moved the dashboard?", store="global")
    fact = svc.remember("The ledger service is run by Priya; ask her before changing it.", store="global")
    for mode in ("keyword", "grep"):
        hits = svc.recall("what's the ledger's status?", stores=["global"], mode=mode).hits
        assert hits and hits[0].id == fact.fact.id, (mode, [h.text for h in hits])
        assert chatter.fact.id not in {h.id for h in hits}
