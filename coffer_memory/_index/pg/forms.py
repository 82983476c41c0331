"""Other forms of a query's words on PostgreSQL (``index/forms.py``: ``db pool`` for ``dbpool``,
``appendonly`` for "append-only", ``py312`` for "Python 3.12", ``teh`` dropped), as on SQLite: the
rules are ``forms.Forms``'s, and a form counts as held when a chunk of the store holds it as a
phrase (``phraseto_tsquery``, which the words' GIN index answers). One statement, and only for a
query that has such forms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..forms import Forms
from .schema import TS_CONFIG

_ONE = (
    f"EXISTS (SELECT 1 FROM coffer_chunks WHERE store = %s AND words @@ phraseto_tsquery('{TS_CONFIG}', %s))"
)


def held(conn: Any, store: str, forms: Sequence[str]) -> set[str]:
    """Which of ``forms`` a chunk of ``store`` holds, each as a phrase."""
    asked = list(dict.fromkeys(forms))
    [found] = conn.execute(
        "SELECT " + ", ".join([_ONE] * len(asked)), [x for f in asked for x in (store, f)]
    ).fetchall()
    return {f for f, yes in zip(asked, found, strict=True) if yes}


def with_forms(conn: Any, store: str, query: str, terms: list[str], stop: frozenset[str]) -> list[str]:
    """``terms`` (``fts.keyword_terms`` of ``query``) with the other forms of its words that the
    store holds, as ``forms.with_forms`` gives them on SQLite; ``stop``: the stopwords."""
    if not terms:
        return terms
    forms = Forms.of(query, terms, stop)
    return forms.terms(lambda asked: held(conn, store, asked)) if forms.asked else terms
