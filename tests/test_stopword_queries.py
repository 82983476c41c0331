"""A query of stop words alone ("the and of") finds the same facts on both index backends
(fixes16): PostgreSQL's parser drops every stop word, so no word matched and the substring
fallback's ``ILIKE '%the%'`` found "the" inside "Theory", "other" and "father" (nearly every
document of a real store), where SQLite's word index matched the facts holding the words."""

from __future__ import annotations

from pathlib import Path

import pytest

from coffer_memory import MemoryService

FACTS = {
    "alembic": "Database migrations are generated with alembic",
    "license": "The license of the PDF library is renewed in January",
    "notes": "Keep the deploy notes short and to the point",
    "review": "Code review needs two approvals",
    "theory": "Theory: another brother's father",
}


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("the and of", {"license", "notes"}),
        ("The, AND?", {"license", "notes"}),
        ("the", {"license", "notes"}),
        ("is the", {"license", "notes"}),
    ],
)
def test_a_stop_word_query_finds_the_same_on_both_backends(
    index_backend: str, tmp_home: Path, query: str, found: set[str]
) -> None:
    with MemoryService(tmp_home) as svc:
        for text in FACTS.values():
            svc.remember(text, store="global")
        hits = svc.recall(query, stores=["global"], mode="keyword").hits
        assert {k for k, v in FACTS.items() if v in {h.text for h in hits}} == found
        # A content word beside them is still what ranks first, on both.
        first = svc.recall(query + " alembic", stores=["global"], mode="keyword").hits[0]
        assert first.text == FACTS["alembic"]
