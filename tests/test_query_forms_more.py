"""What developers type, session 15 (``index/forms.py``): the parts of one token are not words
typed apart (``node:22-alpine``), Python's versions in each form they are written in (``py312``,
``py3.12``, ``python 3.12``), a word the fact writes apart (``appendonly`` for "append-only"),
swapped letters beside other words (``gti rebase``), a stopword mistyped (``teh``), and the same
questions answered on both index backends.

Each class was left open by ``bench/data/asked_s14.jsonl`` (session 14); the tests hold the rule
for the class, not that set's wording.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from coffer_memory import MemoryService
from coffer_memory._index import forms
from coffer_memory._index.fts import STOPWORDS, keyword_terms
from coffer_memory._index.snapshot import reading

# Each fact holds a name in one form; the others hold the question's other words.
FACTS = {
    "alpine": "The BFF's Dockerfile starts from `node:22-alpine`; its image is rebuilt every week by CI.",
    "nvmrc": "`.nvmrc` pins node18 for the admin app; everything else is on node22.",
    "api": "The API image runs Python 3.12; the worker stays behind.",
    "notebooks": "The notebooks need py3.10 because of the pinned tensorflow wheel.",
    "tox": "CI runs the tox env py311 only, on every pull request.",
    "style": "Python style: ruff, with a line length of 110.",
    "ledger": "The payments ledger is append-only; corrections are new rows.",
    "exports": "Ledger exports: the ledger is exported nightly.",
    "git": "Use git rebase, not merge commits, on feature branches.",
    "lockfile": "Rebase conflicts in the lockfile: regenerate it.",
    "dbpool": "Connections go through `dbpool.New()`; at most 20 per pod.",
    "pool": "The pool of workers is 8; the db is sharded by tenant.",
}

Ask = Callable[[str], list[str]]


@pytest.fixture(params=["sqlite", "postgresql"])
def ask(request: pytest.FixtureRequest, tmp_home: Path) -> Iterator[Ask]:
    """A keyword recall of the facts above on each index backend (set as ``index_backend`` sets
    it: through the environment): the keys of the facts found, best first."""
    if request.param == "postgresql":
        monkeypatch = request.getfixturevalue("monkeypatch")
        monkeypatch.setenv("COFFER_PG_URL", request.getfixturevalue("pg_url"))
        monkeypatch.setenv("COFFER_INDEX_BACKEND", "postgresql")
    with MemoryService(tmp_home) as svc:
        keys = {svc.remember(text, store="global").fact.id: key for key, text in FACTS.items()}
        yield lambda query: [keys[h.id] for h in svc.recall(query, stores=["global"], mode="keyword").hits]


def test_the_parts_of_one_token_are_not_joined(ask: Ask) -> None:
    """``node:22-alpine`` is one name as written: joined to ``node22`` it put the fact holding
    ``node22`` first (session 14's regression)."""
    assert ask("node:22-alpine")[:1] == ["alpine"]


def test_words_typed_apart_are_still_joined(ask: Ask) -> None:
    assert "dbpool" in ask("db pool")[:2]  # the other fact holds both words
    assert "dbpool" in ask("db-pool")[:2]  # kebab case: words, not a name's parts


@pytest.mark.parametrize(
    ("query", "fact"),
    [
        ("py3.12", "api"),  # py3 is a word of the index (py3.10): the whole form is not
        ("py312", "api"),
        ("cp312 wheels", "api"),
        ("python3.10", "notebooks"),  # the fact writes py3.10
        ("tox on python 3.11", "tox"),  # the fact writes py311
    ],
)
def test_python_versions_in_each_form(ask: Ask, query: str, fact: str) -> None:
    assert ask(query)[:1] == [fact]


def test_a_word_the_fact_writes_apart(ask: Ask) -> None:
    assert ask("appendonly ledger")[:1] == ["ledger"]


def test_swapped_letters_beside_other_words(ask: Ask) -> None:
    """The near-spelling fallback runs only when nothing was found: here the other word is."""
    assert ask("gti rebase")[:1] == ["git"]


def test_a_mistyped_stopword_is_dropped_unless_the_index_holds_it(svc: MemoryService) -> None:
    svc.remember("The admin dashboard needs SSO.", store="global")
    db = svc.index.db
    query = "teh admin dashboard"
    with reading(db) as kept:
        assert forms.with_forms(db, query, keyword_terms(query), STOPWORDS, kept) == ["admin", "dashboard"]
    svc.remember("Teh Tarik is what the office drinks.", store="global")  # a word of the index now
    with reading(db) as kept:
        assert "teh" in forms.with_forms(db, query, keyword_terms(query), STOPWORDS, kept)


@pytest.mark.parametrize(
    "query",
    [
        "why is uvicorn pinned?",
        "How do I run the tests for the geo lookup service?!",
        "what port does the e2e job use",
        "which python 3.11 image?",
        "what's the db pool size?",
        "db-pool or db_pool?",
        "node:22-alpine?",
        "tabs\tand  two spaces?",
        "?what leads",
        "a.b?",
        "3.11",
        "...?",
        "",
        "Ünïcode wörds?",
    ],
)
def test_plain_words_as_the_word_expression_splits_them(query: str) -> None:
    # A question of plain words and spaces takes a shortcut past the two regular expressions;
    # every question's words and joins must be what the expressions give.
    text = query.lower()
    words = forms._PLAIN.findall(text)
    got, apart = forms._plain_words(query)
    assert got == words
    if forms._GLUE.search(text) is None:
        assert apart is None
    else:
        assert apart is not None and len(apart) == max(len(words) - 1, 0)
