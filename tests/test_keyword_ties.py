"""Keyword hits of equal score come in an order that is the facts' own, whatever order the index
rows were written in: a rebuild (which inserts files in the walk's order, not the order they
were written) gives the same answer as the index written fact by fact."""

from __future__ import annotations

import random
from pathlib import Path

from coffer_memory import MemoryService

WORDS = ("amber", "birch", "cobalt", "dune", "ember", "fjord", "garnet", "heron")

# Word-index queries (every fact scores the same for the first two), a word fragment (the trigram
# index) and a word too short for either (the LIKE scan).
QUERIES = ("lighthouse", "keeper tide", "amber lighthouse", "ighthous", "ke")


def answers(svc: MemoryService, repo: Path) -> dict[tuple[str, str, int], list[str]]:
    """Each query's keyword hit ids, in the global store alone and in the project's two stores,
    at limits that cut through the tied facts."""
    out: dict[tuple[str, str, int], list[str]] = {}
    for query in QUERIES:
        for limit in (3, 5, 12):
            out[query, "global", limit] = [
                h.id for h in svc.recall(query, stores=["global"], mode="keyword", limit=limit).hits
            ]
            out[query, "project", limit] = [
                h.id for h in svc.recall(query, cwd=repo, mode="keyword", limit=limit).hits
            ]
            out[query, "tagged", limit] = [
                h.id for h in svc.recall(query, cwd=repo, mode="keyword", limit=limit, tags=["tides"]).hits
            ]
    return out


def test_hits_of_equal_score_keep_their_order_after_a_rebuild(svc: MemoryService, repo: Path) -> None:
    # Facts of the same length holding the query's words once each: bm25 gives them one score.
    # Written in a shuffled order, so that the rebuild's walk (by file name) inserts them in
    # another order than they were written.
    order = list(range(48))
    random.Random(5).shuffle(order)
    for n in order:
        text = f"the lighthouse keeper logged {WORDS[n % 8]} tide {n:03d}"
        if n % 2:
            svc.remember(text, store="global", tags=["tides"])
        else:
            svc.remember(text, cwd=repo, tags=["tides"])
    written = answers(svc, repo)
    assert all(written.values()), written
    assert len(written["lighthouse", "global", 12]) == 12
    svc.reindex(rebuild=True)
    rebuilt = answers(svc, repo)
    changed = {key: (written[key], rebuilt[key]) for key in written if written[key] != rebuilt[key]}
    assert not changed, changed
