"""Keyword scores where FTS5's bm25 floors every term's idf (a home of a fact or two), on SQLite.

PostgreSQL ranks with ts_rank, which has no such floor (``tests/test_pg.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coffer_memory import MemoryService


def test_a_one_fact_home_gives_keyword_scores_that_do_not_read_as_zero(
    svc: MemoryService, repo: Path
) -> None:
    # FTS5's bm25 gives a term held by half the rows or more an idf of 1e-6: in a home of one fact
    # every hit scored about 0.000001, words and word fragments (the trigram index) alike.
    svc.remember("deploys go out on Tuesdays after the standup", store="global")
    for query in ("deploys", "standup deploys", "depl"):
        [hit] = svc.recall(query, stores=["global"], mode="keyword").hits
        assert hit.score >= 0.5, (query, hit.score)
    # Two facts in two stores (the index is the home's): both hold the word, both scores say so,
    # and the shorter fact scores more (bm25's length normalisation, as before).
    svc.remember("deploys are frozen during the holidays because the on-call team is small", cwd=repo)
    score = {h.store: h.score for h in svc.recall("deploys", cwd=repo, mode="keyword").hits}
    assert len(score) == 2 and all(s >= 0.1 for s in score.values()), score
    assert score["global"] > max(s for store, s in score.items() if store != "global")


def test_a_term_with_a_real_idf_keeps_bm25s_scores(svc: MemoryService) -> None:
    # Only a query whose every term is floored is scaled: one rare term, and bm25 is left as it is
    # (its order and its scores), however floored the other terms are.
    for text in ("deploys go out on Tuesdays", "deploys wait for review", "the ui uses chromium"):
        svc.remember(text, store="global")
    raw = svc.index.db.rows(
        "SELECT -bm25(documents_words, 1.0, 0.0, 0.3) FROM documents_words WHERE documents_words MATCH ?",
        ('"chromium"',),
    )
    [hit] = svc.recall("chromium", stores=["global"], mode="keyword").hits
    assert hit.score == pytest.approx(raw[0][0]) and 0.1 < hit.score < 10
