"""A keyword recall fuses its stores' lists by rank in turn (``_fusion.rrf_disjoint``): the same
keys in the same order as reciprocal rank fusion (``rrf_order``) whenever no key is in two lists,
and the recall takes the general fusion when a store is named twice."""

from __future__ import annotations

import random
from pathlib import Path

from coffer_memory import MemoryService
from coffer_memory._fusion import disjoint_taken, rrf_disjoint, rrf_order


def test_lists_without_a_shared_key_fuse_as_reciprocal_rank_fusion() -> None:
    r = random.Random(16)
    for _ in range(2000):
        lists = [
            [(f"s{n}", f"id{i}") for i in r.sample(range(60), r.randint(0, 25))]
            for n in range(r.randint(0, 5))
        ]
        limit = r.randint(0, 40)
        assert rrf_disjoint(lists, limit) == rrf_order(lists, limit), (lists, limit)


def test_the_fronts_it_takes_fuse_as_the_whole_lists() -> None:
    """``disjoint_taken`` counts the keys taken from each list, and the fronts of those lengths
    fuse to the same keys (a recall reads rows for those fronts only); lists that run out before
    their turns end take the slow count."""
    r = random.Random(17)
    for _ in range(4000):
        lists = [[(n, i) for i in range(r.randint(0, 12))] for n in range(r.randint(0, 5))]
        limit = r.randint(0, 30)
        taken = disjoint_taken([len(keys) for keys in lists], limit)
        fused = rrf_disjoint(lists, limit)
        assert taken == [sum(1 for key in fused if key[0] == n) for n in range(len(lists))], (lists, limit)
        assert rrf_disjoint([keys[:n] for keys, n in zip(lists, taken, strict=True)], limit) == fused
    assert disjoint_taken([10, 10], 5) == [3, 2]
    assert disjoint_taken([1, 10, 0], 5) == [1, 4, 0]


def test_keys_of_one_rank_keep_the_order_of_their_lists() -> None:
    a, b, c = [("a", "1"), ("a", "2"), ("a", "3")], [("b", "1")], [("c", "1"), ("c", "2")]
    assert rrf_disjoint([a, b, c], 10) == [a[0], b[0], c[0], a[1], c[1], a[2]]
    assert rrf_disjoint([c, b, a], 4) == [c[0], b[0], a[0], c[1]]


def test_a_store_named_twice_recalls_as_named_once(tmp_path: Path) -> None:
    """The stores' lists share every key when one store is named twice: the recall fuses them by
    rank fusion (here: as the store alone), not by taking turns, which would list each hit twice."""
    with MemoryService(home=tmp_path / "home") as svc:
        for i in range(12):
            svc.remember(f"deploy note {i}: the release pipeline and the staging deploy", scope="global")
        once = svc.recall("deploy pipeline", stores=["global"], mode="keyword", limit=5)
        sp = svc.paths("global")
        twice = svc.retrieval.keyword_fused([sp, sp], "deploy pipeline", 5)
    ids = [h.id for h in once.hits]
    assert len(ids) == len(set(ids)) == 5
    assert [h.id for h in twice] == ids
