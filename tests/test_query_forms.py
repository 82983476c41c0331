"""What developers type that the fact writes otherwise: words apart that the fact joins (``db
pool`` for ``dbpool``), a version glued to its name (``py3.12`` for "Python 3.12") or without its
``v``, a full-width camelCase name, two letters swapped (``reveiw``); and near spellings on both
index backends.

Each class was found by ``bench/data/asked_s13.jsonl`` and ``asked_s14.jsonl`` (sessions 13-14);
the tests hold the rule for the class, not those sets' wording.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from coffer_memory import MemoryService
from coffer_memory._index.fts import keyword_terms

# Each fact holds a name in one form; the distractors hold the question's words in its form.
FACTS = {
    "dbpool": "Connections go through `dbpool.New()`; at most 20 per pod.",
    "auth": "The `useAuthToken` hook refreshes the JWT five minutes early.",
    "backups": "Backups are kept for 35 days in the cold bucket.",
    "python": "The API image runs Python 3.12; the worker stays behind.",
    "node": "Node 22 is the runtime of the BFF.",
    "release": "Release v3.4.0 dropped the `X-Api-Version` header.",
    "encoding": "Payloads are base64 encoded before they are signed.",
    "review": "Code review: two approvals for anything touching billing.",
    "user-id": "Every log line carries the `user_id` of the caller.",
    # distractors
    "pool": "The pool of workers is 8; the db is sharded by tenant, and the token pool is shared.",
    "token": "A token is refreshed by the gateway; auth errors are logged with the token id.",
    "retention": "Retention of logs is 14 days; back them up before an upgrade.",
    "numbers": "The queue keeps 22 partitions and 12 consumers; base images are rebuilt weekly.",
    "changes": "What changed in the last release is in CHANGELOG.md; 4 people review it.",
    "logs": "Logs are shipped to Loki and searched there.",
}


Ask = Callable[[str], list[str]]


@pytest.fixture
def ask(svc: MemoryService) -> Ask:
    """A recall of the facts above, in keyword mode: the keys of the facts found, best first."""
    keys = {svc.remember(text, store="global").fact.id: key for key, text in FACTS.items()}
    return lambda query: [keys[h.id] for h in svc.recall(query, stores=["global"], mode="keyword").hits]


@pytest.mark.parametrize(
    ("query", "fact"),
    [
        ("db pool", "dbpool"),  # two words the fact writes as one
        ("use auth token", "auth"),  # three, one of them a stopword
        ("back up retention", "backups"),  # a word and its particle
    ],
)
def test_words_written_apart_find_the_fact_that_joins_them(ask: Ask, query: str, fact: str) -> None:
    assert fact in ask(query)[:2]


@pytest.mark.parametrize(
    ("query", "fact"),
    [
        ("py3.12", "python"),  # a version glued to a name the fact writes apart
        ("node22", "node"),
        ("what changed in 3.4", "release"),  # the fact tags it v3.4.0
        ("v3.4.0", "release"),  # as written
    ],
)
def test_a_version_finds_the_fact_that_writes_it_otherwise(ask: Ask, query: str, fact: str) -> None:
    assert ask(query)[:1] == [fact]


def test_a_name_the_index_holds_glued_is_not_split(ask: Ask) -> None:
    """``base64`` is a word of the index: its letters and digits are no version of anything."""
    assert ask("base64") == ["encoding"]


def test_a_full_width_camel_case_name_is_searched_as_its_words(
    ask: Ask,
) -> None:
    assert "user id" in keyword_terms("ＵｓｅｒＩｄ in logs")  # as an IME types it
    assert ask("ＵｓｅｒＩｄ in logs")[:1] == ["user-id"]


def test_two_swapped_letters_are_a_near_spelling(ask: Ask) -> None:
    assert ask("reveiw")[:1] == ["review"]


@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("migraton", "Database migrations are generated with alembic"),  # a letter left out
        ("reveiw", "Code review needs two approvals"),  # two letters swapped
        ("licence", "The license of the PDF library is renewed in January"),  # the other spelling
        ("zookeeprr", None),  # near nothing
    ],
)
def test_near_spellings_on_both_backends(
    index_backend: str, tmp_home: Path, query: str, title: str | None
) -> None:
    with MemoryService(tmp_home) as svc:
        for text in (
            "Database migrations are generated with alembic",
            "Code review needs two approvals",
            "The license of the PDF library is renewed in January",
            "Keep the deploy notes short",
        ):
            svc.remember(text, store="global")
        hits = svc.recall(query, stores=["global"], mode="keyword").hits
        assert [h.title for h in hits][:1] == ([title] if title else [])
